"""DefaultPreemption after kube's default_preemption_test and preemption_test, nominated
pods in filtering (RunFilterPluginsWithNominatedPods), and the default profile end to end."""

from __future__ import annotations

import random
import time
from dataclasses import replace
from datetime import UTC, datetime

import numpy as np
import pytest

from distsched.clock import FakeClock
from distsched.framework.cycle_state import CycleState
from distsched.framework.diagnosis import FitError
from distsched.framework.interface import Handle, PluginArgsError, PostFilterResult
from distsched.framework.listers import Listers
from distsched.framework.nominator import PodNominator
from distsched.framework.plugins import default_preemption
from distsched.framework.plugins.default_preemption import (
    PREEMPTION_GRACE_S,
    PreemptionResult,
    victims_for,
)
from distsched.framework.plugins.inter_pod_affinity import (
    ERR_REASON_AFFINITY,
    ERR_REASON_ANTI_AFFINITY,
)
from distsched.framework.profile import build_profiles, default_config
from distsched.framework.schedule import schedule_pod
from distsched.framework.snapshot import Snapshot
from distsched.framework.status import Code
from distsched.framework.what_if import (
    run_filter_plugins_with_nominated_pods,
)
from distsched.model.objects import (
    DEFAULT_SCHEDULER_NAME,
    Affinity,
    LabelSelector,
    PodAffinity,
    PodAffinityTerm,
    PodCondition,
    TopologySpreadConstraint,
)
from tests.framework.builders import snapshot_of
from tests.framework.plugins.preemption_builders import names, node, pod
from tests.support.objects import HOSTNAME as HOST


def framework(nominator=None, seed=0):
    handle = Handle(listers=Listers(nominator=nominator) if nominator is not None else Listers())
    fw = build_profiles(default_config(), handle=handle)[DEFAULT_SCHEDULER_NAME]
    fw.plugins[default_preemption.NAME].rng = random.Random(seed)
    return fw


def preempt(snapshot, incoming, nominator=None):
    """Schedule ``incoming`` (it must not fit) and run PostFilter: (result, status)."""
    fw = framework(nominator)
    state = CycleState()
    with pytest.raises(FitError) as info:
        schedule_pod(fw, state, incoming, snapshot)
    return fw.run_post_filter_plugins(state, incoming, snapshot, info.value.diagnosis)


def test_preemption_policy_never_is_not_eligible():
    snapshot = snapshot_of([node("n1")], [pod("low", 4000, 1, "n1")])
    incoming = pod("p", 2000, 10)
    incoming = replace(incoming, spec=replace(incoming.spec, preemption_policy="Never"))
    result, status = preempt(snapshot, incoming)
    assert result is None
    assert status.code == Code.UNSCHEDULABLE
    assert status.message() == "preemption: not eligible due to preemptionPolicy=Never."


