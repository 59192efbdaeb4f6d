"""Garbage-collector settings of the long-lived roles (worker, binder, controller).

A scheduling worker holds hundreds of thousands of objects for as long as it runs (the
informer's objects, parsed pods and nodes, the snapshot) and allocates many short-lived
ones per pod. With CPython's default thresholds (700, 10, 10) a young collection runs
every 700 net allocations and a full one walks the whole heap again every few thousand
pods, although almost nothing in it is garbage: 1.0-1.2 s of GC in a worker that spends
8.5-9.5 s scheduling SchedulingBasic (5,000 nodes, 1,000 + 20,000 pods), ~12% of its CPU.

- :func:`freeze_initial_state` after the initial list: what the role loaded to start
  (nodes, pods, the snapshot; for a binder its modules and profiles) moves to the
  permanent generation, which no collection walks. It is still freed by reference
  counting when dropped; a role that drops it wholesale calls :func:`unfreeze` first.
- :data:`THRESHOLDS`: a young generation of 50,000 objects, so that the garbage of a
  whole batch of pods dies young (a young collection costs what survives it, not what
  died), and middle collections half as often. The full-collection threshold stays
  CPython's: full collections still run, and CPython also waits until the objects that
  survived since the last one reach a quarter of the heap it found then, so their cost
  stays proportional to the heap's growth, and garbage cycles that grew old are still
  collected.

Measured on that run (1 worker, 3 runs each, GC seconds from gc.callbacks): defaults
1.0-1.2 s of GC and 0.313-0.340 ms worker CPU per pod; (10_000, 10, 10) 0.26-0.29 s and
0.283-0.297 ms; (50_000, 20, 10) 0.16-0.20 s and 0.275-0.293 ms; (100_000, 50, 1000),
which all but disables full collections, no better: 0.16-0.17 s and 0.274-0.299 ms.
With 2 workers (both together): defaults 2.1-2.3 s and 0.441-0.453 ms; (50_000, 20, 10)
0.34-0.36 s and 0.360-0.375 ms; the others within that noise.

- :class:`Settler`, a scheduling worker's steady state. The worker keeps what every batch
  adds (its own parsed pods, a ref per pod of the cluster, the snapshot's entries) for as
  long as the pods exist, so every collection above walked it again: with the thresholds
  alone a worker still spent 0.95-1.14 s in the collector over a 50,000-pod run at W=1
  (0.41-0.45 s in each of 4 workers; three full collections of a growing heap were most
  of it), ~10 us of its ~180 per pod while scheduling, and reclaimed ~1,500 objects in
  all. Between batches the settler moves
  everything alive to the permanent generation (``gc.freeze()`` merges the lists, walking
  nothing), so the collector walks each object at most once more, at its periodic full
  collection: every :data:`FULL_COLLECTION_INTERVAL_S` it gives the frozen objects back,
  collects everything and freezes again, reclaiming the reference cycles that died frozen
  (refcounting frees everything else at once, frozen or not).

Every collection's CPU time is counted in ``distsched_gc_seconds_total{generation}``.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable
from typing import Any

from distsched import metrics

log = logging.getLogger(__name__)

THRESHOLDS = (50_000, 20, 10)
FULL_COLLECTION_INTERVAL_S = 300.0
"""How long reference cycles that died frozen may wait for a :class:`Settler` to reclaim
them (a worker made ~1,500 in a whole 50,000-pod run)."""

_BY_GENERATION = [metrics.gc_seconds.labels(str(g)) for g in range(3)]
_collection_started = [0.0]


def _time_collection(phase: str, info: dict[str, Any]) -> None:
    """gc callback: a collection's CPU time (of the collecting thread, which holds the GIL
    throughout) into ``distsched_gc_seconds_total``."""
    if phase == "start":
        _collection_started[0] = time.thread_time()
    else:
        _BY_GENERATION[info["generation"]].inc(time.thread_time() - _collection_started[0])


def tune() -> None:
    """Set :data:`THRESHOLDS` and time every collection: call once when a long-lived role
    starts."""
    gc.set_threshold(*THRESHOLDS)
    if _time_collection not in gc.callbacks:
        gc.callbacks.append(_time_collection)


def freeze_initial_state() -> None:
    """Collect once, then move every object alive to the permanent generation (call after
    the role's initial list, before its steady state)."""
    gc.collect()
    gc.freeze()
    log.debug("gc: froze %d objects after the initial list", gc.get_freeze_count())


def unfreeze() -> None:
    """Give the frozen objects back to the oldest generation: a role that drops the state
    it froze (a controller that lost its lease) lets full collections see it again."""
    gc.unfreeze()


class Settler:
    """A worker's garbage-collector steady state (see the module docstring): call
    :meth:`settle` between batches, in the thread that runs them."""

    def __init__(
        self,
        interval_s: float = FULL_COLLECTION_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._interval_s = interval_s
        self._clock = clock
        self._next_full = clock() + interval_s
        self.full_collections = 0

    def settle(self) -> None:
        """Move everything alive to the permanent generation; first, when the interval has
        passed, collect everything (the frozen objects included)."""
        now = self._clock()
        if now >= self._next_full:
            gc.unfreeze()
            gc.collect()
            self.full_collections += 1
            self._next_full = now + self._interval_s
        gc.freeze()
