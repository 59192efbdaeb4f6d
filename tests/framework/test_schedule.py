"""The scheduling algorithm for one pod: rotation, sampling, nominated node, FitError."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from distsched.framework.cycle_state import CycleState
from distsched.framework.diagnosis import FitError, NodeToStatus, NoNodesAvailableError, ReasonEntry
from distsched.framework.profile import build_profiles, default_config
from distsched.framework.runtime import Framework, PluginRef, PluginSet, Profile
from distsched.framework.schedule import schedule_batch_on_snapshot, schedule_pod
from distsched.framework.status import Code, Status
from distsched.model.objects import NodeSelectorTerm, Taint
from tests.framework.builders import make_node, make_pod, req, required_affinity, snapshot_of
from tests.framework.fakes import fake_registry


def default_framework(seed: int = 0, percentage: int | None = None) -> Framework:
    config = default_config()
    config.percentage_of_nodes_to_score = percentage
    return build_profiles(config, rng=random.Random(seed))["default-scheduler"]


def fake_framework(args: dict, *, score: bool = True, percentage: int | None = None) -> Framework:
    plugins = {"filter": PluginSet([PluginRef("FilterA")])}
    if score:
        plugins["score"] = PluginSet([PluginRef("ScoreA")])
    profile = Profile("fake", plugins, args, percentage)
    return Framework(profile, fake_registry(), rng=random.Random(1))


@pytest.mark.parametrize(
    ("nodes", "percentage", "want"),
    [
        (10, None, 10),
        (99, None, 99),
        (100, None, 100),
        (1000, None, 420),  # 50 - 1000/125 = 42%
        (5000, None, 500),  # 10%
        (6000, None, 300),  # 50 - 48 = 2% -> at least 5%
        (10000, None, 500),
        (1000, 30, 300),
        (1000, 5, 100),  # never fewer than 100
        (1000, 100, 1000),
        (50, 10, 50),  # small clusters: all nodes
    ],
)
def test_num_feasible_nodes_to_find(nodes, percentage, want):
    assert default_framework(percentage=percentage).num_feasible_nodes_to_find(nodes) == want


def test_rotation_over_all_nodes():
    fw = fake_framework({}, percentage=50)
    snapshot = snapshot_of([make_node(f"n{i:03d}") for i in range(200)])
    first = schedule_pod(fw, CycleState(), make_pod(), snapshot)
    assert (first.evaluated_nodes, first.feasible_nodes) == (100, 100)
    assert fw.next_start_node_index == 100
    assert fw.plugins["FilterA"].seen[0][0] == "n000"
    schedule_pod(fw, CycleState(), make_pod(), snapshot)
    assert fw.plugins["FilterA"].seen[-1][0] == "n100"
    assert fw.next_start_node_index == 0  # (100 + 100) % 200


def test_stops_after_enough_feasible_nodes_and_counts_processed_ones():
    # Every third node is rejected; 100 feasible are found after 149 nodes.
    reject = {f"n{i:03d}": "no" for i in range(0, 300, 3)}
    fw = fake_framework({"FilterA": {"reject": reject}}, percentage=10)
    snapshot = snapshot_of([make_node(f"n{i:03d}") for i in range(300)])
    result = schedule_pod(fw, CycleState(), make_pod(), snapshot)
    assert result.feasible_nodes == 100
    assert result.evaluated_nodes == 150  # n000..n149: 100 feasible + 50 rejected
    assert fw.next_start_node_index == 150


def test_window_wraps_around():
    fw = fake_framework({}, percentage=50)
    fw.next_start_node_index = 150
    snapshot = snapshot_of([make_node(f"n{i:03d}") for i in range(200)])
    schedule_pod(fw, CycleState(), make_pod(), snapshot)
    seen = fw.plugins["FilterA"].seen[0]
    assert seen[0] == "n150" and "n049" in seen and "n050" not in seen[:100]


def test_without_score_plugins_the_first_feasible_node_wins():
    fw = fake_framework({"FilterA": {"reject": {"n0": "no"}}}, score=False)
    snapshot = snapshot_of([make_node(f"n{i}") for i in range(5)])
    result = schedule_pod(fw, CycleState(), make_pod(), snapshot)
    assert (result.suggested_host, result.evaluated_nodes, result.feasible_nodes) == ("n1", 2, 1)


def test_highest_score_wins():
    fw = fake_framework({"ScoreA": {"scores": {"n3": 50, "n1": 10}}})
    snapshot = snapshot_of([make_node(f"n{i}") for i in range(5)])
    assert schedule_pod(fw, CycleState(), make_pod(), snapshot).suggested_host == "n3"


def test_ties_are_broken_uniformly_at_random_and_reproducibly():
    snapshot = snapshot_of([make_node(f"n{i}") for i in range(4)])
    args = {"ScoreA": {"scores": {"n1": 9, "n2": 9}}}
    fw = fake_framework(args)
    picks = Counter(
        schedule_pod(fw, CycleState(), make_pod(), snapshot).suggested_host for _ in range(400)
    )
    assert set(picks) == {"n1", "n2"} and min(picks.values()) > 150
    again = fake_framework(args)
    replay = Counter(
        schedule_pod(again, CycleState(), make_pod(), snapshot).suggested_host for _ in range(400)
    )
    assert replay == picks


def test_least_allocated_spreads_with_the_default_profile():
    fw = default_framework()
    snapshot = snapshot_of([make_node("n1"), make_node("n2")])
    snapshot.add_pod(make_pod("busy", node_name="n1", requests={"cpu": 3000, "memory": 1 << 30}))
    result = schedule_pod(fw, CycleState(), make_pod(requests={"cpu": 100}), snapshot)
    assert result.suggested_host == "n2"


def test_nominated_node_is_tried_first():
    fw = default_framework()
    snapshot = snapshot_of([make_node("n1", cpu=1000), make_node("n2", cpu=64000)])
    pod = make_pod(requests={"cpu": 500}, nominated="n1")
    result = schedule_pod(fw, CycleState(), pod, snapshot)
    assert (result.suggested_host, result.evaluated_nodes, result.feasible_nodes) == ("n1", 1, 1)
    # An infeasible nominated node falls back to the normal search.
    pod = make_pod(requests={"cpu": 2000}, nominated="n1")
    assert schedule_pod(fw, CycleState(), pod, snapshot).suggested_host == "n2"
    pod = make_pod(requests={"cpu": 2000}, nominated="gone")
    assert schedule_pod(fw, CycleState(), pod, snapshot).suggested_host == "n2"


def test_fit_error_message_counts_reasons_sorted_like_kube():
    taint = Taint("key", "NoSchedule", "value")
    nodes = [make_node(f"c{i}", cpu=100) for i in range(3)]
    nodes += [make_node(f"t{i}", taints=[taint]) for i in range(2)]
    fw = default_framework()
    with pytest.raises(FitError) as info:
        schedule_pod(fw, CycleState(), make_pod(requests={"cpu": 500}), snapshot_of(nodes))
    error = info.value
    assert str(error) == (
        "0/5 nodes are available: 2 node(s) had untolerated taint {key: value}, 3 Insufficient cpu."
    )
    diagnosis = error.diagnosis
    assert diagnosis.unschedulable_plugins == {"TaintToleration", "NodeResourcesFit"}
    statuses = diagnosis.node_to_status
    assert len(statuses) == 5
    assert statuses.plugin_counts() == {"NodeResourcesFit": 3, "TaintToleration": 2}
    snapshot = snapshot_of(nodes)
    helpful = statuses.nodes_that_might_help(snapshot.node_indices())
    assert sorted(snapshot.node_name(int(i)) for i in helpful) == ["c0", "c1", "c2"]
    t0 = statuses.status_of(snapshot.index_of("t0"))
    assert t0 is not None and t0.plugin == "TaintToleration" and t0.is_rejected()


def test_several_reasons_on_one_node_are_all_counted():
    fw = default_framework()
    snapshot = snapshot_of([make_node("n1", cpu=100, memory=100), make_node("n2", cpu=100)])
    with pytest.raises(FitError) as info:
        schedule_pod(fw, CycleState(), make_pod(requests={"cpu": 500, "memory": 500}), snapshot)
    assert str(info.value) == "0/2 nodes are available: 1 Insufficient memory, 2 Insufficient cpu."


def test_pre_filter_rejection_message():
    fw = default_framework()
    conflicting = required_affinity(
        NodeSelectorTerm(
            match_fields=(req("metadata.name", "In", "n1"), req("metadata.name", "In", "n2"))
        )
    )
    with pytest.raises(FitError) as info:
        schedule_pod(
            fw, CycleState(), make_pod(affinity=conflicting), snapshot_of([make_node("n1")])
        )
    assert str(info.value) == "0/1 nodes are available: pod affinity terms conflict."
    assert info.value.diagnosis.unschedulable_plugins == {"NodeAffinity"}


def test_nodes_outside_the_pre_filter_result_count_as_unresolvable():
    fw = default_framework()
    pinned = required_affinity(NodeSelectorTerm(match_fields=(req("metadata.name", "In", "n1"),)))
    snapshot = snapshot_of([make_node("n1", cpu=100), make_node("n2"), make_node("n3")])
    with pytest.raises(FitError) as info:
        schedule_pod(fw, CycleState(), make_pod(affinity=pinned, requests={"cpu": 500}), snapshot)
    assert str(info.value) == (
        "0/3 nodes are available: 1 Insufficient cpu, "
        "2 node(s) didn't satisfy plugin(s) [NodeAffinity]."
    )
    ok = schedule_pod(fw, CycleState(), make_pod(affinity=pinned), snapshot)
    assert ok.suggested_host == "n1"


def test_no_nodes():
    with pytest.raises(NoNodesAvailableError):
        schedule_pod(default_framework(), CycleState(), make_pod(), snapshot_of([]))


def test_scheduling_follows_snapshot_updates():
    fw = default_framework()
    snapshot = snapshot_of([make_node("n1", cpu=1000, pods=2)])
    for i in range(2):
        result = schedule_pod(fw, CycleState(), make_pod(f"p{i}", requests={"cpu": 400}), snapshot)
        snapshot.add_pod(make_pod(f"p{i}", requests={"cpu": 400}), result.suggested_host)
    with pytest.raises(FitError) as info:
        schedule_pod(fw, CycleState(), make_pod("p2", requests={"cpu": 100}), snapshot)
    assert str(info.value) == "0/1 nodes are available: 1 Too many pods."


def test_schedule_batch_assumes_each_placement():
    fw = default_framework()
    snapshot = snapshot_of([make_node("n1", cpu=1000), make_node("n2", cpu=1000)])
    pods = [make_pod(f"p{i}", requests={"cpu": 600}) for i in range(3)]
    outcomes = schedule_batch_on_snapshot(fw, pods, snapshot)
    hosts = [o.result.suggested_host for o in outcomes[:2] if o.result is not None]
    assert sorted(hosts) == ["n1", "n2"]
    assert outcomes[2].result is None and isinstance(outcomes[2].error, FitError)
    assert str(outcomes[2].error) == "0/2 nodes are available: 2 Insufficient cpu."
    assert snapshot.pod_node_index("default/p0") is not None
    assert snapshot.pod_node_index("default/p2") is None
    dry = schedule_batch_on_snapshot(
        default_framework(), [make_pod("q", requests={"cpu": 100})], snapshot, assume=False
    )
    assert dry[0].result is not None and snapshot.pod_node_index("default/q") is None


def test_select_host_prefers_its_share_of_the_ties_only_among_the_best() -> None:
    import random

    import numpy as np

    from distsched.framework.schedule import select_position

    def select_host(feasible, *args):  # type: ignore[no-untyped-def]
        return int(feasible[select_position(feasible, *args)])

    feasible = np.array([0, 1, 2, 3, 4])
    scores = np.array([90, 100, 100, 100, 80])
    rng = random.Random(7)
    prefer = np.array([True, False, False, True, True])
    # Among the best (slots 1, 2, 3) only slot 3 is preferred.
    assert {select_host(feasible, scores, rng.randrange, prefer) for _ in range(50)} == {3}
    # No preferred node among the best: any of them, never a worse one.
    prefer = np.array([True, False, False, False, True])
    picked = {select_host(feasible, scores, rng.randrange, prefer) for _ in range(200)}
    assert picked == {1, 2, 3}
    # A slot beyond the mask (a node added since it was computed) counts as not preferred.
    short = np.array([False, False, True])
    assert {select_host(feasible, scores, rng.randrange, short) for _ in range(50)} == {2}


def test_select_host_stays_in_its_share_within_the_slack() -> None:
    import random

    import numpy as np

    from distsched.framework.schedule import select_position

    def select_host(feasible, *args):  # type: ignore[no-untyped-def]
        return int(feasible[select_position(feasible, *args)])

    feasible = np.array([10, 11, 12, 13])
    scores = np.array([100, 97, 98, 90])
    prefer = np.zeros(14, dtype=bool)
    prefer[[11, 12, 13]] = True
    rng = random.Random(3)
    # Slack 2: the best preferred node within 2 of the best (98), not the best (100), not
    # a preferred one further down (97 is within 3 only).
    assert {select_host(feasible, scores, rng.randrange, prefer, 2) for _ in range(50)} == {12}
    assert {select_host(feasible, scores, rng.randrange, prefer, 3) for _ in range(50)} == {12}
    # No preferred node within the slack: the best, as without a preference.
    prefer[[11, 12]] = False
    assert {select_host(feasible, scores, rng.randrange, prefer, 5) for _ in range(50)} == {10}
    # Without a preference the slack means nothing.
    assert {select_host(feasible, scores, rng.randrange, None, 5) for _ in range(50)} == {10}


def _select_position_by_sets(feasible, scores, randrange, prefer=None, slack=0):  # type: ignore[no-untyped-def]
    """select_position's rule written out set by set (the reference of the test below)."""
    import numpy as np

    top = int(scores.max())
    best = [i for i, s in enumerate(scores.tolist()) if s == top]
    if len(best) == 1 and not slack:
        return best[0]
    if prefer is not None:
        near = [i for i, s in enumerate(scores.tolist()) if s >= top - slack]
        slots = feasible.tolist()
        mine = [i for i in near if slots[i] < prefer.size and bool(prefer[slots[i]])]
        if mine:
            high = max(int(scores[i]) for i in mine)
            best = [i for i in mine if int(scores[i]) == high]
    return int(np.array(best)[randrange(len(best))])


