"""The batching scheduler (framework/batching.py) is exact: on random snapshots and pod
sequences it decides every pod as ``schedule_pod`` does on an identical copy.

Each example builds two identical worlds (snapshot, profile with an identically seeded
rng, nominator) and applies the same operations to both: scheduling a pod (batched in
one world, ``schedule_pod`` in the other) followed by the worker's assume step, node
updates, additions and removals, ledger usage changes, pod removals, pods with
(anti-)affinity placed on nodes, and nominated pods. After every scheduling it compares
the result (node, evaluated and feasible counts) or the error, the framework's
``next_start_node_index`` and rng state, and the pod's CycleState.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distsched.framework.batching import (
    BatchScheduler,
    _Entry,
    batch_scheduler,
    use_batch_scheduler,
)
from distsched.framework.cycle_state import CycleState
from distsched.framework.diagnosis import SchedulingError
from distsched.framework.interface import Handle
from distsched.framework.listers import Listers
from distsched.framework.nominator import PodNominator
from distsched.framework.podinfo import PodInfo
from distsched.framework.profile import build_profiles, default_config, parse_config
from distsched.framework.runtime import Framework
from distsched.framework.schedule import schedule_pod
from distsched.framework.snapshot import Snapshot
from distsched.model.objects import (
    Affinity,
    LabelSelector,
    Node,
    NodeSelectorTerm,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    Taint,
    Toleration,
    TopologySpreadConstraint,
)
from tests.framework.builders import (
    GI,
    MI,
    container,
    host_port,
    make_node,
    make_pod,
    preferred_affinity,
    req,
    required_affinity,
)

GPU = "example.com/gpu"

CONFIGS = {
    "default": "",
    "most-allocated": """
profiles:
- schedulerName: default-scheduler
  plugins:
    score:
      enabled: [{name: NodeResourcesFit, weight: 3}, {name: NodeAffinity, weight: 4}]
  pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: MostAllocated}}
  - name: NodeAffinity
    args:
      addedAffinity:
        preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 5
          preference: {matchExpressions: [{key: zone, operator: In, values: [a]}]}
""",
    "images": """
profiles:
- schedulerName: default-scheduler
  plugins:
    score:
      disabled: [{name: "*"}]
      enabled: [{name: ImageLocality, weight: 5}, {name: NodeResourcesFit, weight: 1}]
""",
    "ratio": """
profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: RequestedToCapacityRatio
        resources: [{name: cpu, weight: 2}, {name: memory}, {name: example.com/gpu, weight: 3}]
        requestedToCapacityRatio:
          shape: [{utilization: 0, score: 10}, {utilization: 100, score: 0}]
  - name: NodeResourcesBalancedAllocation
    args: {resources: [{name: cpu}, {name: memory}, {name: example.com/gpu}]}