def being_preempted(victim, seconds_ago=1.0, *, at_s=None):
    """``victim`` with the DisruptionTarget condition kube's preemption sets first, set
    ``seconds_ago`` (by the wall clock) or at ``at_s``."""
    at_s = time.time() - seconds_ago if at_s is None else at_s
    at = datetime.fromtimestamp(at_s, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    condition = PodCondition("DisruptionTarget", "True", "PreemptionByScheduler", "preempting", at)
    return replace(victim, status=replace(victim.status, conditions=(condition,)))


def nominated(incoming, node_name):
    return replace(incoming, status=replace(incoming.status, nominated_node_name=node_name))


def test_a_pod_waits_for_a_victim_being_preempted_on_its_nominated_node():
    """kube's PodEligibleToPreemptOthers: through an API server the victims' deletions
    queue, and a preemptor tried again meanwhile preempted on another node."""
    going = being_preempted(pod("going", 3000, 1, "n1"))
    snapshot = snapshot_of([node("n1"), node("n2")], [going, pod("low", 3000, 1, "n2")])
    result, status = preempt(snapshot, nominated(pod("p", 2000, 10), "n1"))
    assert result is None
    assert status.code == Code.UNSCHEDULABLE
    assert status.message() == (
        "preemption: not eligible due to a terminating pod on the nominated node."
    )


def post_filter_after_filters(fw, incoming, snapshot):
    """The filters fail ``incoming``; then its PostFilter: (result, status)."""
    state = CycleState()
    with pytest.raises(FitError) as info:
        schedule_pod(fw, state, incoming, snapshot)
    return fw.run_post_filter_plugins(state, incoming, snapshot, info.value.diagnosis)


def test_a_pod_waits_for_a_victim_whose_deletion_its_writer_has_in_flight():
    """Through an API server the condition comes back with the watch, later than the
    worker's own writer knows the deletion is under way: that counts too."""
    snapshot = snapshot_of(
        [node("n1"), node("n2")], [pod("going", 3000, 1, "n1"), pod("low", 3000, 1, "n2")]
    )
    incoming = nominated(pod("p", 2000, 10), "n1")
    fw = framework()
    fw.handle.listers.deleting = lambda keys: "default/going" in keys
    result, status = post_filter_after_filters(fw, incoming, snapshot)
    assert result is None and "terminating pod on the nominated node" in status.message()
    fw.handle.listers.deleting = lambda keys: False
    _result, status = post_filter_after_filters(fw, incoming, snapshot)
    assert status.is_success()


def test_a_pod_waits_while_the_ledger_still_counts_a_deleted_pod_on_its_nominated_node():
    """A victim deleted from the store leaves the worker's pod lists at once but keeps
    its room in the ledger until the handlers release it: that counts as terminating."""
    snapshot = snapshot_of(
        [node("n1"), node("n2")], [pod("full", 3000, 1, "n1"), pod("low", 3000, 1, "n2")]
    )
    incoming = nominated(pod("p", 2000, 10), "n1")
    fw = framework()
    asked: list[str] = []

    def releasing(node_name: str) -> bool:
        asked.append(node_name)
        return node_name == "n1"

    fw.handle.listers.releasing = releasing
    result, status = post_filter_after_filters(fw, incoming, snapshot)
    assert result is None and "terminating pod on the nominated node" in status.message()
    assert asked == ["n1"]
    fw.handle.listers.releasing = lambda node_name: False
    _result, status = post_filter_after_filters(fw, incoming, snapshot)
    assert status.is_success()


@pytest.mark.parametrize(
    "case",
    ["not nominated", "nominated elsewhere", "victim of higher priority", "condition too old"],
)
def test_eligible_unless_a_lower_victim_is_going_on_the_nominated_node(case):
    going = being_preempted(
        pod("going", 3000, 20 if case == "victim of higher priority" else 1, "n1"),
        seconds_ago=60.0 if case == "condition too old" else 1.0,
    )
    snapshot = snapshot_of([node("n1"), node("n2")], [going, pod("low", 3000, 1, "n2")])
    incoming = pod("p", 2000, 10)
    if case != "not nominated":
        incoming = nominated(incoming, "n2" if case == "nominated elsewhere" else "n1")
    result, status = preempt(snapshot, incoming)
    assert status.is_success() and isinstance(result, PreemptionResult)


def test_the_victims_condition_ages_on_the_workers_clock():
    """The 30 s a DisruptionTarget counts as a deletion under way are the worker's clock's
    (a fake one in the worker's in-process tests), not the wall clock's."""
    clock = FakeClock(1_700_000_000_000)
    going = being_preempted(pod("going", 3000, 1, "n1"), at_s=1_700_000_000)
    snapshot = snapshot_of([node("n1"), node("n2")], [going, pod("low", 3000, 1, "n2")])
    incoming = nominated(pod("p", 2000, 10), "n1")
    fw = framework()
    fw.handle.listers.clock = clock

    def post_filter():
        state = CycleState()
        with pytest.raises(FitError) as info:
            schedule_pod(fw, state, incoming, snapshot)
        return fw.run_post_filter_plugins(state, incoming, snapshot, info.value.diagnosis)

    clock.step(int(PREEMPTION_GRACE_S * 1000) - 1000)
    result, status = post_filter()
    assert result is None and "terminating pod on the nominated node" in status.message()
    clock.step(2000)
    result, status = post_filter()
    assert status.is_success() and isinstance(result, PreemptionResult)


def test_preempts_the_lower_priority_pod():
    snapshot = snapshot_of(
        [node("n1"), node("n2")], [pod("low", 3000, 1, "n1"), pod("high", 3000, 100, "n2")]
    )
    result, status = preempt(snapshot, pod("p", 2000, 10))
    assert status.is_success()
    assert isinstance(result, PreemptionResult)
    assert result.nominated_node_name == "n1"
    assert names(victims_for(result)) == ["low"]


def test_no_victims_anywhere():
    snapshot = snapshot_of(
        [node("n1"), node("n2")], [pod("a", 3000, 10, "n1"), pod("b", 3000, 100, "n2")]
    )
    result, status = preempt(snapshot, pod("p", 2000, 10))
    assert status.code == Code.UNSCHEDULABLE
    assert status.message() == (
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    )
    assert result == PreemptionResult("")


def test_preemption_does_not_help_with_unresolvable_failures():
    snapshot = snapshot_of([node("n1"), node("n2")], [pod("low", 3000, 1, "n1")])
    incoming = pod("p", 2000, 10, node_selector={"disk": "ssd"})
    result, status = preempt(snapshot, incoming)
    assert status.message() == (
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )
    assert result is not None and result.nominated_node_name == ""
    assert victims_for(result) == ()


def test_mixed_dry_run_statuses_are_reported():
    snapshot = snapshot_of(
        [node("n1"), node("n2"), node("n3")],
        [pod("a", 3000, 100, "n1"), pod("b", 500, 1, "n2")],
    )
    incoming = pod("p", 5000, 10)  # more than any node has
    _, status = preempt(snapshot, incoming)
    # n2 still lacks room without its victim; n1 (a more important pod) and n3 (empty)
    # have nothing to evict.
    assert status.message() == (
        "preemption: 0/3 nodes are available: 1 Insufficient cpu, "
        "2 No preemption victims found for incoming pod."
    )


def test_reprieves_the_most_important_victims_first():
    existing = [
        pod("p1", 1000, 1, "n1"),
        pod("p2", 1000, 2, "n1"),
        pod("p3", 2000, 3, "n1"),
    ]
    result, status = preempt(snapshot_of([node("n1")], existing), pod("p", 2000, 10))
    assert status.is_success()
    assert names(victims_for(result)) == ["p2", "p1"]  # p3 keeps running


@pytest.mark.parametrize(
    ("name", "existing", "want"),
    [
        (
            "the node whose most important victim has the lowest priority",
            [pod("a", 4000, 5, "n1"), pod("b", 4000, 3, "n2")],
            "n2",
        ),
        (
            "then the smallest sum of victim priorities",
            [
                pod("a1", 2000, 3, "n1"),
                pod("a2", 2000, 3, "n1"),
                pod("b1", 2000, 3, "n2"),
                pod("b2", 2000, 1, "n2"),
            ],
            "n2",
        ),
        (
            "negative priorities: fewer victims still win the sum (priorities offset by 2^31)",
            [
                pod("a1", 2000, -5, "n1"),
                pod("a2", 2000, -5, "n1"),
                pod("b1", 4000, -5, "n2"),
            ],
            "n2",
        ),
        (
            "then the latest start of the most important victims",
            [
                pod("a", 4000, 1, "n1", created="2024-01-01T00:00:00Z"),
                pod("b", 4000, 1, "n2", created="2024-06-01T00:00:00Z"),
            ],
            "n2",
        ),
    ],
)
def test_candidate_selection_order(name, existing, want):
    snapshot = snapshot_of([node("n1"), node("n2")], existing)
    result, status = preempt(snapshot, pod("p", 4000, 10))
    assert status.is_success(), name
    assert result.nominated_node_name == want, name


def test_nominated_pods_are_counted_and_lower_ones_released():
    nominator = PodNominator()
    nominator.add(pod("big", 3000, 100, nominated="n1"))
    nominator.add(pod("small", 500, 5, nominated="n2"))
    snapshot = snapshot_of(
        [node("n1"), node("n2")], [pod("v1", 3000, 1, "n1"), pod("v2", 3000, 1, "n2")]
    )
    result, status = preempt(snapshot, pod("p", 2000, 10), nominator)
    assert status.is_success()
    assert result.nominated_node_name == "n2"
    assert names(victims_for(result)) == ["v2"]
    assert names(result.clear_nominations) == ["small"]


def test_anti_affinity_victims_found_through_pre_filter_extensions():
    green = {"app": "db"}
    snapshot = snapshot_of(
        [node("n1"), node("n2")],
        [pod("db-low", 100, 1, "n1", labels=green), pod("db-high", 100, 100, "n2", labels=green)],
    )
    term = PodAffinityTerm(HOST, LabelSelector(green))
    incoming = pod("p", 100, 10, affinity=Affinity(pod_anti_affinity=PodAffinity(required=(term,))))
    result, status = preempt(snapshot, incoming)
    assert status.is_success()
    assert result.nominated_node_name == "n1"
    assert names(victims_for(result)) == ["db-low"]


def test_existing_anti_affinity_victim():
    term = PodAffinityTerm(HOST, LabelSelector({"app": "web"}))
    hater = pod("hater", 100, 1, "n1", affinity=Affinity(pod_anti_affinity=PodAffinity((term,))))
    snapshot = snapshot_of([node("n1")], [hater, pod("keeper", 100, 1, "n1")])
    result, status = preempt(snapshot, pod("p", 100, 10, labels={"app": "web"}))
    assert status.is_success()
    assert names(victims_for(result)) == ["hater"]


def test_topology_spread_victims():
    spread = TopologySpreadConstraint(1, HOST, "DoNotSchedule", LabelSelector({"app": "s"}))
    app = {"app": "s"}
    existing = [
        pod("s1", 100, 1, "n1", labels=app, created="2024-01-01T00:00:00Z"),
        pod("s2", 100, 1, "n1", labels=app, created="2024-02-01T00:00:00Z"),
        pod("s3", 4000, 100, "n2", labels=app),
    ]
    incoming = pod("p", 100, 10, labels=app)
    incoming = replace(incoming, spec=replace(incoming.spec, topology_spread_constraints=(spread,)))
    result, status = preempt(snapshot_of([node("n1"), node("n2")], existing), incoming)
    assert status.is_success()
    assert result.nominated_node_name == "n1"
    assert names(victims_for(result)) == ["s2"]  # the earlier-started s1 is reprieved first


def test_dry_runs_leave_the_snapshot_as_it_was():
    existing = [pod("p1", 1000, 1, "n1"), pod("p2", 3000, 2, "n1"), pod("q", 3000, 1, "n2")]
    snapshot = snapshot_of([node("n1"), node("n2")], existing)
    free = snapshot.free.copy()
    placed = {i: sorted(snapshot.pods_on(i)) for i in snapshot.node_indices()}
    _, status = preempt(snapshot, pod("p", 2000, 10))
    assert status.is_success()
    assert np.array_equal(snapshot.free, free)
    assert {i: sorted(snapshot.pods_on(i)) for i in snapshot.node_indices()} == placed


def test_dry_runs_with_ledger_usage_charge_and_refund_the_moved_pods():
    # A worker's snapshot takes requested resources from the ledger, not from its pods.
    snapshot = Snapshot(capacity=4, usage_from_ledger=True)
    index = snapshot.add_node(node("n1"))
    snapshot.add_pod(pod("low", 3000, 1, "n1"))
    snapshot.set_usage(index, {"cpu": 3000, "pods": 1}, [])
    free = snapshot.free.copy()
    result, status = preempt(snapshot, pod("p", 2000, 10))
    assert status.is_success() and names(victims_for(result)) == ["low"]
    assert np.array_equal(snapshot.free, free)
    assert list(snapshot.pods_on(index)) == ["default/low"]


def test_schedule_pod_counts_nominated_pods_through_the_handle():
    nominator = PodNominator()
    nominator.add(pod("big", 3000, 100, nominated="n1"))
    snapshot = snapshot_of([node("n1"), node("n2", cpu=2500)])
    fw = framework(nominator)
    result = schedule_pod(fw, CycleState(), pod("p", 2000, 10), snapshot)
    assert result.suggested_host == "n2"  # n1's free room is promised to "big"
    # Its own nomination does not block the nominated pod itself.
    big = pod("big", 3000, 100, nominated="n1")
    assert schedule_pod(fw, CycleState(), big, snapshot).suggested_host == "n1"


def candidate_names(snapshot, offset: int, wanted: int) -> list[str]:
    """The nodes find_candidates returns for a 2-cpu priority-10 pod when its random
    node is ``offset`` and ``wanted`` candidates are enough."""

    class Offset:
        def randrange(self, n):
            return offset

    fw = framework()
    plugin = default_preemption.new(
        {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": wanted}, fw.handle
    )
    plugin.attach_framework(fw)
    plugin.rng = Offset()
    incoming = pod("p", 2000, 10)
    state = CycleState()
    with pytest.raises(FitError) as info:
        schedule_pod(fw, state, incoming, snapshot)
    found, _, _ = plugin.find_candidates(state, incoming, snapshot, info.value.diagnosis)
    return [c.node_name for c in found]


def test_candidates_come_from_a_random_offset_and_stop_when_enough():
    existing = [pod(f"v{i}", 4000, 1, f"n{i}") for i in range(5)]
    snapshot = snapshot_of([node(f"n{i}") for i in range(5)], existing)
    assert candidate_names(snapshot, 3, 2) == ["n3", "n4"]


def test_with_several_workers_candidates_come_from_the_workers_share_first():
    """kube samples candidates from a random node on; a worker samples its own share of the
    nodes first (from the same random node), so two workers preempting at once look at
    disjoint nodes; the rest follow when the share has too few."""
    existing = [pod(f"v{i}", 4000, 1, f"n{i}") for i in range(6)]
    snapshot = snapshot_of([node(f"n{i}") for i in range(6)], existing)
    assert candidate_names(snapshot, 1, 3) == ["n1", "n2", "n3"]
    share = np.zeros(6, dtype=bool)
    for name in ("n0", "n2", "n5"):
        share[snapshot.get_index(name)] = True
    snapshot.tie_preference = share
    assert candidate_names(snapshot, 1, 3) == ["n2", "n5", "n0"]
    share[snapshot.get_index("n5")] = False
    assert candidate_names(snapshot, 1, 3) == ["n2", "n0", "n1"]


def test_tied_candidates_go_to_the_workers_share_of_the_nodes():
    """Issue 23: two workers preempting at once picked the same node for two preemptors
    (kube's first of the ties, from a random offset, is anywhere); each then saw the
    other's nomination fill the node and preempted again elsewhere. Among candidates
    still tied after kube's criteria, a worker takes the first in its share; a better
    candidate outside the share still wins, and without shares the first one does."""
    existing = [pod(f"v{i}", 4000, 1, f"n{i}") for i in range(4)]
    snapshot = snapshot_of([node(f"n{i}") for i in range(4)], existing)
    result, _ = preempt(snapshot, pod("p", 4000, 10))
    first = result.nominated_node_name
    share = np.zeros(4, dtype=bool)
    other = next(i for i in range(4) if f"n{i}" != first)
    share[snapshot.get_index(f"n{other}")] = True
    snapshot.tie_preference = share
    result, _ = preempt(snapshot, pod("p", 4000, 10))
    assert result.nominated_node_name == f"n{other}"

    # n3's victim is less important than the others: the criteria decide, not the share.
    existing = [pod(f"v{i}", 4000, 1 if i < 3 else 0, f"n{i}") for i in range(4)]
    snapshot = snapshot_of([node(f"n{i}") for i in range(4)], existing)
    snapshot.tie_preference = np.array([i != snapshot.get_index("n3") for i in range(4)])
    result, _ = preempt(snapshot, pod("p", 4000, 10))
    assert result.nominated_node_name == "n3"


@pytest.mark.parametrize(
    ("nodes", "percentage", "absolute", "want"),
    [(10, 10, 100, 10), (1000, 10, 100, 100), (5000, 10, 100, 500), (30, 40, 0, 12)],
)
def test_calculate_num_candidates(nodes, percentage, absolute, want):
    plugin = default_preemption.new(
        {"minCandidateNodesPercentage": percentage, "minCandidateNodesAbsolute": absolute}, Handle()
    )
    assert plugin.calculate_num_candidates(nodes) == want


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"minCandidateNodesPercentage": 101}, "minCandidateNodesPercentage"),
        ({"minCandidateNodesAbsolute": -1}, "minCandidateNodesAbsolute"),
        ({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0}, ""),
        ({"other": 1}, "other"),
    ],
)
def test_bad_args(args, field):
    with pytest.raises(PluginArgsError) as info:
        default_preemption.new(args, Handle())
    assert info.value.field == field


