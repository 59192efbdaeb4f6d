"""The long-lived roles' GC settings (distsched/gc_tuning.py)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from distsched import gc_tuning, metrics


@pytest.fixture(autouse=True)
def restore_gc() -> Iterator[None]:
    thresholds, callbacks = gc.get_threshold(), list(gc.callbacks)
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)
    gc.callbacks[:] = callbacks


def test_tune_keeps_full_collections_at_cpythons_threshold() -> None:
    gc_tuning.tune()
    assert gc.get_threshold() == gc_tuning.THRESHOLDS
    assert gc.get_threshold()[2] == 10  # full collections still run


def test_freeze_keeps_objects_alive_and_unfreeze_gives_them_back() -> None:
    held = [{"i": i} for i in range(1000)]
    gc_tuning.freeze_initial_state()
    assert gc.get_freeze_count() >= len(held)
    gc_tuning.unfreeze()
    assert gc.get_freeze_count() == 0
    assert held[999] == {"i": 999}


def test_every_collection_is_timed_by_generation() -> None:
    gc_tuning.tune()
    gc_tuning.tune()  # once is enough: a second call adds no second callback
    assert gc.callbacks.count(gc_tuning._time_collection) == 1
    series = metrics.gc_seconds.labels("2")
    before = series._value.get()
    held = [[i] for i in range(200_000)]  # something to walk
    gc.collect()
    assert series._value.get() > before
    del held


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_settler_freezes_what_is_alive_and_collects_frozen_cycles_on_its_interval() -> None:
    now = [1000.0]
    settler = gc_tuning.Settler(interval_s=300.0, clock=lambda: now[0])
    cycle = _Cycle()
    dead = weakref.ref(cycle)
    settler.settle()
    assert gc.get_freeze_count() > 0
    assert gc.get_count()[0] == 0  # nothing young left to walk
    del cycle  # garbage now, but frozen: only a full collection of frozen objects finds it
    gc.collect()
    assert dead() is not None
    now[0] += 299.0
    settler.settle()
    assert dead() is not None and settler.full_collections == 0
    now[0] += 1.0
    settler.settle()
    assert dead() is None and settler.full_collections == 1
    assert gc.get_freeze_count() > 0  # and what is alive is frozen again
