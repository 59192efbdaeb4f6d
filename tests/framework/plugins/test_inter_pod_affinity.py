"""InterPodAffinity, after kube's interpodaffinity filtering_test and scoring_test."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from distsched.framework.cycle_state import CycleState
from distsched.framework.interface import PluginArgsError
from distsched.framework.plugins import inter_pod_affinity
from distsched.framework.plugins.inter_pod_affinity import (
    ERR_REASON_ANTI_AFFINITY,
    ERR_REASON_EXISTING_ANTI_AFFINITY,
)
from distsched.framework.podinfo import PodInfo
from distsched.framework.status import Code
from distsched.model.objects import (
    LabelSelector,
    LabelSelectorRequirement,
)
from tests.framework.builders import make_node, run_filter, run_score, snapshot_of
from tests.framework.plugins.affinity_builders import (
    AFFINITY_FAIL,
    affinity,
    node,
    plugin,
    pod,
    reason,
    term,
)
from tests.support.objects import HOSTNAME as HOST

ZONE = "zone"


def sel(**labels):
    return LabelSelector(dict(labels))


def expr(key, op, *values):
    return LabelSelector(match_expressions=(LabelSelectorRequirement(key, op, tuple(values)),))


ANTI_FAIL = (Code.UNSCHEDULABLE, ERR_REASON_ANTI_AFFINITY)
EXISTING_FAIL = (Code.UNSCHEDULABLE, ERR_REASON_EXISTING_ANTI_AFFINITY)
SECURITY_S1 = {"security": "S1"}


@pytest.mark.parametrize(
    ("name", "incoming", "existing", "want"),
    [
        (
            "a pod without affinity schedules onto a node with no existing pods",
            pod(),
            [],
            None,
        ),
        (
            "satisfies required pod affinity with the In operator",
            pod(aff=affinity([term(expr("service", "In", "securityscan", "value2"))])),
            [pod("e", {"service": "securityscan"}, node="n1")],
            None,
        ),
        (
            "satisfies pod affinity with the NotIn operator",
            pod(aff=affinity([term(expr("service", "NotIn", "securityscan3", "value3"))])),
            [pod("e", {"service": "securityscan"}, node="n1")],
            None,
        ),
        (
            "does not satisfy pod affinity whose namespaces exclude the existing pod",
            pod(aff=affinity([term(expr("service", "In", "securityscan"), namespaces=["DiffNs"])])),
            [pod("e", {"service": "securityscan"}, node="n1")],
            AFFINITY_FAIL,
        ),
        (
            "does not satisfy pod affinity when no pod matches and the pod lacks the label",
            pod(aff=affinity([term(expr("service", "In", "antivirusscan", "value2"))])),
            [pod("e", {"service": "securityscan"}, node="n1")],
            AFFINITY_FAIL,
        ),
        (
            "satisfies required affinity and anti-affinity together",
            pod(
                aff=affinity(
                    [term(expr("service", "Exists"))], anti=[term(expr("service", "In", "x"))]
                )
            ),
            [pod("e", {"service": "securityscan"}, node="n1")],
            None,
        ),
        (
            "all affinity terms must match the same pod (terms are ANDed)",
            pod(
                aff=affinity([term(sel(service="securityscan")), term(sel(team="blue"), key=HOST)])
            ),
            [pod("e", {"service": "securityscan"}, node="n1")],
            AFFINITY_FAIL,
        ),
        (
            "the incoming pod's anti-affinity matches an existing pod",
            pod(aff=affinity(anti=[term(sel(service="securityscan"))])),
            [pod("e", {"service": "securityscan"}, node="n1")],
            ANTI_FAIL,
        ),
        (
            "an existing pod's anti-affinity matches the incoming pod",
            pod(labels=SECURITY_S1),
            [pod("e", aff=affinity(anti=[term(sel(security="S1"))]), node="n1")],
            EXISTING_FAIL,
        ),
        (
            "an existing pod's anti-affinity in another namespace does not apply",
            pod(labels=SECURITY_S1, namespace="other"),
            [pod("e", aff=affinity(anti=[term(sel(security="S1"))]), node="n1")],
            None,
        ),
        (
            "affinity rules are checked before anti-affinity rules",
            pod(
                labels=SECURITY_S1,
                aff=affinity([term(sel(service="nothere"))], anti=[term(sel(service="x"))]),
            ),
            [pod("e", {"service": "x"}, aff=affinity(anti=[term(sel(security="S1"))]), node="n1")],
            AFFINITY_FAIL,
        ),
        (
            "the incoming pod's anti-affinity is reported before existing pods' anti-affinity",
            pod(labels=SECURITY_S1, aff=affinity(anti=[term(sel(service="x"))])),
            [pod("e", {"service": "x"}, aff=affinity(anti=[term(sel(security="S1"))]), node="n1")],
            ANTI_FAIL,
        ),
        (
            "first pod of a group: no pod matches, but the pod matches its own term",
            pod(labels={"service": "web"}, aff=affinity([term(sel(service="web"))])),
            [pod("e", {"service": "db"}, node="n1")],
            None,
        ),
        (
            "namespaceSelector selecting the existing pod's namespace satisfies affinity",
            pod(
                aff=affinity(
                    [
                        term(
                            sel(service="s"),
                            ns_selector=sel(**{"kubernetes.io/metadata.name": "t"}),
                        )
                    ]
                )
            ),
            [pod("e", {"service": "s"}, node="n1", namespace="t")],
            None,
        ),
        (
            "an empty namespaceSelector selects every namespace",
            pod(aff=affinity([term(sel(service="s"), ns_selector=LabelSelector())])),
            [pod("e", {"service": "s"}, node="n1", namespace="elsewhere")],
            None,
        ),
        (
            "a namespaceSelector selecting another namespace does not satisfy affinity",
            pod(
                aff=affinity(
                    [
                        term(
                            sel(service="s"),
                            ns_selector=sel(**{"kubernetes.io/metadata.name": "x"}),
                        )
                    ]
                )
            ),
            [pod("e", {"service": "s"}, node="n1", namespace="t")],
            AFFINITY_FAIL,
        ),
        (
            "existing anti-affinity with a namespaceSelector covering the incoming pod",
            pod(labels=SECURITY_S1, namespace="team-a"),
            [
                pod(
                    "e",
                    aff=affinity(
                        anti=[
                            term(
                                sel(security="S1"),
                                ns_selector=expr("kubernetes.io/metadata.name", "In", "team-a"),
                            )
                        ]
                    ),
                    node="n1",
                )
            ],
            EXISTING_FAIL,
        ),
    ],
)
def test_filter_single_node(name, incoming, existing, want):
    snapshot = snapshot_of([node("n1", region="r1", zone="z1")], existing)
    statuses = run_filter(plugin(), incoming, snapshot)
    assert reason(statuses["n1"]) == want, name


def test_node_without_the_topology_key_fails_affinity_even_as_first_pod():
    snapshot = snapshot_of([node("n1", region="r1"), make_node("bare")])
    incoming = pod(labels={"service": "web"}, aff=affinity([term(sel(service="web"))]))
    statuses = run_filter(plugin(), incoming, snapshot)
    assert statuses["n1"] is None
    assert reason(statuses["bare"]) == AFFINITY_FAIL


def test_first_pod_exception_needs_no_matching_pod_anywhere():
    # A matching pod exists in r2: the pod must go there, not anywhere it matches itself.
    nodes = [node("n1", region="r1"), node("n2", region="r2")]
    existing = [pod("e", {"service": "web"}, node="n2")]
    incoming = pod(labels={"service": "web"}, aff=affinity([term(sel(service="web"))]))
    statuses = run_filter(plugin(), incoming, snapshot_of(nodes, existing))
    assert reason(statuses["n1"]) == AFFINITY_FAIL
    assert statuses["n2"] is None


def test_affinity_and_anti_affinity_across_a_zone():
    nodes = [node("a", zone="z1"), node("b", zone="z1"), node("c", zone="z2"), node("d")]
    existing = [pod("web", {"app": "web"}, node="a")]
    wants_web = pod(aff=affinity([term(sel(app="web"), key=ZONE)]))
    got = run_filter(plugin(), wants_web, snapshot_of(nodes, existing))
    assert {n: reason(s) for n, s in got.items()} == {
        "a": None,
        "b": None,
        "c": AFFINITY_FAIL,
        "d": AFFINITY_FAIL,
    }
    avoids_web = pod(aff=affinity(anti=[term(sel(app="web"), key=ZONE)]))
    got = run_filter(plugin(), avoids_web, snapshot_of(nodes, existing))
    assert {n: reason(s) for n, s in got.items()} == {
        "a": ANTI_FAIL,
        "b": ANTI_FAIL,
        "c": None,
        "d": None,  # no zone label: the anti-affinity term cannot be violated there
    }


def test_existing_anti_affinity_blocks_the_whole_topology_domain():
    nodes = [node("a", zone="z1"), node("b", zone="z1"), node("c", zone="z2")]
    existing = [pod("e", aff=affinity(anti=[term(sel(app="db"), key=ZONE)]), node="a")]
    got = run_filter(plugin(), pod(labels={"app": "db"}), snapshot_of(nodes, existing))
    assert {n: reason(s) for n, s in got.items()} == {
        "a": EXISTING_FAIL,
        "b": EXISTING_FAIL,
        "c": None,
    }


def test_pre_filter_skips_pods_with_nothing_to_check():
    snapshot = snapshot_of([node("n1")], [pod("e", {"app": "x"}, node="n1")])
    _, status = plugin().pre_filter(CycleState(), pod(), snapshot)
    assert status is not None and status.is_skip()
    # An existing anti-affinity term matching the pod means there is something to check.
    snapshot.add_pod(pod("f", aff=affinity(anti=[term(sel(app="y"), key=HOST)]), node="n1"))
    _, status = plugin().pre_filter(CycleState(), pod(labels={"app": "y"}), snapshot)
    assert status is None


def test_pre_filter_extensions_add_and_remove_pods():
    nodes = [node("a", zone="z1"), node("b", zone="z2")]
    blocker = pod("blocker", {"app": "db"}, node="a")
    snapshot = snapshot_of(nodes, [blocker])
    p = plugin()
    incoming = pod(aff=affinity(anti=[term(sel(app="db"), key=ZONE)]))
    state = CycleState()
    p.pre_filter(state, incoming, snapshot)
    indices = snapshot.node_indices()
    assert p.filter(state, incoming, snapshot, indices).failed_mask(2).tolist() == [True, False]

    clone = state.clone()
    a = snapshot.index_of("a")
    b = snapshot.index_of("b")
    p.remove_pod(clone, incoming, PodInfo.of(blocker), a, snapshot)
    assert not p.filter(clone, incoming, snapshot, indices).failed_mask(2).any()
    p.add_pod(clone, incoming, PodInfo.of(pod("x", {"app": "db"})), b, snapshot)
    assert p.filter(clone, incoming, snapshot, indices).failed_mask(2).tolist() == [False, True]
    # The original state is untouched by what happened to the clone.
    assert p.filter(state, incoming, snapshot, indices).failed_mask(2).tolist() == [True, False]

    # Pods whose own anti-affinity matches the incoming pod block their zone.
    guard = pod("guard", aff=affinity(anti=[term(sel(app="web"), key=ZONE)]), node="a")
    snapshot.add_pod(guard)
    labelled = pod(labels={"app": "web"})
    state = CycleState()
    p.pre_filter(state, labelled, snapshot)
    hater = pod("hater", aff=affinity(anti=[term(sel(app="web"), key=ZONE)]))
    p.add_pod(state, labelled, PodInfo.of(hater), b, snapshot)
    result = p.filter(state, labelled, snapshot, indices)
    assert [f.reason for f in result.failures] == [ERR_REASON_EXISTING_ANTI_AFFINITY]
    assert result.failed_mask(2).tolist() == [True, True]
    p.remove_pod(state, labelled, PodInfo.of(guard), a, snapshot)
    assert p.filter(state, labelled, snapshot, indices).failed_mask(2).tolist() == [False, True]


def test_counts_follow_snapshot_changes():
    nodes = [node("a"), node("b")]
    snapshot = snapshot_of(nodes)
    p = plugin()
    incoming = pod(labels={"app": "x"}, aff=affinity(anti=[term(sel(app="x"), key=HOST)]))
    assert all(s is None for s in run_filter(p, incoming, snapshot).values())
    snapshot.add_pod(pod("e1", {"app": "x"}, node="a"))
    assert reason(run_filter(p, incoming, snapshot)["a"]) == ANTI_FAIL
    snapshot.remove_pod("default/e1")
    snapshot.add_pod(pod("e2", {"app": "x"}, node="b"))
    got = run_filter(p, incoming, snapshot)
    assert got["a"] is None and reason(got["b"]) == ANTI_FAIL
    snapshot.remove_node("b")
    snapshot.add_node(node("c"))
    assert all(s is None for s in run_filter(p, incoming, snapshot).values())


# ---------------------------------------------------------------------------- scoring
def score_nodes():
    return [
        node("m1", region="China"),
        node("m2", region="India"),
        node("m3", az="az1"),
    ]


S1 = {"security": "S1"}
S2 = {"security": "S2"}


@pytest.mark.parametrize(
    ("name", "incoming", "existing", "want"),
    [
        (
            "all nodes score zero when nobody has affinity",
            pod(labels=S1),
            [],
            {},
        ),
        (
            "preferred affinity: the node whose topology holds matching pods scores high",
            pod(labels=S1, aff=affinity(preferred=[(5, term(expr("security", "In", "S1")))])),
            [pod("e1", S1, node="m1"), pod("e2", S2, node="m2"), pod("e3", S1, node="m3")],
            {"m1": 100, "m2": 0, "m3": 0},
        ),
        (
            "preferred anti-affinity: nodes in the matching pods' topology score low",
            pod(labels=S1, aff=affinity(anti_preferred=[(5, term(sel(security="S1")))])),
            [pod("e1", S1, node="m1"), pod("e2", S2, node="m2")],
            {"m1": 0, "m2": 100, "m3": 100},
        ),
        (
            "affinity and anti-affinity preferences add up (min-max normalized)",
            pod(
                labels=S1,
                aff=affinity(
                    preferred=[(8, term(sel(security="S1")))],
                    anti_preferred=[(5, term(sel(security="S2")))],
                ),
            ),
            [pod("e1", S1, node="m1"), pod("e2", S2, node="m2")],
            {"m1": 100, "m2": 0, "m3": 38},
        ),
        (
            "an existing pod's required affinity pulls the incoming pod (hard weight 1)",
            pod(labels=S1),
            [pod("e1", aff=affinity([term(sel(security="S1"))]), node="m2")],
            {"m1": 0, "m2": 100, "m3": 0},
        ),
        (
            "an existing pod's preferred affinity and anti-affinity are symmetric",
            pod(labels=S1),
            [
                pod("e1", aff=affinity(preferred=[(5, term(sel(security="S1")))]), node="m1"),
                pod("e2", aff=affinity(anti_preferred=[(5, term(sel(security="S1")))]), node="m2"),
            ],
            {"m1": 100, "m2": 0, "m3": 50},
        ),
        (
            "terms of pods in other namespaces do not count",
            pod(labels=S1, aff=affinity(preferred=[(5, term(sel(security="S1")))])),
            [pod("e1", S1, node="m1", namespace="other")],
            {},
        ),
    ],
)
def test_score(name, incoming, existing, want):
    snapshot = snapshot_of(score_nodes(), existing)
    assert run_score(plugin(), incoming, snapshot) == want, name


def test_hard_pod_affinity_weight_and_ignore_preferred_args():
    existing = [pod("e1", aff=affinity([term(sel(security="S1"))]), node="m2")]
    snapshot = snapshot_of(score_nodes(), existing)
    assert run_score(plugin({"hardPodAffinityWeight": 0}), pod(labels=S1), snapshot) == {}
    ignoring = plugin({"ignorePreferredTermsOfExistingPods": True})
    assert run_score(ignoring, pod(labels=S1), snapshot) == {}


def test_raw_scores_sum_topology_weights():
    nodes = [node("a", zone="z1"), node("b", zone="z1"), node("c", zone="z2")]
    existing = [pod("e1", S1, node="a"), pod("e2", S1, node="c"), pod("e3", S1, node="c")]
    incoming = pod(aff=affinity(preferred=[(3, term(sel(security="S1"), key=ZONE))]))
    raw = run_score(plugin(), incoming, snapshot_of(nodes, existing), normalize=False)
    assert raw == {"a": 3, "b": 3, "c": 6}


def test_normalize_score_is_min_max_with_truncation():
    p = plugin()
    state = CycleState()
    state.write("PreScore" + inter_pod_affinity.NAME, inter_pod_affinity._PreScoreState({"k": 0}))
    got = p.normalize_score(state, pod(), np.array([-5, 0, 1, 10], dtype=np.int64))
    assert got.tolist() == [0, 33, 40, 100]
    assert p.normalize_score(state, pod(), np.array([7, 7], dtype=np.int64)).tolist() == [0, 0]


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"hardPodAffinityWeight": 101}, "hardPodAffinityWeight"),
        ({"hardPodAffinityWeight": -1}, "hardPodAffinityWeight"),
        ({"ignorePreferredTermsOfExistingPods": "yes"}, "ignorePreferredTermsOfExistingPods"),
        ({"bogus": 1}, "bogus"),
    ],
)
def test_bad_args(args, field):
    with pytest.raises(PluginArgsError) as info:
        plugin(args)
    assert info.value.field == field


def test_invalid_selector_is_unresolvable_at_pre_filter():
    bad = LabelSelector(match_expressions=(LabelSelectorRequirement("k", "In", ()),))
    incoming = replace(pod(), spec=replace(pod().spec, affinity=affinity([term(bad)])))
    _, status = plugin().pre_filter(CycleState(), incoming, snapshot_of([node("n1")]))
    assert status is not None and status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message().startswith("parsing pod: ")


def test_counts_follow_label_changes_and_snapshot_growth():
    snapshot = snapshot_of([node("a", zone="z1"), node("b", zone="z2")])
    p = plugin()
    incoming = pod(aff=affinity(anti=[term(sel(app="x"), key=ZONE)]))
    snapshot.add_pod(pod("e1", {"app": "x"}, node="a"))
    assert reason(run_filter(p, incoming, snapshot)["a"]) == ANTI_FAIL
    snapshot.update_node(node("b", zone="z1"))  # b joins a's zone
    got = run_filter(p, incoming, snapshot)
    assert reason(got["a"]) == ANTI_FAIL and reason(got["b"]) == ANTI_FAIL
    for i in range(10):  # past the snapshot's initial capacity of 4
        snapshot.add_node(node(f"n{i}", zone=f"q{i}"))
    snapshot.add_pod(pod("e2", {"app": "x"}, node="n9"))
    got = run_filter(p, incoming, snapshot)
    assert reason(got["n9"]) == ANTI_FAIL and got["n8"] is None
    assert reason(got["b"]) == ANTI_FAIL
    snapshot.remove_pod("default/e1")
    got = run_filter(p, incoming, snapshot)
    assert got["a"] is None and got["b"] is None and reason(got["n9"]) == ANTI_FAIL