def test_victims_for_other_results_is_empty():
    assert victims_for(None) == ()
    assert victims_for(PostFilterResult("n1")) == ()


# ---------------------------------------------------------------------------- nominated pods
def run_nominated(snapshot, incoming, nominator):
    fw = framework(nominator)
    state = CycleState()
    _, status, _ = fw.run_pre_filter_plugins(state, incoming, snapshot)
    assert status.is_success()
    candidates = snapshot.node_indices()
    outcome = run_filter_plugins_with_nominated_pods(
        fw, state, incoming, snapshot, candidates, nominator, incoming.spec.priority or 0
    )
    passed = {snapshot.node_name(int(candidates[i])) for i in outcome.passed}
    reasons = {
        snapshot.node_name(int(candidates[int(i)])): reason
        for verdict in outcome.verdicts
        for reason, _, positions in verdict.reasons
        for i in positions
    }
    return passed, reasons


def test_nominated_pods_of_higher_or_equal_priority_take_their_room():
    nominator = PodNominator()
    nominator.add(pod("big", 3000, 10, nominated="n1"))
    nominator.add(pod("low", 3000, 1, nominated="n2"))
    incoming = pod("p", 2000, 10)
    nominator.add(replace(incoming, status=replace(incoming.status, nominated_node_name="n3")))
    snapshot = snapshot_of([node("n1"), node("n2"), node("n3")])
    passed, reasons = run_nominated(snapshot, incoming, nominator)
    assert passed == {"n2", "n3"}
    assert reasons == {"n1": "Insufficient cpu"}
    # Nothing was left behind in the snapshot.
    assert all(not snapshot.pods_on(i) for i in snapshot.node_indices())


