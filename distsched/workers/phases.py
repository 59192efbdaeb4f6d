"""The CPU time of a scheduling worker's turns, by phase.

A worker's turn reads what changed in the cluster, pops a batch and schedules it. What
each part costs per pod, and how that moves with the number of workers (every worker
follows every pod of the cluster; only one decides each), is what capacity planning and
profiling ask first, so the worker measures it on its own thread's CPU clock (blocking
reads and waits cost nothing) and exports it as
``distsched_worker_phase_cpu_seconds_total{phase}``; ``distsched bench`` reports it per
pod. A lap is two clock reads: a turn takes ~12 of them, whatever its size.

Phases:

* ``follow``: the informer reading the store's stream (every pod and node of the cluster)
  into the worker's view.
* ``queue_events``: the queue's event handlers (cluster events that move pods back to
  activeQ, with their pre-checks).
* ``feed``: the ledger's change feed (node usage other workers' reservations changed).
* ``pop``: popping the batch from activeQ.
* ``prepare``: reading and parsing the popped pods, choosing their profiles.
* ``decide``: filter, score, choose and assume each pod (PostFilter and gangs too).
* ``reserve``: the ledger's reservation of the batch (with the pods it refuses decided
  again on a refreshed view).
* ``bind``: handing the reserved pods to the binder pool.
* ``housekeeping``: the rest (periodic tasks, the worker's share of the nodes, leases).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from distsched import metrics

FOLLOW = "follow"
QUEUE_EVENTS = "queue_events"
FEED = "feed"
POP = "pop"
PREPARE = "prepare"
DECIDE = "decide"
RESERVE = "reserve"
BIND = "bind"
HOUSEKEEPING = "housekeeping"
PHASES = (FOLLOW, QUEUE_EVENTS, FEED, POP, PREPARE, DECIDE, RESERVE, BIND, HOUSEKEEPING)


class PhaseClock:
    """Laps of one thread's CPU clock, each charged to a phase; published to the metric
    at the end of a turn. Outside a turn (``start`` not called, or published since) laps
    count nothing: a batch scheduled directly, as tests do, is not charged."""

    __slots__ = ("_at", "_clock", "spent")

    def __init__(self, clock: Callable[[], float] = time.thread_time) -> None:
        self._clock = clock
        self._at: float | None = None
        self.spent: dict[str, float] = dict.fromkeys(PHASES, 0.0)

    def start(self) -> None:
        self._at = self._clock()

    def lap(self, phase: str) -> None:
        """Charge the CPU time since the last lap (or the start) to ``phase``."""
        if self._at is None:
            return
        now = self._clock()
        self.spent[phase] += now - self._at
        self._at = now

    def publish(self) -> None:
        """Add the turn's laps to the metric and stop counting until the next start."""
        self._at = None
        spent = self.spent
        for phase, seconds in spent.items():
            if seconds:
                metrics.worker_phase_cpu.labels(phase).inc(seconds)
                spent[phase] = 0.0