""",
}

ZONES = ("a", "b", "c")
TAINTS = (
    Taint("dedicated", "NoSchedule", "a"),
    Taint("spot", "PreferNoSchedule"),
    Taint("soft", "PreferNoSchedule", "x"),
    Taint("evict", "NoExecute", "b"),
)
# As nodes report them (with a tag); pods may name "img-a", which means img-a:latest.
IMAGES = ("img-a:latest", "img-b:v1", "registry.local/img-c:2")


# ---------------------------------------------------------------------------- strategies
@dataclass(frozen=True)
class NodeKind:
    cpu: int
    memory: int
    pods: int
    gpu: int
    zone: str | None
    disk: str | None
    taints: tuple[Taint, ...]
    unschedulable: bool
    images: tuple[tuple[str, int], ...]

    def node(self, name: str) -> Node:
        labels = {"kubernetes.io/hostname": name}
        if self.zone:
            labels["zone"] = self.zone
        if self.disk:
            labels["disk"] = self.disk
        return make_node(
            name,
            cpu=self.cpu,
            memory=self.memory,
            pods=self.pods,
            extra={GPU: self.gpu} if self.gpu else None,
            labels=labels,
            taints=self.taints,
            unschedulable=self.unschedulable,
            images=[((image,), size) for image, size in self.images],
        )


node_kind_st = st.builds(
    NodeKind,
    cpu=st.sampled_from([4000, 1000, 0]),
    memory=st.sampled_from([4 * GI, 1 * GI]),
    pods=st.sampled_from([110, 3, 2, 1]),
    gpu=st.sampled_from([0, 1, 2]),
    zone=st.sampled_from([None, *ZONES]),
    disk=st.sampled_from([None, "ssd", "7"]),
    taints=st.lists(st.sampled_from(TAINTS), unique=True, max_size=2).map(tuple),
    unschedulable=st.sampled_from([False, False, True]),
    images=st.lists(
        st.tuples(st.sampled_from(IMAGES), st.sampled_from([300 * MI, 900 * MI, 10 * MI])),
        unique_by=lambda t: t[0],
        max_size=2,
    ).map(tuple),
)

# Unsignable on purpose: the batched scheduler must hand these to schedule_pod.
POD_AFFINITY = Affinity(
    pod_anti_affinity=PodAffinity(
        required=(PodAffinityTerm("zone", LabelSelector({"app": "web"})),),
    )
)
toleration_st = st.sampled_from(
    [
        Toleration("dedicated", "Equal", "a", "NoSchedule"),
        Toleration("spot", "Exists", effect="PreferNoSchedule"),
        Toleration("", "Exists"),
        Toleration("node.kubernetes.io/unschedulable", "Exists", effect="NoSchedule"),
        Toleration("evict", "Exists"),
    ]
)
_NODE_AFFINITIES = [
    required_affinity(NodeSelectorTerm((req("zone", "In", "a", "b"),))),
    required_affinity(NodeSelectorTerm((req("disk", "Gt", "5"),))),
    preferred_affinity((3, NodeSelectorTerm((req("zone", "In", "b"),)))),
    preferred_affinity(
        (2, NodeSelectorTerm((req("disk", "Exists"),))),
        (7, NodeSelectorTerm((req("zone", "NotIn", "a"),))),
    ),
]
affinity_st = st.sampled_from([None] * 4 + _NODE_AFFINITIES * 2 + [POD_AFFINITY])
SPREAD = TopologySpreadConstraint(1, "zone", "ScheduleAnyway", LabelSelector({"app": "web"}))


@dataclass(frozen=True)
class Template:
    """The spec shared by the pods of one 'workload'."""

    cpu: int
    memory: int
    gpu: int
    node_selector: tuple[tuple[str, str], ...]
    affinity: Affinity | None
    tolerations: tuple[Toleration, ...]
    port: bool
    image: str
    init: bool
    overhead: bool
    labels: tuple[tuple[str, str], ...]
    spread: bool

    def pod(self, name: str, *, nominated: str = "", priority: int | None = None) -> Pod:
        requests = {"cpu": self.cpu, "memory": self.memory}
        if self.gpu:
            requests[GPU] = self.gpu
        ports = (host_port("TCP/0.0.0.0/8080"),) if self.port else ()
        pod = make_pod(
            name,
            containers=(container(image=self.image, requests=requests, ports=ports),),
            init_containers=(container("init", image="img-a", requests={"cpu": 200}),)
            if self.init
            else (),
            overhead={"cpu": 50} if self.overhead else None,
            node_selector=dict(self.node_selector),
            affinity=self.affinity,
            tolerations=self.tolerations,
            labels=dict(self.labels),
            nominated=nominated,
            priority=priority,
        )
        if self.spread:
            pod = replace(pod, spec=replace(pod.spec, topology_spread_constraints=(SPREAD,)))
        return pod


template_st = st.builds(
    Template,
    cpu=st.sampled_from([100, 0, 500, 1200]),
    memory=st.sampled_from([256 * MI, 0, 2 * GI]),
    gpu=st.sampled_from([0, 0, 0, 1]),
    node_selector=st.sampled_from([(), (("zone", "a"),), (("disk", "ssd"),)]),
    affinity=affinity_st,
    tolerations=st.lists(toleration_st, unique=True, max_size=2).map(tuple),
    port=st.booleans(),
    image=st.sampled_from(["img-a", "", *IMAGES, "img-b"]),
    init=st.booleans(),
    overhead=st.booleans(),
    labels=st.sampled_from([(), (("app", "web"),)]),
    spread=st.sampled_from([False] * 5 + [True]),
)

_OP_STRATEGIES: dict[str, st.SearchStrategy[tuple[Any, ...]]] = {
    "schedule": st.tuples(st.just("schedule"), st.integers(0, 3)),
    "schedule_nominated": st.tuples(
        st.just("schedule_nominated"), st.integers(0, 3), st.integers(0, 400)
    ),
    "update_node": st.tuples(st.just("update_node"), st.integers(0, 400), node_kind_st),
    "add_node": st.tuples(st.just("add_node"), node_kind_st),
    "remove_node": st.tuples(st.just("remove_node"), st.integers(0, 400)),
    "usage": st.tuples(
        st.just("usage"),
        st.integers(0, 400),
        st.sampled_from([0, 600, 3900]),
        st.sampled_from([0, 1, 2, 109]),
        st.booleans(),
    ),
    "remove_pod": st.tuples(st.just("remove_pod"), st.integers(0, 100)),
    "affinity_pod": st.tuples(st.just("affinity_pod"), st.integers(0, 400)),
    "nominate": st.tuples(st.just("nominate"), st.integers(0, 3), st.integers(0, 400)),
    "clear_nominated": st.just(("clear_nominated",)),
}
# Mostly scheduling; the first kind is what hypothesis shrinks towards.
_OP_MIX = ["schedule"] * 10 + ["usage"] * 2 + ["clear_nominated"] * 2 + sorted(_OP_STRATEGIES)
op_st = st.sampled_from(_OP_MIX).flatmap(_OP_STRATEGIES.__getitem__)


@st.composite
def variants_st(draw: st.DrawFn) -> list[Template]:
    """A template and variants that differ from it in one field each: the signature must
    tell them apart (or prove the field does not matter)."""
    base = draw(template_st)
    other = draw(template_st)
    names = draw(st.lists(st.sampled_from(sorted(Template.__dataclass_fields__)), max_size=3))
    return [base, *(replace(base, **{name: getattr(other, name)}) for name in names)]


@st.composite
def world_st(draw: st.DrawFn) -> World:
    count = draw(st.one_of(st.integers(1, 12), st.integers(100, 260)))
    # One roomy, untainted kind (so that many pods fit somewhere) and a few random ones.
    roomy = draw(node_kind_st.map(lambda k: replace(k, cpu=4000, pods=110, taints=())))
    kinds = [replace(roomy, unschedulable=False), *draw(st.lists(node_kind_st, max_size=4))]
    assignment = draw(st.lists(st.integers(0, len(kinds) - 1), min_size=count, max_size=count))
    return World(
        config=draw(st.sampled_from(sorted(CONFIGS))),
        percentage=draw(st.sampled_from([None, 5, 20, 60])),
        usage_from_ledger=draw(st.booleans()),
        nodes=[kinds[k] for k in assignment],
        templates=draw(st.one_of(st.lists(template_st, min_size=1, max_size=4), variants_st())),
        seed=draw(st.integers(0, 2**16)),
    )


# ---------------------------------------------------------------------------- the driver
@dataclass
class World:
    config: str
    percentage: int | None
    usage_from_ledger: bool
    nodes: list[NodeKind]
    templates: list[Template]
    seed: int


@dataclass
class Side:
    """One of the two identical copies."""

    fw: Framework
    snapshot: Snapshot
    nominator: PodNominator
    decide: Callable[[CycleState, Pod, Snapshot], Any]
    placed: list[tuple[str, PodInfo, str]] = field(default_factory=list)  # key, info, node


def _side(world: World, batched: type[BatchScheduler] | None) -> Side:
    text = CONFIGS[world.config]
    config = parse_config(text, "<test>") if text else default_config()
    nominator = PodNominator()
    handle = Handle(listers=Listers(nominator=nominator))
    fw = build_profiles(config, handle=handle, rng=random.Random(world.seed))["default-scheduler"]
    fw.percentage_of_nodes_to_score = world.percentage
    snapshot = Snapshot(capacity=4, usage_from_ledger=world.usage_from_ledger)
    for i, kind in enumerate(world.nodes):
        snapshot.add_node(kind.node(f"n{i}"))
    if batched is None:

        def decide(state: CycleState, pod: Pod, snap: Snapshot) -> Any:
            return schedule_pod(fw, state, pod, snap)

    else:
        scheduler = batched(fw)
        use_batch_scheduler(fw, scheduler)
        decide = scheduler.schedule
    return Side(fw, snapshot, nominator, decide)


def _node_name(snapshot: Snapshot, i: int) -> str | None:
    nodes = snapshot.node_indices()
    if not nodes.size:
        return None
    return snapshot.node_name(int(nodes[i % nodes.size]))


def _outcome(side: Side, pod: Pod) -> tuple[Any, CycleState]:
    state = CycleState()
    try:
        result = side.decide(state, pod, side.snapshot)
    except SchedulingError as exc:
        return (type(exc).__name__, str(exc)), state
    info = PodInfo.of(pod)
    side.snapshot.add_pod(pod, result.suggested_host, info=info)
    if side.snapshot.usage_from_ledger:
        side.snapshot.add_usage(result.node_index, info)
    side.placed.append((pod.key, info, result.suggested_host))
    return result, state


def _state_view(state: CycleState) -> tuple[Any, ...]:
    return (
        sorted(state._data),
        state.to_wire(),
        state.skip_filter_plugins,
        state.skip_score_plugins,
    )


def _apply(side: Side, op: tuple[Any, ...], world: World, step: int) -> None:
    """Every operation but scheduling, on one side."""
    snapshot = side.snapshot
    kind = op[0]
    if kind == "update_node":
        name = _node_name(snapshot, op[1])
        if name is not None:
            snapshot.update_node(op[2].node(name))
    elif kind == "add_node":
        snapshot.add_node(op[1].node(f"new{step}"))
    elif kind == "remove_node":
        name = _node_name(snapshot, op[1])
        if name is not None:
            snapshot.remove_node(name)
    elif kind == "usage":
        name = _node_name(snapshot, op[1])
        if name is not None and snapshot.usage_from_ledger:
            ports = [("0.0.0.0", "TCP", 8080)] if op[4] else []
            requested = {"cpu": op[2], "memory": op[2] * MI, "pods": op[3]}
            snapshot.set_usage(snapshot.index_of(name), requested, ports)
    elif kind == "remove_pod":
        if side.placed:
            key, info, node = side.placed.pop(op[1] % len(side.placed))
            index = snapshot.get_index(node)
            # The worker's _unassume: forget the pod, refund what add_usage charged.
            removed = snapshot.remove_pod(key)
            if removed is not None and snapshot.usage_from_ledger and index is not None:
                snapshot.add_usage(index, info, -1)
    elif kind == "affinity_pod":
        name = _node_name(snapshot, op[1])
        if name is not None:
            pod = make_pod(f"aff{step}", affinity=POD_AFFINITY, labels={"app": "web"})
            info = snapshot.add_pod(pod, name)
            side.placed.append((pod.key, info, name))
    elif kind == "nominate":
        name = _node_name(snapshot, op[2])
        if name is not None:
            template = world.templates[op[1] % len(world.templates)]
            side.nominator.add(template.pod(f"nom{step}", nominated=name, priority=1000))
    elif kind == "clear_nominated":
        for node in side.nominator.node_names():
            for info in side.nominator.pods_for_node(node):
                side.nominator.delete(info.key)


def check(world: World, ops: list[tuple[Any, ...]], batched: type[BatchScheduler]) -> Side:
    """Run ``ops`` on both sides; AssertionError at the first difference."""
    ref = _side(world, None)
    bat = _side(world, batched)
    for step, op in enumerate(ops):
        kind = op[0]
        if kind in ("schedule", "schedule_nominated"):
            template = world.templates[op[1] % len(world.templates)]
            nominated = ""
            if kind == "schedule_nominated":
                nominated = _node_name(ref.snapshot, op[2]) or "gone"
            pod = template.pod(f"p{step}", nominated=nominated)
            want, want_state = _outcome(ref, pod)
            got, got_state = _outcome(bat, pod)
            where = f"step {step} ({op}): "
            assert got == want, where + f"batched {got} != schedule_pod {want}"
            assert bat.fw.next_start_node_index == ref.fw.next_start_node_index, where
            assert bat.fw.rng.getstate() == ref.fw.rng.getstate(), where + "rng state"
            assert _state_view(got_state) == _state_view(want_state), where + "CycleState"
        else:
            _apply(ref, op, world, step)
            _apply(bat, op, world, step)
    return bat


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(world=world_st(), ops=st.lists(op_st, min_size=5, max_size=60))
def test_batched_scheduling_is_exact(world: World, ops: list[tuple[Any, ...]]) -> None:
    check(world, ops, BatchScheduler)


# ---------------------------------------------------------------------------- it can fail
def _fresh_forever(self: _Entry, snapshot: Snapshot, where: slice | np.ndarray) -> np.ndarray:
    return self.gen[where] >= 0  # computed once: never invalidated


def test_broken_invalidation_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check fails when the cache misses node changes (here: the assume step of the
    previous pod, which fills its node)."""
    kind = NodeKind(4000, 4 * GI, 1, 0, "a", None, (), False, ())
    template = Template(100, 0, 0, (), None, (), False, "", False, False, (), False)
    world = World("default", None, True, [kind] * 3, [template], seed=1)
    ops = [("schedule", 0), ("schedule", 0)]
    check(world, ops, BatchScheduler)  # sound as it is
    monkeypatch.setattr(_Entry, "fresh", _fresh_forever)
    with pytest.raises(AssertionError, match="batched"):
        check(world, ops, BatchScheduler)