def test_the_nominated_pods_counted_follow_the_nominations_and_the_snapshot():
    """The rows of the nominated pods are kept for a decision's next question, and
    dropped when a nomination changes or the snapshot places one of them."""
    nominator = PodNominator()
    nominator.add(pod("big", 3000, 10, nominated="n1"))
    incoming = pod("p", 2000, 10)
    snapshot = snapshot_of([node(f"n{i}") for i in range(1, 6)])
    passed, reasons = run_nominated(snapshot, incoming, nominator)
    assert "n1" not in passed and reasons == {"n1": "Insufficient cpu"}
    nominator.delete("default/big")
    assert "n1" in run_nominated(snapshot, incoming, nominator)[0]
    nominator.add(pod("big", 3000, 10, nominated="n1"))
    assert "n1" not in run_nominated(snapshot, incoming, nominator)[0]
    snapshot.add_pod(pod("big", 3000, 10, "n2"))  # assumed elsewhere: not on n1 too
    passed, reasons = run_nominated(snapshot, incoming, nominator)
    assert "n1" in passed and reasons == {"n2": "Insufficient cpu"}


def test_a_node_must_pass_without_its_nominated_pods_too():
    zone_web = PodAffinityTerm("zone", LabelSelector({"app": "web"}))
    incoming = pod("p", 100, 10, affinity=Affinity(pod_affinity=PodAffinity((zone_web,))))
    nominator = PodNominator()
    nominator.add(pod("web", 100, 20, labels={"app": "web"}, nominated="n1"))
    snapshot = snapshot_of([node("n1", zone="z1"), node("n2", zone="z2")])
    passed, reasons = run_nominated(snapshot, incoming, nominator)
    assert passed == set()
    assert reasons == {"n1": ERR_REASON_AFFINITY, "n2": ERR_REASON_AFFINITY}


