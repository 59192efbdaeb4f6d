"""Framework construction (multiPoint expansion, weights) and the extension-point runners."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from distsched.framework import events as ev
from distsched.framework.cycle_state import CycleState
from distsched.framework.diagnosis import SchedulingError
from distsched.framework.interface import MAX_PERMIT_TIMEOUT_SECONDS, PreEnqueuePlugin
from distsched.framework.profile import build_profiles, default_config
from distsched.framework.runtime import Framework, FrameworkError, PluginRef, PluginSet, Profile
from distsched.framework.status import Code, Status
from distsched.model.objects import Pod
from tests.framework.builders import make_node, make_pod, snapshot_of
from tests.framework.fakes import fake_registry


def framework(plugins: dict[str, PluginSet], args: dict | None = None, registry=None) -> Framework:
    return Framework(Profile("test", plugins, args or {}), registry or fake_registry())


def refs(*names: str) -> list[PluginRef]:
    return [PluginRef(n) for n in names]


def test_multi_point_expands_to_implemented_points():
    fw = framework(
        {"multiPoint": PluginSet(refs("FilterA", "ScoreA", "RecA"))}, {"RecA": {"log": []}}
    )
    assert [p.name for p in fw.pre_filter_plugins] == ["FilterA"]
    assert [p.name for p in fw.filter_plugins] == ["FilterA"]
    assert [(p.name, w) for p, w in fw.score_plugins] == [("ScoreA", 1)]
    assert [p.name for p in fw.pre_score_plugins] == ["ScoreA"]
    assert [p.name for p in fw.reserve_plugins] == ["RecA"]
    assert [p.name for p in fw.bind_plugins] == ["RecA"]
    assert fw.queue_sort_plugin is None


def test_explicit_points_override_multi_point_order_and_weight():
    fw = framework(
        {
            "multiPoint": PluginSet([PluginRef("ScoreA", 2), PluginRef("ScoreB", 3)]),
            "score": PluginSet([PluginRef("ScoreB", 7)]),
        }
    )
    # The overridden plugin comes first, then the remaining multiPoint ones.
    assert [(p.name, w) for p, w in fw.score_plugins] == [("ScoreB", 7), ("ScoreA", 2)]


def test_disabling_at_one_point_keeps_the_others():
    fw = framework(
        {
            "multiPoint": PluginSet(refs("FilterA", "FilterB")),
            "filter": PluginSet(disabled=["FilterA"]),
        }
    )
    assert [p.name for p in fw.filter_plugins] == ["FilterB"]
    assert [p.name for p in fw.pre_filter_plugins] == ["FilterA", "FilterB"]
    star = framework(
        {
            "multiPoint": PluginSet(refs("FilterA", "FilterB")),
            "filter": PluginSet(refs("FilterB"), disabled=["*"]),
        }
    )
    assert [p.name for p in star.filter_plugins] == ["FilterB"]


@pytest.mark.parametrize(
    ("plugins", "message"),
    [
        ({"multiPoint": PluginSet(refs("Nope"))}, "not registered"),
        ({"score": PluginSet(refs("FilterA"))}, "does not extend score"),
        ({"filter": PluginSet(refs("FilterA", "FilterA"))}, "already registered"),
        ({"multiPoint": PluginSet(refs("FilterA", "FilterA"))}, "already registered"),
    ],
)
def test_bad_profiles(plugins, message):
    with pytest.raises(FrameworkError, match=message):
        framework(plugins)


def test_pre_filter_skip_and_result_merge():
    fw = framework(
        {
            "preFilter": PluginSet(refs("FilterA", "FilterB")),
            "filter": PluginSet(refs("FilterA", "FilterB")),
        },
        {
            "FilterA": {"pre_result": frozenset({"n1", "n2"})},
            "FilterB": {"pre_status": Status.skip()},
        },
    )
    state = CycleState()
    result, status, narrowing = fw.run_pre_filter_plugins(state, make_pod(), snapshot_of([]))
    assert status.is_success() and result is not None and result.node_names == {"n1", "n2"}
    assert narrowing == ["FilterA"] and state.skip_filter_plugins == {"FilterB"}


def test_pre_filter_disjoint_results_are_unresolvable():
    fw = framework(
        {"preFilter": PluginSet(refs("FilterA", "FilterB"))},
        {
            "FilterA": {"pre_result": frozenset({"n1"})},
            "FilterB": {"pre_result": frozenset({"n2"})},
        },
    )
    _, status, narrowing = fw.run_pre_filter_plugins(CycleState(), make_pod(), snapshot_of([]))
    assert status == Status.unresolvable(
        "node(s) didn't satisfy plugin(s) [FilterA FilterB] simultaneously"
    )
    assert narrowing == ["FilterA", "FilterB"]


def test_pre_filter_rejection_names_the_plugin():
    fw = framework(
        {"preFilter": PluginSet(refs("FilterA", "FilterB"))},
        {"FilterA": {"pre_status": Status.unschedulable("nope")}},
    )
    _, status, narrowing = fw.run_pre_filter_plugins(CycleState(), make_pod(), snapshot_of([]))
    assert status == Status.unschedulable("nope", plugin="FilterA") and narrowing == ["FilterA"]
    errs = framework(
        {"preFilter": PluginSet(refs("FilterA"))},
        {"FilterA": {"pre_status": Status(Code.ERROR, "broken")}},
    )
    _, status, _ = errs.run_pre_filter_plugins(CycleState(), make_pod(), snapshot_of([]))
    assert status.code == Code.ERROR and "broken" in status.message()


def test_filter_stops_each_node_at_its_first_rejection():
    fw = framework(
        {"filter": PluginSet(refs("FilterA", "FilterB"))},
        {
            "FilterA": {"reject": {"n1": "a says no"}},
            "FilterB": {"reject": {"n1": "b says no", "n2": "b says no"}, "unresolvable": True},
        },
    )
    snapshot = snapshot_of([make_node(f"n{i}") for i in range(4)])
    candidates = snapshot.node_indices()
    outcome = fw.run_filter_plugins(CycleState(), make_pod(), snapshot, candidates)
    assert outcome.passed.tolist() == [0, 3]
    assert [(v.plugin, v.failed.tolist()) for v in outcome.verdicts] == [
        ("FilterA", [1]),
        ("FilterB", [2]),
    ]
    assert fw.plugins["FilterB"].seen == [["n0", "n2", "n3"]]  # n1 never reached FilterB
    assert outcome.verdicts[1].reasons[0][:2] == ("b says no", True)


def test_filter_plugin_error_aborts():
    fw = framework({"filter": PluginSet(refs("FilterA"))}, {"FilterA": {"raise_error": True}})
    snapshot = snapshot_of([make_node("n1")])
    with pytest.raises(SchedulingError, match="boom"):
        fw.run_filter_plugins(CycleState(), make_pod(), snapshot, snapshot.node_indices())


def test_score_weights_normalize_and_skip():
    fw = framework(
        {"score": PluginSet([PluginRef("ScoreA", 3), PluginRef("ScoreB", 0)])},
        {
            "ScoreA": {"scores": {"n1": 10, "n2": 20}, "double": True},
            "ScoreB": {"scores": {"n1": 5}},
        },
    )
    snapshot = snapshot_of([make_node("n1"), make_node("n2")])
    indices = snapshot.node_indices()
    state = CycleState()
    assert fw.run_pre_score_plugins(state, make_pod(), snapshot, indices).is_success()
    total = fw.run_score_plugins(state, make_pod(), snapshot, indices)
    assert total.tolist() == [10 * 2 * 3 + 5, 20 * 2 * 3]
    skipping = framework(
        {"multiPoint": PluginSet(refs("ScoreA", "ScoreB"))},
        {"ScoreA": {"scores": {"n1": 10}, "skip": True}, "ScoreB": {"scores": {"n2": 1}}},
    )
    state = CycleState()
    skipping.run_pre_score_plugins(state, make_pod(), snapshot, indices)
    assert state.skip_score_plugins == {"ScoreA"}
    assert skipping.run_score_plugins(state, make_pod(), snapshot, indices).tolist() == [0, 1]


def test_out_of_range_scores_are_an_error():
    fw = framework({"score": PluginSet(refs("ScoreA"))}, {"ScoreA": {"scores": {"n1": 101}}})
    snapshot = snapshot_of([make_node("n1")])
    with pytest.raises(SchedulingError, match="invalid score"):
        fw.run_score_plugins(CycleState(), make_pod(), snapshot, snapshot.node_indices())


def recorders(args_a: dict, args_b: dict, log: list[str]) -> Framework:
    return framework(
        {"multiPoint": PluginSet(refs("RecA", "RecB"))},
        {"RecA": {"log": log, **args_a}, "RecB": {"log": log, **args_b}},
    )


def test_reserve_then_unreserve_in_reverse():
    log: list[str] = []
    fw = recorders({}, {"reserve": Status.unschedulable("full")}, log)
    status = fw.run_reserve_plugins_reserve(CycleState(), make_pod(), "n1")
    assert status == Status.unschedulable("full", plugin="RecB")
    fw.run_reserve_plugins_unreserve(CycleState(), make_pod(), "n1")
    assert log == ["reserve:A", "reserve:B", "unreserve:B", "unreserve:A"]


def test_permit_wait_reject_and_cap():
    log: list[str] = []
    fw = recorders({"permit": (Status(Code.WAIT), 3600.0)}, {"permit": (None, 0.0)}, log)
    status, waits = fw.run_permit_plugins(CycleState(), make_pod(), "n1")
    assert status.code == Code.WAIT and waits == {"RecA": MAX_PERMIT_TIMEOUT_SECONDS}
    fw = recorders(
        {"permit": (Status(Code.WAIT), 5.0)}, {"permit": (Status.unschedulable("no"), 0)}, []
    )
    status, waits = fw.run_permit_plugins(CycleState(), make_pod(), "n1")
    assert status == Status.unschedulable("no", plugin="RecB") and waits == {}


def test_bind_chain_skips():
    log: list[str] = []
    fw = recorders({"bind": Status.skip()}, {}, log)
    assert fw.run_bind_plugins(CycleState(), make_pod(), "n1").is_success()
    assert log == ["bind:A", "bind:B"]
    fw = recorders({"bind": Status.skip()}, {"bind": Status.skip()}, [])
    assert fw.run_bind_plugins(CycleState(), make_pod(), "n1").is_skip()
    fw = recorders({"bind": Status(Code.ERROR, "store down")}, {}, [])
    status = fw.run_bind_plugins(CycleState(), make_pod(), "n1")
    assert status.code == Code.ERROR and status.plugin == "RecA"
    empty = framework({})
    assert empty.run_bind_plugins(CycleState(), make_pod(), "n1").is_skip()


def default_framework() -> Framework:
    return build_profiles(default_config())["default-scheduler"]


def test_pre_enqueue_runs_scheduling_gates():
    fw = default_framework()
    assert fw.run_pre_enqueue_plugins(make_pod()).is_success()
    status = fw.run_pre_enqueue_plugins(make_pod(gates=["g"]))
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.plugin == "SchedulingGates"


class _Raising(PreEnqueuePlugin):
    name = "Raising"

    def pre_enqueue(self, pod: Pod) -> Status | None:
        return None

    def admits_object(self, obj: Mapping[str, Any]) -> bool:
        raise RuntimeError("boom")


def test_pre_enqueue_admits_a_raw_object_only_if_every_plugin_does():
    fw = default_framework()
    free = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}
    gated = {"metadata": {"name": "p"}, "spec": {"schedulingGates": [{"name": "g"}]}}
    assert fw.pre_enqueue_admits_object(free)
    assert not fw.pre_enqueue_admits_object(gated)
    # A plugin without the fast path (the default) or whose check raises cannot tell.
    fw.pre_enqueue_plugins.append(PreEnqueuePlugin())
    assert not fw.pre_enqueue_admits_object(free)
    fw.pre_enqueue_plugins[-1] = _Raising()
    assert not fw.pre_enqueue_admits_object(free)
    fw.pre_enqueue_plugins.clear()
    assert fw.pre_enqueue_admits_object(gated)  # no PreEnqueue plugin: nothing gates


NODE_FILTERS = {
    "NodeUnschedulable",
    "NodeName",
    "TaintToleration",
    "NodeAffinity",
    "NodePorts",
    "NodeResourcesFit",
}
INTER_POD = {"PodTopologySpread", "InterPodAffinity"}
VOLUMES_ON_NODE_ADD = {"VolumeRestrictions", "VolumeBinding", "VolumeZone"}


@pytest.mark.parametrize(
    ("event", "want"),
    [
        (ev.NODE_ADD, NODE_FILTERS | INTER_POD | VOLUMES_ON_NODE_ADD),
        (ev.NODE_LABEL_CHANGE, NODE_FILTERS | INTER_POD | VOLUMES_ON_NODE_ADD),
        (ev.NODE_TAINT_CHANGE, NODE_FILTERS | INTER_POD | {"VolumeRestrictions"}),
        (ev.NODE_SPEC_UNSCHEDULABLE_CHANGE, NODE_FILTERS | INTER_POD | {"VolumeRestrictions"}),
        (ev.NODE_ALLOCATABLE_CHANGE, {"NodeResourcesFit"}),
        (ev.NODE_CONDITION_CHANGE, set()),
        (ev.NODE_DELETE, {"PodTopologySpread"}),
        (
            ev.ASSIGNED_POD_DELETE,
            {"NodePorts", "NodeResourcesFit", "VolumeRestrictions", "NodeVolumeLimits"} | INTER_POD,
        ),
        (ev.ASSIGNED_POD_ADD, INTER_POD),
        (ev.POD_SCHEDULING_GATES_ELIMINATED, {"SchedulingGates"}),
        (ev.WILDCARD_EVENT, set()),
    ],
)
def test_plugins_interested_in(event, want):
    assert default_framework().plugins_interested_in(event) == want


def test_undeclared_events_mean_everything_and_specific_beats_generic():
    registry = fake_registry(
        {
            "FilterA": None,
            "FilterB": (ev.ClusterEvent(ev.EventResource.NODE, ev.ActionType.UPDATE_NODE_LABEL),),
        }
    )
    fw = framework({"filter": PluginSet(refs("FilterA", "FilterB"))}, registry=registry)
    assert fw.plugins_interested_in(ev.NODE_LABEL_CHANGE) == {"FilterA", "FilterB"}
    generic = ev.ClusterEvent(ev.EventResource.NODE, ev.ActionType.UPDATE)
    assert fw.plugins_interested_in(generic) == {"FilterA"}
    assert fw.plugins_interested_in(ev.ASSIGNED_POD_ADD) == {"FilterA"}


def test_an_event_has_any_of_the_actions_asked():
    deleted = ev.ASSIGNED_POD_DELETE
    assert deleted.has(ev.ActionType.DELETE)
    assert deleted.has(ev.ActionType.ADD | ev.ActionType.DELETE)
    assert not deleted.has(ev.ActionType.ADD)
    assert not ev.NODE_LABEL_CHANGE.has(ev.ActionType.UPDATE_NODE_TAINT)
    assert ev.NODE_LABEL_CHANGE.has(ev.ActionType.UPDATE)


def test_cycle_state_clone_copies_state_data():
    class Counter:
        def __init__(self, n: int) -> None:
            self.n = n

        def clone(self) -> Counter:
            return Counter(self.n)

    state = CycleState()
    state.write("counter", Counter(1))
    state.write("frozen", (1, 2))
    state.skip_filter_plugins = frozenset({"X"})
    copy = state.clone()
    copy.read("counter").n = 5
    assert state.read("counter").n == 1 and copy.read("frozen") is state.read("frozen")
    assert copy.skip_filter_plugins == {"X"}
    with pytest.raises(KeyError):
        state.read("missing")


def test_scores_are_int64_arrays():
    fw = default_framework()
    snapshot = snapshot_of([make_node("n1"), make_node("n2", cpu=8000)])
    state = CycleState()
    pod = make_pod(requests={"cpu": 1000, "memory": 1024})
    fw.run_pre_filter_plugins(state, pod, snapshot)
    indices = snapshot.node_indices()
    fw.run_pre_score_plugins(state, pod, snapshot, indices)
    total = fw.run_score_plugins(state, pod, snapshot, indices)
    assert total.dtype == np.int64 and total[1] > total[0]
