"""The node-update rule the event handlers use (kube's nodeSchedulingPropertiesChange).

Moved from tests/framework/test_runtime.py, whose test covered a dead copy of the rule
(``framework.events.node_scheduling_changes``) that reported any unschedulable flip and
annotation changes; the live rule reports only a node becoming schedulable.
"""

from __future__ import annotations

import dataclasses

from distsched.model.objects import NodeCondition, Taint
from distsched.workers.prechecks import node_change_events
from tests.framework.builders import make_node


def labels(old, new) -> list[str]:  # type: ignore[no-untyped-def]
    return [e.label for e in node_change_events(old, new)]


def test_allocatable_and_label_changes_are_reported_and_no_change_is_nothing():
    old = make_node("n1", labels={"a": "1"})
    new = make_node("n1", cpu=1, labels={"a": "2"}, unschedulable=True)
    assert labels(old, new) == ["NodeAllocatableChange", "NodeLabelChange"]
    assert node_change_events(old, old) == []


def test_only_a_node_becoming_schedulable_counts():
    cordoned = make_node("n1", unschedulable=True)
    open_ = make_node("n1")
    assert labels(cordoned, open_) == ["NodeSpecUnschedulableChange"]
    assert labels(open_, cordoned) == []


def test_taint_and_condition_changes_but_not_annotations():
    old = make_node("n1")
    tainted = make_node("n1", taints=[Taint(key="k", value="v", effect="NoSchedule")])
    assert labels(old, tainted) == ["NodeTaintChange"]
    ready = dataclasses.replace(
        old, status=dataclasses.replace(old.status, conditions=(NodeCondition("Ready", "True"),))
    )
    assert labels(old, ready) == ["NodeConditionChange"]
    annotated = dataclasses.replace(
        old, metadata=dataclasses.replace(old.metadata, annotations={"x": "y"})
    )
    assert labels(old, annotated) == []