def test_nominator_bookkeeping():
    nominator = PodNominator()
    p = pod("a", nominated="n1")
    nominator.add(p)
    assert len(nominator) == 1 and names(i.pod for i in nominator.pods_for_node("n1")) == ["a"]
    nominator.add(replace(p, status=replace(p.status, nominated_node_name="n2")))
    assert nominator.node_names() == ["n2"]
    nominator.add(replace(p, spec=replace(p.spec, node_name="n2")))  # bound: forgotten
    assert len(nominator) == 0 and nominator.pods_for_node("n2") == []


# ---------------------------------------------------------------------------- end to end
def test_default_profile_loads_every_default_plugin_with_kube_weights():
    fw = build_profiles(default_config())[DEFAULT_SCHEDULER_NAME]
    assert sorted(fw.plugins) == sorted(
        [
            "SchedulingGates",
            "PrioritySort",
            "NodeUnschedulable",
            "NodeName",
            "TaintToleration",
            "NodeAffinity",
            "NodePorts",
            "NodeResourcesFit",
            "VolumeRestrictions",
            "NodeVolumeLimits",
            "VolumeBinding",
            "VolumeZone",
            "PodTopologySpread",
            "InterPodAffinity",
            "DynamicResources",
            "DefaultPreemption",
            "NodeResourcesBalancedAllocation",
            "ImageLocality",
            "DefaultBinder",
        ]
    )
    assert dict((p.name, w) for p, w in fw.score_plugins) == {
        "TaintToleration": 3,
        "NodeAffinity": 2,
        "PodTopologySpread": 2,
        "InterPodAffinity": 2,
        "NodeResourcesFit": 1,
        "NodeResourcesBalancedAllocation": 1,
        "ImageLocality": 1,
    }
    assert [p.name for p in fw.filter_plugins][-2:] == ["PodTopologySpread", "InterPodAffinity"]
    assert [p.name for p in fw.post_filter_plugins] == ["DefaultPreemption"]


