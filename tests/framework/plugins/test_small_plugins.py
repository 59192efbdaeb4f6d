"""PrioritySort, SchedulingGates, NodeUnschedulable, NodeName and DefaultBinder."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from distsched.framework.cycle_state import CycleState
from distsched.framework.interface import Handle
from distsched.framework.plugins import (
    default_binder,
    node_name,
    node_unschedulable,
    priority_sort,
    scheduling_gates,
)
from distsched.framework.status import Code, Status
from distsched.model.errors import ManifestError
from distsched.model.objects import Pod, Toleration
from tests.framework.builders import make_node, make_pod, run_filter, snapshot_of


@dataclass
class Queued:
    pod: Pod
    timestamp: float


@pytest.mark.parametrize(
    ("p1", "t1", "p2", "t2", "less"),
    [
        (100, 2.0, 10, 1.0, True),  # higher priority first, whatever the time
        (10, 1.0, 100, 2.0, False),
        (5, 1.0, 5, 2.0, True),  # same priority: earlier first
        (5, 2.0, 5, 1.0, False),
        (None, 1.0, 0, 2.0, True),  # no priority counts as 0
        (-(2**31), 1.0, 2**31 - 1, 1.0, False),
    ],
)
def test_priority_sort(p1, t1, p2, t2, less):
    plugin = priority_sort.new({}, Handle())
    a = Queued(make_pod("a", priority=p1), t1)
    b = Queued(make_pod("b", priority=p2), t2)
    assert plugin.less(a, b) is less


def test_scheduling_gates():
    plugin = scheduling_gates.new({}, Handle())
    assert plugin.pre_enqueue(make_pod()) is None
    status = plugin.pre_enqueue(make_pod(gates=["foo", "bar"]))
    assert status == Status.unresolvable("waiting for scheduling gates: [foo bar]")


RAW_GATES: list[object] = [
    None,
    [],
    [{"name": "example.com/wait"}],
    [{"name": "a"}, {"name": "b"}],
    [{"name": "a"}, {"name": "a"}],  # duplicate: the pod does not parse
    [{"name": "Not a name!"}],
    [{}],
    ["a"],
    "",
    "a",
    {},
    {"name": "a"},
    0,
    False,
]


@pytest.mark.parametrize("gates", RAW_GATES)
def test_scheduling_gates_admits_from_the_raw_object_only_when_pre_enqueue_would(gates):
    """admits_object says True only where the typed path (parse, then pre_enqueue; a pod
    that does not parse is not gated) says the pod is not gated."""
    plugin = scheduling_gates.new({}, Handle())
    spec: dict[str, object] = {"containers": [{"name": "c"}]}
    if gates is not None:
        spec["schedulingGates"] = gates
    obj = {"metadata": {"name": "p"}, "spec": spec}
    try:
        gated = plugin.pre_enqueue(Pod.from_dict(obj)) is not None
    except ManifestError:
        gated = False
    if plugin.admits_object(obj):
        assert not gated
    else:
        assert gates  # only a non-empty value goes the typed way
    assert plugin.admits_object({"metadata": {"name": "p"}}) is False  # no spec: cannot tell
    assert plugin.admits_object({"spec": ["not", "a", "map"]}) is False


UNSCHEDULABLE = Status.unresolvable(node_unschedulable.ERR_REASON_UNSCHEDULABLE)


@pytest.mark.parametrize(
    ("node_unschedulable_flag", "tolerations", "want"),
    [
        (False, [], None),
        (True, [], UNSCHEDULABLE),
        (True, [Toleration("node.kubernetes.io/unschedulable", "Exists", "", "NoSchedule")], None),
        (
            True,
            [Toleration("node.kubernetes.io/unschedulable", "Exists", "", "NoExecute")],
            UNSCHEDULABLE,
        ),
        (True, [Toleration("", "Exists")], None),
    ],
)
def test_node_unschedulable(node_unschedulable_flag, tolerations, want):
    snapshot = snapshot_of(
        [make_node("n1", unschedulable=node_unschedulable_flag), make_node("n2")]
    )
    got = run_filter(
        node_unschedulable.new({}, Handle()), make_pod(tolerations=tolerations), snapshot
    )
    assert got == {"n1": want, "n2": None}


def test_node_unschedulable_follows_updates():
    snapshot = snapshot_of([make_node("n1")])
    plugin = node_unschedulable.new({}, Handle())
    snapshot.update_node(make_node("n1", unschedulable=True))
    assert run_filter(plugin, make_pod(), snapshot)["n1"] == UNSCHEDULABLE
    snapshot.remove_node("n1")
    snapshot.add_node(make_node("n1"))
    assert snapshot.num_unschedulable == 0
    assert run_filter(plugin, make_pod(), snapshot)["n1"] is None


def test_node_name():
    snapshot = snapshot_of([make_node("n1"), make_node("n2")])
    plugin = node_name.new({}, Handle())
    mismatch = Status.unresolvable(node_name.ERR_REASON)
    assert run_filter(plugin, make_pod(), snapshot) == {"n1": None, "n2": None}
    assert run_filter(plugin, make_pod(node_name="n2"), snapshot) == {"n1": mismatch, "n2": None}
    assert run_filter(plugin, make_pod(node_name="gone"), snapshot) == {
        "n1": mismatch,
        "n2": mismatch,
    }


def test_default_binder_calls_the_handle():
    bound: list[tuple[str, str]] = []
    handle = Handle(bind_pod=lambda pod, node: bound.append((pod.key, node)))
    plugin = default_binder.new({}, handle)
    assert plugin.bind(CycleState(), make_pod("p"), "n1") is None
    assert bound == [("default/p", "n1")]


def test_default_binder_reports_failures_as_errors():
    def refuse(pod: Pod, node: str) -> None:
        raise RuntimeError("pod default/p is already bound to n2")

    status = default_binder.new({}, Handle(bind_pod=refuse)).bind(CycleState(), make_pod("p"), "n1")
    assert status is not None and status.code == Code.ERROR
    assert "already bound" in status.message()
    missing = default_binder.new({}, Handle()).bind(CycleState(), make_pod("p"), "n1")
    assert missing is not None and missing.code == Code.ERROR