@pytest.mark.parametrize("seed", range(300))
def test_select_position_matches_the_rule_and_draws_alike(seed: int) -> None:
    """Same position and the same random draws as the rule written out, for random
    samples (runs of slots or not), scores, preference masks (short ones too) and
    slacks."""
    import numpy as np

    from distsched.framework.schedule import select_position

    gen = random.Random(seed)
    size = gen.randint(1, 40)
    start = gen.randint(0, 30)
    feasible = np.array(sorted(gen.sample(range(start, start + 80), size)), dtype=np.int64)
    if gen.random() < 0.4:  # one run of slots, as most samples are
        feasible = np.arange(start, start + size, dtype=np.int64)
    scores = np.array([gen.randint(0, 6) for _ in range(size)], dtype=np.int64)
    prefer = None
    if gen.random() < 0.8:
        prefer = np.array([gen.random() < 0.4 for _ in range(gen.randint(0, start + 90))])
    slack = gen.choice([0, 0, 1, 2, 5])
    a, b = random.Random(seed), random.Random(seed)
    got = select_position(feasible, scores, a.randrange, prefer, slack)
    assert got == _select_position_by_sets(feasible, scores, b.randrange, prefer, slack)
    assert a.random() == b.random()  # as many draws on both sides


@given(
    st.lists(st.integers(0, 40), unique=True, max_size=30),
    st.lists(st.tuples(st.integers(0, 40), st.booleans()), max_size=30),
    st.sampled_from([None, Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE]),
)
def test_nodes_where_preemption_might_help_are_kubes_set(
    all_nodes: list[int], verdicts: list[tuple[int, bool]], absent: Code | None
) -> None:
    """kube's nodesWherePreemptionMightHelp as sets: the failed nodes that are not
    unresolvable, plus the nodes without a status unless the absent status is
    unresolvable; ascending."""
    statuses = NodeToStatus()
    seen: dict[int, bool] = {}
    for node, unresolvable in verdicts:
        seen.setdefault(node, unresolvable)
    for node, unresolvable in seen.items():
        at = np.array([node], dtype=np.int64)
        statuses.record("P", at, [ReasonEntry("no", "P", unresolvable, at)])
    if absent is not None:
        statuses.absent_status = Status(absent, "absent", plugin="P")
    explicit = {n for n, unresolvable in seen.items() if not unresolvable}
    absent_nodes = set(all_nodes) - set(seen)
    expected = explicit | (set() if absent == Code.UNSCHEDULABLE_AND_UNRESOLVABLE else absent_nodes)
    helpful = statuses.nodes_that_might_help(np.array(sorted(all_nodes), dtype=np.int64))
    assert helpful.tolist() == sorted(expected)
