"""NodeIndexes: what moves its versions and caches, without the other parts."""

from __future__ import annotations

from distsched.framework.snapshot import NodeIndexes
from distsched.model.objects import Taint
from tests.framework.builders import make_node

TAINT = Taint("k", "NoSchedule", "v")


def test_the_node_set_changing_is_a_label_change() -> None:
    indexes = NodeIndexes(4)
    plain = make_node("a")
    indexes.set_node(0, plain, new=True)
    after_add = indexes.label_version
    assert after_add > 0  # no label, but topology domains and masks span the node set
    mask = indexes.label_exists_mask("zone")
    indexes.set_node(0, make_node("a", cpu=1), new=False)
    assert indexes.label_version == after_add and indexes.label_exists_mask("zone") is mask
    indexes.remove_node(0)
    assert indexes.label_version > after_add


def test_remove_node_leaves_nothing_indexed() -> None:
    indexes = NodeIndexes(2)
    node = make_node("a", labels={"zone": "z1"}, taints=[TAINT], images=[(("img:1",), 10)])
    indexes.set_node(1, node, new=True)
    taints_before = indexes.taint_version
    indexes.remove_node(1)
    assert indexes.labels(1) == {} and indexes.taints(1) == () and indexes.images(1) == {}
    assert indexes.label_keys() == [] and indexes.distinct_taints() == ()
    assert indexes.image_num_nodes("img:1") == 0
    assert indexes.taint_version > taints_before and not indexes.taint_mask(TAINT).any()


def test_growing_makes_masks_capacity_long_and_is_a_taint_change() -> None:
    indexes = NodeIndexes(2)
    indexes.set_node(0, make_node("a", labels={"zone": "z1"}, taints=[TAINT]), new=True)
    assert len(indexes.taint_mask(TAINT)) == 2 and len(indexes.label_mask("zone", "z1")) == 2
    version = indexes.taint_version
    indexes.grow(8)
    assert indexes.taint_version > version  # caches of taint masks kept outside are stale
    assert len(indexes.taint_mask(TAINT)) == 8 and len(indexes.label_mask("zone", "z1")) == 8
    assert len(indexes.image_sizes("img:1")) == 8 and indexes.labels(7) == {}
