"""Snapshot, the facade: the parts' state under the old names, and no cycle through them."""

from __future__ import annotations

import gc
import weakref

from distsched.framework.snapshot import Snapshot
from tests.framework.builders import make_node, make_pod

ARRAYS = ("allocatable", "requested", "free", "nonzero_requested", "unschedulable", "valid")


def reshaped() -> Snapshot:
    snapshot = Snapshot(capacity=1)
    snapshot.add_node(make_node("a"))
    snapshot.add_node(make_node("b", extra={"example.com/gpu": 1}))  # grows, adds a column
    snapshot.add_pod(make_pod("p", node_name="a", requests={"example.com/fpga": 1}))
    return snapshot


def test_the_arrays_are_the_tables_after_it_replaced_them() -> None:
    snapshot = reshaped()
    assert snapshot.capacity == 2 and "example.com/fpga" in snapshot.resource_index
    for name in (*ARRAYS, "generation"):
        assert getattr(snapshot, name) is getattr(snapshot.table, name), name


def test_a_snapshot_is_freed_without_the_cycle_collector() -> None:
    gc.disable()
    try:
        snapshot = reshaped()
        gone = weakref.ref(snapshot)
        del snapshot
        assert gone() is None
    finally:
        gc.enable()
