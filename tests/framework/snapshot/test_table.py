"""NodeTable: slots, the per-slot arrays and generations, without the other parts."""

from __future__ import annotations

import numpy as np

from distsched.framework.snapshot import CPU_COL, PODS_COL, NodeTable
from tests.framework.builders import make_node


def test_a_full_table_takes_a_node_only_after_it_grows() -> None:
    table = NodeTable(capacity=1)
    first = table.add(make_node("a", cpu=1000))
    assert table.full
    table.grow(4)
    assert not table.full and table.capacity == 4
    assert table.add(make_node("b")) == first + 1
    assert table.allocatable[first, CPU_COL] == 1000 and table.allocatable.flags.f_contiguous
    assert all(len(a) == 4 for a in (table.free, table.valid, table.generation))
    assert table.node_indices().tolist() == [0, 1]


def test_free_follows_allocatable_against_the_requested_row() -> None:
    table = NodeTable(capacity=2)
    index = table.add(make_node("a", cpu=1000))
    table.requested[index, CPU_COL] = 300  # as the usage part charges a pod
    table.free[index, CPU_COL] -= 300
    table.update(make_node("a", cpu=2000))
    assert table.free[index, CPU_COL] == 1700
    assert table.free[index, PODS_COL] == 110


def test_a_removed_node_leaves_a_zeroed_slot_reused_lowest_first() -> None:
    table = NodeTable(capacity=4)
    for name in "abc":
        table.add(make_node(name, unschedulable=name != "c"))
    b = table.index_of("b")
    table.requested[b, CPU_COL] = 5
    table.nonzero_requested[b] = (5, 5)
    assert table.num_unschedulable == 2
    assert table.remove("b") == b and table.remove("a") == 0
    assert table.num_unschedulable == 0 and "b" not in table
    assert not table.valid[b] and not table.unschedulable[b]
    for array in (table.allocatable, table.requested, table.free, table.nonzero_requested):
        assert not array[b].any()
    assert table.add(make_node("d")) == 0 and table.add(make_node("e")) == b


def test_touch_many_is_touch_of_each_in_order() -> None:
    one, many = NodeTable(capacity=4), NodeTable(capacity=4)
    for table in (one, many):
        for name in "abcd":
            table.add(make_node(name))
        table.touch(1)
    for index in (3, 0, 2):
        one.touch(index)
    many.touch_many(np.array([3, 0, 2]))
    assert many.generation.tolist() == one.generation.tolist()
    assert many.version == one.version == 4


def test_whoever_holds_the_arrays_hears_when_they_are_replaced() -> None:
    calls: list[int] = []
    table = NodeTable(capacity=1, on_reshape=lambda: calls.append(table.capacity))
    table.add(make_node("a"))
    table.column("cpu")
    table.update(make_node("a", cpu=1))
    assert calls == []  # same arrays
    table.grow(2)
    table.add(make_node("b", extra={"example.com/gpu": 1}))  # a new column
    assert calls == [2, 2]