# ---------------------------------------------------------------------------- plain cases
def _basic_world(count: int, templates: list[Template]) -> World:
    kind = NodeKind(
        32000, 64 * GI, 110, 0, "a", None, (Taint("spot", "PreferNoSchedule"),), False, ()
    )
    plain = NodeKind(32000, 64 * GI, 110, 0, "b", None, (), False, (("img-a:latest", 300 * MI),))
    return World("default", None, True, [kind, plain] * (count // 2), templates, seed=7)


def test_equal_pods_are_batched_and_identical() -> None:
    template = Template(100, 500 * MI, 0, (), None, (), False, "img-a", False, False, (), False)
    world = _basic_world(400, [template])
    side = check(world, [("schedule", 0)] * 300, BatchScheduler)
    scheduler = batch_scheduler(side.fw)
    assert scheduler.batched == 300
    assert scheduler.full == 0


def test_unsignable_pods_take_schedule_pod() -> None:
    web = Template(100, 0, 0, (), None, (), False, "", False, False, (("app", "web"),), True)
    plain = replace(web, spread=False)
    world = _basic_world(200, [web, plain])
    ops: list[tuple[Any, ...]] = [("schedule", 0), ("schedule", 1), ("affinity_pod", 3)]
    ops += [("schedule", 1), ("remove_pod", 2), ("schedule", 1), ("schedule", 1)]
    side = check(world, ops, BatchScheduler)
    scheduler = batch_scheduler(side.fw)
    # spread constraints, then a placed pod with anti-affinity: schedule_pod; after its
    # removal the plain pods batch again.
    assert (scheduler.full, scheduler.batched) == (2, 3)


def test_nominated_pods_take_schedule_pod() -> None:
    template = Template(100, 0, 0, (), None, (), False, "", False, False, (), False)
    world = _basic_world(200, [template])
    ops: list[tuple[Any, ...]] = [("schedule", 0), ("schedule_nominated", 0, 5)]
    ops += [("nominate", 0, 7), ("schedule", 0), ("clear_nominated",), ("schedule", 0)]
    side = check(world, ops, BatchScheduler)
    scheduler = batch_scheduler(side.fw)
    assert (scheduler.full, scheduler.batched) == (2, 2)


def test_image_spread_is_part_of_the_signature() -> None:
    """ImageLocality scales a node's score by the share of nodes holding the image: nodes
    that gain the image change every other node's score (the fragment carries it)."""
    small = NodeKind(4000, 4 * GI, 110, 0, "a", None, (), False, ())
    big = replace(small, cpu=1000, memory=1 * GI, images=(("img-a:latest", 900 * MI),))
    some = replace(small, images=(("img-a:latest", 300 * MI),))
    tiny = replace(small, images=(("img-a:latest", 10 * MI),))
    template = Template(100, 256 * MI, 0, (), None, (), False, "img-a", False, False, (), False)
    world = World("images", None, True, [big, some, *[small] * 63], [template], seed=3)
    # n0 (busy, the big image) loses while few nodes have the image; once 60 more nodes
    # get it, n0's image score outweighs its load although n0 itself did not change.
    ops: list[tuple[Any, ...]] = [("usage", 0, 600, 1, False), ("schedule", 0)]
    ops += [("add_node", tiny)] * 60 + [("schedule", 0)]
    side = check(world, ops, BatchScheduler)
    assert side.placed[0][2] != "n0"
    assert side.placed[1][2] == "n0"


def test_node_count_is_part_of_the_image_signature() -> None:
    """Nodes without the image joining dilute its spread: n0's score drops untouched."""
    small = NodeKind(4000, 4 * GI, 110, 0, "a", None, (), False, ())
    busy = replace(small, cpu=1000, memory=1 * GI, images=(("img-a:latest", 900 * MI),))
    idle = replace(busy, cpu=4000, memory=4 * GI)
    template = Template(100, 256 * MI, 0, (), None, (), False, "img-a", False, False, (), False)
    world = World("images", None, True, [busy, idle, small, small, *[small] * 60], [template], 3)
    # Room for 64 slots, 4 nodes: half have the image, n1 wins and n0 is a close second.
    ops: list[tuple[Any, ...]] = [("remove_node", 4)] * 60 + [("schedule", 0)]
    ops += [("add_node", small)] * 60 + [("schedule", 0)]
    side = check(world, ops, BatchScheduler)
    assert side.placed[0][2] == "n1"
    assert side.placed[1][2] not in ("n0", "n1")


def test_placed_anti_affinity_pods_stop_signing() -> None:
    """A placed pod with required anti-affinity makes the pods it matches avoid its zone:
    nodes other than its own change verdict, so such pods are not signed."""
    roomy = NodeKind(32000, 64 * GI, 110, 0, "a", None, (), False, ())
    other = replace(roomy, cpu=8000, zone="b")
    web = Template(100, 0, 0, (), None, (), False, "", False, False, (("app", "web"),), False)
    world = World("default", None, True, [roomy] * 5 + [other] * 5, [web], seed=5)
    ops: list[tuple[Any, ...]] = [("schedule", 0), ("schedule", 0), ("affinity_pod", 0)]
    ops += [("schedule", 0)] * 4
    side = check(world, ops, BatchScheduler)
    assert all(host.startswith("n") and int(host[1:]) >= 5 for _, _, host in side.placed[3:])


# ---------------------------------------------------------------------------- signatures
def _default_fw() -> Framework:
    return build_profiles(default_config(), rng=random.Random(0))["default-scheduler"]


BASE = Template(100, 256 * MI, 0, (), None, (), False, "img-a", False, False, (), False)


@pytest.mark.parametrize(
    "variant",
    [
        replace(BASE, cpu=200),
        replace(BASE, memory=0),  # the non-zero memory scoring uses stays, requests differ
        replace(BASE, gpu=1),
        replace(BASE, overhead=True),
        replace(BASE, init=True),
        replace(BASE, node_selector=(("zone", "a"),)),
        replace(BASE, affinity=_NODE_AFFINITIES[0]),
        replace(BASE, affinity=_NODE_AFFINITIES[2]),
        replace(BASE, tolerations=(Toleration("spot", "Exists", effect="PreferNoSchedule"),)),
        replace(BASE, port=True),
        replace(BASE, image="img-b:v1"),
    ],
    ids=lambda t: str(t)[:60],
)
def test_every_field_a_plugin_reads_is_signed(variant: Template) -> None:
    fw = _default_fw()
    snapshot = Snapshot(capacity=4)
    snapshot.add_node(NodeKind(4000, GI, 110, 0, "a", None, (), False, ()).node("n0"))
    snapshot.add_node(
        NodeKind(4000, GI, 110, 0, "b", None, (), False, (("img-b:v1", 300 * MI),)).node("n1")
    )

    def sign(template: Template, name: str) -> Any:
        pod = template.pod(name)
        return fw.sign_pod(pod, PodInfo.of(pod), snapshot)

    assert sign(BASE, "a") == sign(BASE, "b") is not None
    assert sign(variant, "c") is not None
    assert sign(variant, "c") != sign(BASE, "a")


def test_pods_whose_nodes_depend_on_other_nodes_are_not_signed() -> None:
    fw = _default_fw()
    snapshot = Snapshot(capacity=4)
    snapshot.add_node(NodeKind(4000, GI, 110, 0, "a", None, (), False, ()).node("n0"))

    def sign(pod: Pod) -> Any:
        return fw.sign_pod(pod, PodInfo.of(pod), snapshot)

    assert sign(BASE.pod("plain")) is not None
    assert sign(replace(BASE, spread=True).pod("spread")) is None
    assert sign(replace(BASE, affinity=POD_AFFINITY).pod("anti")) is None
    snapshot.add_pod(make_pod("placed", affinity=POD_AFFINITY), "n0")
    assert sign(BASE.pod("plain")) is None  # its zone's verdict may depend on "placed"


@pytest.mark.parametrize("wrapped", [False, True])
def test_one_pod_drop_finds_a_recent_pick_in_a_run_and_elsewhere(wrapped: bool) -> None:
    """The drop is read off a pick the sample holds again, whether the sample is one run
    of slots (found by arithmetic) or not (searched); picks outside it wait, stale ones go."""
    snapshot = Snapshot(capacity=64)
    entry = _Entry(snapshot)
    generation = np.zeros(64, dtype=np.int64)
    entry.picked(12, 100, 0)  # only its own placement touched it since: generation 1
    entry.picked(40, 100, 0)  # not in the sample: kept for later
    entry.picked(13, 100, 0)  # changed by something else since (generation 5): dropped
    generation[[12, 40, 13]] = [1, 1, 5]
    feasible = np.array([60, 61, 10, 11, 12, 13]) if wrapped else np.arange(10, 20)
    scores = np.full(feasible.size, 97, dtype=np.int64)
    view = type("View", (), {"generation": generation})()
    assert entry.one_pod_drop(view, feasible, scores) == 3  # type: ignore[arg-type]
    assert set(entry.picks) == {40}