def test_end_to_end_anti_affinity_pods_take_one_node_each():
    snapshot = snapshot_of([node(f"n{i}") for i in range(5)])
    fw = framework()
    term = PodAffinityTerm(HOST, LabelSelector({"color": "green"}))
    anti = Affinity(pod_anti_affinity=PodAffinity(required=(term,)))
    hosts = []
    for i in range(5):
        p = pod(f"g{i}", 100, labels={"color": "green"}, affinity=anti)
        result = schedule_pod(fw, CycleState(), p, snapshot)
        snapshot.add_pod(p, result.suggested_host)
        hosts.append(result.suggested_host)
    assert sorted(hosts) == [f"n{i}" for i in range(5)]
    extra = pod("g5", 100, labels={"color": "green"}, affinity=anti)
    with pytest.raises(FitError) as info:
        schedule_pod(fw, CycleState(), extra, snapshot)
    assert str(info.value) == f"0/5 nodes are available: 5 {ERR_REASON_ANTI_AFFINITY}."


def test_end_to_end_spread_keeps_zones_balanced():
    nodes = [node(f"n{i}", zone=f"z{i % 3}") for i in range(6)]
    snapshot = snapshot_of(nodes)
    fw = framework()
    spread = TopologySpreadConstraint(1, "zone", "DoNotSchedule", LabelSelector({"app": "s"}))
    per_zone = {"z0": 0, "z1": 0, "z2": 0}
    for i in range(9):
        p = pod(f"s{i}", 100, labels={"app": "s"})
        p = replace(p, spec=replace(p.spec, topology_spread_constraints=(spread,)))
        result = schedule_pod(fw, CycleState(), p, snapshot)
        snapshot.add_pod(p, result.suggested_host)
        per_zone[snapshot.labels(result.node_index)["zone"]] += 1
        assert max(per_zone.values()) - min(per_zone.values()) <= 1
    assert per_zone == {"z0": 3, "z1": 3, "z2": 3}


