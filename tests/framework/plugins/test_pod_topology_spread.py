"""PodTopologySpread, after kube's podtopologyspread filtering_test and scoring_test."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from distsched.framework.cycle_state import CycleState
from distsched.framework.interface import Handle, PluginArgsError
from distsched.framework.plugins import pod_topology_spread
from distsched.framework.plugins.pod_topology_spread import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
)
from distsched.framework.podinfo import PodInfo
from distsched.framework.status import Code
from distsched.model.objects import (
    LabelSelector,
    LabelSelectorRequirement,
    Taint,
    TopologySpreadConstraint,
)
from tests.framework.builders import make_node, make_pod, run_filter, run_score, snapshot_of

HOST = "kubernetes.io/hostname"
ZONE = "zone"
FOO = LabelSelector(match_expressions=(LabelSelectorRequirement("foo", "Exists"),))
SKEW = (Code.UNSCHEDULABLE, ERR_REASON_CONSTRAINTS_NOT_MATCH)
MISSING = (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_NODE_LABEL_NOT_MATCH)


def plugin():
    return pod_topology_spread.new({}, Handle())


def constraint(
    max_skew,
    key,
    selector=FOO,
    *,
    soft=False,
    min_domains=None,
    match_label_keys=(),
    affinity_policy="Honor",
    taints_policy="Ignore",
):
    return TopologySpreadConstraint(
        max_skew,
        key,
        "ScheduleAnyway" if soft else "DoNotSchedule",
        selector,
        min_domains,
        tuple(match_label_keys),
        affinity_policy,
        taints_policy,
    )


def spread_pod(*constraints, labels=None, namespace="default", node_selector=None, name="p"):
    pod = make_pod(
        name,
        labels={"foo": ""} if labels is None else labels,
        namespace=namespace,
        node_selector=node_selector,
    )
    return replace(pod, spec=replace(pod.spec, topology_spread_constraints=tuple(constraints)))


def node(name, zone=None, **labels):
    if zone is not None:
        labels[ZONE] = zone
    return make_node(name, labels={HOST: name, **labels})


def pods_on(counts, labels=None, namespace="default"):
    """Existing pods: ``counts`` maps node name -> how many pods labelled foo there."""
    return [
        make_pod(
            f"{node_name}-{i}",
            labels=labels or {"foo": ""},
            node_name=node_name,
            namespace=namespace,
        )
        for node_name, n in counts.items()
        for i in range(n)
    ]


def four_nodes():
    return [node("a", "z1"), node("b", "z1"), node("x", "z2"), node("y", "z2")]


def verdicts(pod, nodes, existing):
    got = run_filter(plugin(), pod, snapshot_of(nodes, existing))
    return {n: None if s is None else (s.code, s.message()) for n, s in got.items()}


ALL_PASS = {"a": None, "b": None, "x": None, "y": None}


@pytest.mark.parametrize(
    ("name", "pod", "nodes", "existing", "want"),
    [
        (
            "no existing pods",
            spread_pod(constraint(1, ZONE)),
            four_nodes(),
            [],
            ALL_PASS,
        ),
        (
            "no existing pods, the incoming pod doesn't match itself",
            spread_pod(constraint(1, ZONE), labels={}),
            four_nodes(),
            [],
            ALL_PASS,
        ),
        (
            "existing pods in a different namespace do not count",
            spread_pod(constraint(1, ZONE)),
            four_nodes(),
            pods_on({"a": 2, "b": 1}, namespace="other"),
            ALL_PASS,
        ),
        (
            "pods spread across zones as 3/3, all nodes fit",
            spread_pod(constraint(1, ZONE)),
            four_nodes(),
            pods_on({"a": 1, "b": 2, "x": 2, "y": 1}),
            ALL_PASS,
        ),
        (
            "pods spread across zones as 1/2 due to absence of label 'zone' on node-b",
            spread_pod(constraint(1, ZONE)),
            [node("a", "z1"), node("b"), node("x", "z2"), node("y", "z2")],
            pods_on({"a": 1, "b": 1, "x": 1, "y": 1}),
            {"a": None, "b": MISSING, "x": SKEW, "y": SKEW},
        ),
        (
            "pods spread across nodes as 2/1/0/3, only node-x fits",
            spread_pod(constraint(1, HOST)),
            four_nodes(),
            pods_on({"a": 2, "b": 1, "y": 3}),
            {"a": SKEW, "b": SKEW, "x": None, "y": SKEW},
        ),
        (
            "pods spread across nodes as 2/1/0/3, maxSkew is 2, node-b and node-x fit",
            spread_pod(constraint(2, HOST)),
            four_nodes(),
            pods_on({"a": 2, "b": 1, "y": 3}),
            {"a": SKEW, "b": None, "x": None, "y": SKEW},
        ),
        (
            "the pod's node affinity (Honor) leaves node-b and node-x out of the minimum",
            spread_pod(constraint(1, HOST), node_selector={"pool": "p1"}),
            [
                node("a", "z1", pool="p1"),
                node("b", "z1"),
                node("x", "z2"),
                node("y", "z2", pool="p1"),
            ],
            pods_on({"a": 2, "b": 1, "y": 3}),
            {"a": None, "b": None, "x": None, "y": SKEW},
        ),
        (
            "with nodeAffinityPolicy Ignore every node counts for the minimum",
            spread_pod(constraint(1, HOST, affinity_policy="Ignore"), node_selector={"pool": "p1"}),
            [
                node("a", "z1", pool="p1"),
                node("b", "z1"),
                node("x", "z2"),
                node("y", "z2", pool="p1"),
            ],
            pods_on({"a": 2, "b": 1, "y": 3}),
            {"a": SKEW, "b": SKEW, "x": None, "y": SKEW},
        ),
        (
            "pods spread as 2/1 across zones, and the pod doesn't match itself",
            spread_pod(constraint(1, ZONE), labels={}),
            four_nodes(),
            pods_on({"a": 1, "b": 1, "x": 1}),
            ALL_PASS,
        ),
        (
            "the same spread with a self-matching pod rejects the fuller zone",
            spread_pod(constraint(1, ZONE)),
            four_nodes(),
            pods_on({"a": 1, "b": 1, "x": 1}),
            {"a": SKEW, "b": SKEW, "x": None, "y": None},
        ),
        (
            "an empty selector counts no pods (kube's countPodsMatchSelector)",
            spread_pod(constraint(1, HOST, LabelSelector())),
            four_nodes(),
            pods_on({"a": 3}),
            ALL_PASS,
        ),
        (
            "a nil selector matches nothing, not even the incoming pod",
            spread_pod(constraint(1, HOST, None)),
            four_nodes(),
            pods_on({"a": 3}),
            ALL_PASS,
        ),
        (
            "two constraints on zone and node, spreads = [3/3, 2/1/0/3]",
            spread_pod(constraint(1, ZONE), constraint(1, HOST)),
            four_nodes(),
            pods_on({"a": 2, "b": 1, "y": 3}),
            {"a": SKEW, "b": SKEW, "x": None, "y": SKEW},
        ),
        (
            "two constraints, spreads = [3/0, 1/2/0/0]: only the zone constraint fails",
            spread_pod(constraint(1, ZONE), constraint(1, HOST)),
            four_nodes(),
            pods_on({"a": 1, "b": 2}),
            {"a": SKEW, "b": SKEW, "x": None, "y": None},
        ),
    ],
)
def test_filter(name, pod, nodes, existing, want):
    assert verdicts(pod, nodes, existing) == want, name


def test_the_first_failing_constraint_decides_the_reason():
    # node-b and node-c lack the rack label: they are not eligible for either constraint.
    nodes = [
        node("a", "z1", rack="r1"),
        node("b", "z1"),
        node("x", "z2", rack="r2"),
        node("c", "z2"),
    ]
    pod = spread_pod(constraint(1, ZONE), constraint(1, "rack"))
    got = verdicts(pod, nodes, pods_on({"a": 2}))
    assert got == {"a": SKEW, "b": SKEW, "x": None, "c": MISSING}


@pytest.mark.parametrize(
    ("min_domains", "want"),
    [
        (None, {"a": None, "b": None, "c": None}),
        (3, {"a": None, "b": None, "c": None}),
        # Fewer domains than minDomains: the global minimum counts as 0.
        (4, {"a": SKEW, "b": SKEW, "c": None}),
    ],
)
def test_min_domains(min_domains, want):
    nodes = [node("a"), node("b"), node("c")]
    pod = spread_pod(constraint(2, HOST, min_domains=min_domains))
    assert verdicts(pod, nodes, pods_on({"a": 2, "b": 2, "c": 1})) == want


@pytest.mark.parametrize(
    ("policy", "want"),
    [
        ("Ignore", {"a": SKEW, "b": SKEW, "t": None}),
        ("Honor", {"a": None, "b": None, "t": None}),
    ],
)
def test_node_taints_policy(policy, want):
    nodes = [
        node("a"),
        node("b"),
        make_node("t", labels={HOST: "t"}, taints=[Taint("k", "NoSchedule")]),
    ]
    pod = spread_pod(constraint(1, HOST, taints_policy=policy))
    assert verdicts(pod, nodes, pods_on({"a": 1, "b": 1})) == want


def test_match_label_keys_narrow_the_selector():
    nodes = [node("a"), node("b")]
    existing = pods_on({"a": 2}, labels={"foo": "", "rev": "1"})
    with_keys = spread_pod(
        constraint(1, HOST, match_label_keys=["rev"]), labels={"foo": "", "rev": "2"}
    )
    assert verdicts(with_keys, nodes, existing) == {"a": None, "b": None}
    without = spread_pod(constraint(1, HOST), labels={"foo": "", "rev": "2"})
    assert verdicts(without, nodes, existing) == {"a": SKEW, "b": None}


def test_pre_filter_skips_pods_without_hard_constraints():
    snapshot = snapshot_of(four_nodes())
    for pod in (spread_pod(), spread_pod(constraint(1, ZONE, soft=True))):
        _, status = plugin().pre_filter(CycleState(), pod, snapshot)
        assert status is not None and status.is_skip()


def test_pre_filter_extensions_keep_the_minimum_exact():
    nodes = [node("a", "z1"), node("b", "z2"), node("c", "z3")]
    snapshot = snapshot_of(nodes, pods_on({"a": 1, "b": 2, "c": 2}))
    p = plugin()
    pod = spread_pod(constraint(1, ZONE))
    state = CycleState()
    p.pre_filter(state, pod, snapshot)
    indices = snapshot.node_indices()

    def failing(s):
        return p.filter(s, pod, snapshot, indices).failed_mask(3).tolist()

    assert failing(state) == [False, True, True]
    a, b = snapshot.index_of("a"), snapshot.index_of("b")
    clone = state.clone()
    matching = PodInfo.of(make_pod("new", labels={"foo": ""}))
    for _ in range(2):
        p.add_pod(clone, pod, matching, a, snapshot)  # z1: 3
    p.add_pod(clone, pod, matching, b, snapshot)  # z2: 3, the minimum is z3's 2
    assert failing(clone) == [True, True, False]
    p.add_pod(
        clone, pod, PodInfo.of(make_pod("other-ns", labels={"foo": ""}, namespace="x")), a, snapshot
    )
    p.add_pod(clone, pod, PodInfo.of(make_pod("unlabelled")), a, snapshot)
    p.remove_pod(clone, pod, matching, b, snapshot)  # z2: 2
    assert failing(clone) == [True, False, False]
    assert failing(state) == [False, True, True]  # the original is untouched


def test_counts_follow_the_snapshot():
    snapshot = snapshot_of([node("a"), node("b")])
    p = plugin()
    pod = spread_pod(constraint(1, HOST))
    assert all(s is None for s in run_filter(p, pod, snapshot).values())
    snapshot.add_pod(make_pod("e1", labels={"foo": ""}, node_name="a"))
    got = run_filter(p, pod, snapshot)
    assert got["a"] is not None and got["b"] is None
    snapshot.remove_pod("default/e1")
    assert all(s is None for s in run_filter(p, pod, snapshot).values())


# ---------------------------------------------------------------------------- scoring
@pytest.mark.parametrize(
    ("name", "pod", "nodes", "existing", "want"),
    [
        (
            "one constraint on node, no existing pods",
            spread_pod(constraint(1, HOST, soft=True)),
            [node("a"), node("b")],
            [],
            {"a": 100, "b": 100},
        ),
        (
            "one constraint on node, all nodes have the same number of matching pods",
            spread_pod(constraint(1, HOST, soft=True)),
            [node("a"), node("b")],
            pods_on({"a": 1, "b": 1}),
            {"a": 100, "b": 100},
        ),
        (
            "one constraint on node, all 4 nodes are candidates",
            spread_pod(constraint(1, HOST, soft=True)),
            [node("a"), node("b"), node("c"), node("d")],
            pods_on({"a": 2, "b": 1, "d": 3}),
            {"a": 20, "b": 60, "c": 100, "d": 0},
        ),
        (
            "maxSkew 3 waters the differences down",
            spread_pod(constraint(3, HOST, soft=True)),
            [node("a"), node("b"), node("c"), node("d")],
            pods_on({"a": 2, "b": 1, "d": 3}),
            {"a": 42, "b": 71, "c": 100, "d": 28},
        ),
        (
            "one constraint on zone, a node without the zone label scores 0",
            spread_pod(constraint(1, ZONE, soft=True)),
            [node("a", "z1"), node("b", "z1"), node("x", "z2"), node("y")],
            pods_on({"a": 1, "b": 2, "x": 1, "y": 1}),
            {"a": 25, "b": 25, "x": 100, "y": 0},
        ),
        (
            "two constraints on zone and node",
            spread_pod(constraint(1, ZONE, soft=True), constraint(1, HOST, soft=True)),
            four_nodes(),
            pods_on({"a": 2, "b": 1, "y": 3}),
            {"a": 60, "b": 80, "x": 100, "y": 40},
        ),
        (
            "pods of other namespaces do not count",
            spread_pod(constraint(1, HOST, soft=True)),
            [node("a"), node("b")],
            pods_on({"a": 3}, namespace="other"),
            {"a": 100, "b": 100},
        ),
    ],
)
def test_score(name, pod, nodes, existing, want):
    assert run_score(plugin(), pod, snapshot_of(nodes, existing)) == want, name


def test_score_counts_only_domains_of_the_scored_nodes():
    nodes = [node("a"), node("b")]
    snapshot = snapshot_of(nodes, pods_on({"a": 1}))
    p = plugin()
    pod = spread_pod(constraint(1, HOST, soft=True))
    state = CycleState()
    only_a = np.array([snapshot.index_of("a")], dtype=np.int64)
    assert p.pre_score(state, pod, snapshot, only_a) is None
    raw = p.score(state, pod, snapshot, only_a)
    assert raw.tolist() == [1]  # round(1 * ln(1 + 2))
    assert p.normalize_score(state, pod, raw).tolist() == [100]


def test_pre_score_skips_pods_without_soft_constraints():
    snapshot = snapshot_of(four_nodes())
    assert run_score(plugin(), spread_pod(constraint(1, ZONE)), snapshot) == {}
    assert run_score(plugin(), spread_pod(), snapshot) == {}


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"defaultingType": "Other"}, "defaultingType"),
        ({"defaultConstraints": [{"maxSkew": 1}]}, "defaultConstraints"),
        ({"bogus": True}, "bogus"),
    ],
)
def test_bad_args(args, field):
    with pytest.raises(PluginArgsError) as info:
        pod_topology_spread.new(args, Handle())
    assert info.value.field == field


def test_list_defaulting_is_accepted():
    args = {"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "topologyKey": ZONE}]}
    assert pod_topology_spread.new(args, Handle()).name == pod_topology_spread.NAME
