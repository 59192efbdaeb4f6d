"""The long-lived roles' GC settings (distsched/gc_tuning.py)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from distsched import gc_tuning


@pytest.fixture(autouse=True)
def restore_gc() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


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