def _select_by_passes(candidates):
    """pickOneNodeForPreemption as kube writes it: one criterion at a time over the
    candidates still tied, then the first of them (the reference select_candidate's
    single key must agree with)."""
    from distsched.framework.plugins.default_preemption import start_time

    def earliest_top_start(c):
        top = max(v.priority for v in c.victims)
        return min(start_time(v) for v in c.victims if v.priority == top)

    criteria = (
        lambda c: -c.num_pdb_violations,
        lambda c: -max(v.priority for v in c.victims),
        lambda c: -sum(v.priority + 2**31 for v in c.victims),
        lambda c: -len(c.victims),
        earliest_top_start,
    )
    remaining = candidates
    for score in criteria:
        best = max(score(c) for c in remaining)
        remaining = [c for c in remaining if score(c) == best]
    return remaining[0]


@pytest.mark.parametrize("seed", range(40))
def test_candidate_selection_agrees_with_the_criteria_one_at_a_time(seed):
    from distsched.framework.plugins.default_preemption import (
        Candidate,
        importance,
        select_candidate,
    )
    from distsched.framework.podinfo import PodInfo

    rng = random.Random(seed)
    days = [f"2024-01-0{d}T00:00:00Z" for d in range(1, 4)] + [""]  # "": unknown start
    # Odd seeds: one priority and two victims each, so that the candidates tie on the
    # first four criteria and their victims' start times decide.
    priorities = [1] if seed % 2 else [-3, 0, 1, 2]
    candidates = []
    for i in range(rng.randint(1, 12)):
        victims = [
            PodInfo.of(pod(f"v{i}-{j}", 100, rng.choice(priorities), f"n{i}", rng.choice(days)))
            for j in range(2 if seed % 2 else rng.randint(1, 4))
        ]
        victims.sort(key=importance)  # as a dry run leaves them: most important first
        violations = rng.randint(0, 1) if seed % 4 == 0 else 0
        candidates.append(Candidate(i, f"n{i}", victims, num_pdb_violations=violations))
    assert select_candidate(candidates) is _select_by_passes(candidates)


def test_a_candidate_without_victims_is_taken_at_once():
    from distsched.framework.plugins.default_preemption import Candidate, select_candidate
    from distsched.framework.podinfo import PodInfo

    busy = Candidate(0, "n0", [PodInfo.of(pod("v", 100, 1, "n0"))])
    free = Candidate(1, "n1", [], num_pdb_violations=1)
    assert select_candidate([busy, free]) is free
