"""Property tests: the vectorized filters agree with a plain per-node reference."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from distsched.framework.cycle_state import CycleState
from distsched.framework.diagnosis import FitError
from distsched.framework.plugins.helpers.node_selector import term_mask
from distsched.framework.profile import build_profiles, default_config
from distsched.framework.schedule import schedule_pod
from distsched.model.nodeaffinity import term_matches_node
from distsched.model.objects import Node, NodeSelectorTerm, Pod, Taint, Toleration
from distsched.model.taints import DO_NOT_SCHEDULE_EFFECTS, tolerations_tolerate
from tests.framework.builders import make_node, make_pod, req, required_affinity, snapshot_of

KEYS = ("zone", "disk", "rank")
VALUES = ("a", "b", "1", "7")
TAINTS = (
    Taint("dedicated", "NoSchedule", "a"),
    Taint("spot", "PreferNoSchedule"),
    Taint("evict", "NoExecute", "b"),
)

labels_st = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=3)
requirement_st = st.one_of(
    st.builds(
        lambda k, op, vs: req(k, op, *vs),
        st.sampled_from(KEYS),
        st.sampled_from(["In", "NotIn"]),
        st.lists(st.sampled_from(VALUES), min_size=1, max_size=2),
    ),
    st.builds(
        lambda k, op: req(k, op), st.sampled_from(KEYS), st.sampled_from(["Exists", "DoesNotExist"])
    ),
    st.builds(
        lambda k, op, v: req(k, op, v),
        st.sampled_from(KEYS),
        st.sampled_from(["Gt", "Lt"]),
        st.sampled_from(["0", "5", "x"]),
    ),
)
term_st = st.builds(
    lambda reqs: NodeSelectorTerm(tuple(reqs)), st.lists(requirement_st, max_size=3)
)


@st.composite
def nodes_st(draw: st.DrawFn) -> list[Node]:
    count = draw(st.integers(min_value=1, max_value=12))
    return [
        make_node(
            f"n{i}",
            cpu=draw(st.sampled_from([0, 500, 1000, 4000])),
            pods=draw(st.sampled_from([1, 110])),
            labels=draw(labels_st),
            taints=draw(st.lists(st.sampled_from(TAINTS), unique=True, max_size=2)),
            unschedulable=draw(st.booleans()),
        )
        for i in range(count)
    ]


@settings(max_examples=150, deadline=None)
@given(nodes=nodes_st(), term=term_st)
def test_term_masks_match_the_scalar_rule(nodes: list[Node], term: NodeSelectorTerm) -> None:
    snapshot = snapshot_of(nodes)
    mask = term_mask(snapshot, term)
    for node in nodes:
        assert bool(mask[snapshot.index_of(node.metadata.name)]) == term_matches_node(term, node)


def reference_fits(pod: Pod, node: Node, pods_on_node: int, cpu_used: int) -> bool:
    spec = pod.spec
    want = spec.containers[0].resources.requests.get("cpu", 0)
    tolerations = spec.tolerations
    if node.spec.unschedulable and not tolerations_tolerate(
        tolerations, Taint("node.kubernetes.io/unschedulable", "NoSchedule")
    ):
        return False
    for taint in node.spec.taints:
        if taint.effect in DO_NOT_SCHEDULE_EFFECTS and not tolerations_tolerate(tolerations, taint):
            return False
    labels = node.metadata.labels
    if any(labels.get(k) != v for k, v in spec.node_selector.items()):
        return False
    affinity = spec.affinity
    required = affinity.node_affinity.required if affinity and affinity.node_affinity else None
    if required is not None and not any(term_matches_node(t, node) for t in required):
        return False
    if pods_on_node + 1 > node.status.allocatable["pods"]:
        return False
    return not (want > 0 and want > node.status.allocatable["cpu"] - cpu_used)


@settings(max_examples=150, deadline=None)
@given(
    nodes=nodes_st(),
    cpu=st.sampled_from([0, 300, 800, 2000]),
    selector=labels_st,
    terms=st.lists(term_st, max_size=2),
    use_affinity=st.booleans(),
    tolerate=st.lists(st.sampled_from(["dedicated", "evict", "*"]), unique=True, max_size=2),
    placed=st.lists(st.tuples(st.integers(0, 11), st.sampled_from([0, 400])), max_size=6),
    seed=st.integers(0, 10),
)
def test_schedule_matches_reference(
    nodes, cpu, selector, terms, use_affinity, tolerate, placed, seed
) -> None:  # type: ignore[no-untyped-def]
    snapshot = snapshot_of(nodes)
    used: dict[str, tuple[int, int]] = {n.metadata.name: (0, 0) for n in nodes}
    for i, (slot, amount) in enumerate(placed):
        node = nodes[slot % len(nodes)].metadata.name
        snapshot.add_pod(make_pod(f"x{i}", node_name=node, requests={"cpu": amount}))
        count, total = used[node]
        used[node] = (count + 1, total + amount)
    tolerations = [
        Toleration("", "Exists") if key == "*" else Toleration(key, "Exists") for key in tolerate
    ]
    pod = make_pod(
        requests={"cpu": cpu} if cpu else {},
        node_selector=selector,
        affinity=required_affinity(*terms) if use_affinity else None,
        tolerations=tolerations,
    )
    feasible = {n.metadata.name for n in nodes if reference_fits(pod, n, *used[n.metadata.name])}
    config = default_config()
    fw = build_profiles(config, rng=random.Random(seed))["default-scheduler"]
    try:
        result = schedule_pod(fw, CycleState(), pod, snapshot)
    except FitError as error:
        assert not feasible
        counts = error.reason_histogram()
        assert sum(counts.values()) >= len(nodes)
        assert str(error).startswith(f"0/{len(nodes)} nodes are available:")
    else:
        assert result.suggested_host in feasible
        assert result.feasible_nodes == len(feasible)  # < 100 nodes: all are evaluated
        assert result.evaluated_nodes == len(nodes)
