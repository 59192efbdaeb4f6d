"""Lazily held bound pods decide exactly as parsed ones.

A worker holds the pods other workers bind unparsed (``Snapshot.defer_pod``) and parses
them when a decision reads pod lists. Two in-process clusters on the same Redis (two
deployments, two hash tags) get the same operations: in one every worker parses each
bound pod when its event arrives (``lazy_pods=False``, what workers did before), in the
other the workers defer them. Workers draw from the same seeds, so every placement,
nomination, preemption, queue move and diagnosis must be the same in both.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distsched.clock import FakeClock
from distsched.framework.snapshot import DeferredPod, PodPlacement, Snapshot
from distsched.keys import Keys
from distsched.workers.local_cache import ClusterView
from tests.support import objects
from tests.support.objects import HOSTNAME, ZONE
from tests.workers.harness import InProcessCluster

Obj = dict[str, Any]
COLORS = ("red", "blue")


def node(i: int) -> Obj:
    return objects.node(f"n{i}", cpu="2", memory="4Gi", pods="8", labels={ZONE: f"z{i % 3}"})


def pod(
    name: str,
    *,
    cpu: int = 100,
    color: str = "red",
    priority: int | None = None,
    spec: Obj | None = None,
) -> Obj:
    # cpu 0: a container without requests (scoring counts it 100m / 200Mi).
    requests = {"cpu": f"{cpu}m", "memory": "64Mi"} if cpu else {"cpu": None, "memory": None}
    extra = {**(spec or {}), **({"priority": priority} if priority is not None else {})}
    return objects.pod(name, labels={"color": color}, image="pause", **requests, **extra)


def term(color: str, key: str) -> Obj:
    return {"labelSelector": {"matchLabels": {"color": color}}, "topologyKey": key}


def pod_affinity(kind: str, color: str, key: str, required: bool) -> Obj:
    if required:
        group: Obj = {"requiredDuringSchedulingIgnoredDuringExecution": [term(color, key)]}
    else:
        weighted = {"weight": 50, "podAffinityTerm": term(color, key)}
        group = {"preferredDuringSchedulingIgnoredDuringExecution": [weighted]}
    return {"affinity": {kind: group}}


def spread(color: str, max_skew: int, hard: bool) -> Obj:
    constraint = {
        "maxSkew": max_skew,
        "topologyKey": ZONE,
        "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway",
        "labelSelector": {"matchLabels": {"color": color}},
    }
    return {"topologySpreadConstraints": [constraint]}


class Twins:
    """The same operations on an eager and a lazy cluster; ``state()`` of both must match.
    ``leave``: the lazy cluster's workers leave each other's plain pods out of their views
    (WorkerConfig.leave_others_pods) instead of holding them unparsed."""

    def __init__(
        self, r: redis.Redis, clock: FakeClock, *, nodes: int = 6, leave: bool = False
    ) -> None:
        self.clock = clock
        self.leave = leave
        self.clusters = [
            InProcessCluster(
                r,
                Keys(f"twin-{mode}"),
                clock,
                lazy_pods=lazy,
                leave_others_pods=leave,
                seed=7,
                batch=16,
            )
            for mode, lazy in (("eager", False), ("lazy", True))
        ]
        for cluster in self.clusters:
            cluster.add_worker()  # a second worker: each binds pods the other holds lazily
            cluster.create(*(node(i) for i in range(nodes)))
            for worker in cluster.workers:
                worker.run_once()
        self.names = 0

    @property
    def lazy(self) -> InProcessCluster:
        return self.clusters[1]

    def create(self, *objs: Obj) -> None:
        for cluster in self.clusters:
            cluster.create(*objs)

    def new(self, **kwargs: Any) -> None:
        self.names += 1
        self.create(pod(f"p{self.names:03d}", **kwargs))

    def delete(self, choice: int) -> None:
        objs, _ = self.clusters[0].store.list("Pod")
        if objs:
            name = objs[choice % len(objs)]["metadata"]["name"]
            for cluster in self.clusters:
                cluster.store.delete("Pod", f"default/{name}")

    def turn(self, worker: int) -> None:
        for cluster in self.clusters:
            cluster.workers[worker].run_once()
            cluster.bind()

    def tick(self) -> None:
        self.clock.step(11_000)  # past any backoff
        for cluster in self.clusters:
            cluster.flush()

    def state(self, cluster: InProcessCluster) -> dict[str, Any]:
        objs, _ = cluster.store.list("Pod")
        pods = {
            o["metadata"]["name"]: (
                (o.get("spec") or {}).get("nodeName", ""),
                (o.get("status") or {}).get("nominatedNodeName", ""),
                cluster.where(o["metadata"]["name"]),
            )
            for o in objs
        }
        explain = {
            k.decode(): json.loads(v) for k, v in cluster.r.hgetall(cluster.keys.explain).items()
        }
        return {"pods": pods, "explain": explain}

    def check(self) -> None:
        eager, lazy = (self.state(c) for c in self.clusters)
        assert lazy == eager

    def deferred(self) -> int:
        return sum(_deferred_count(w.snapshot) for w in self.lazy.workers)

    def others_held_lazily(self) -> None:
        """Each lazy worker holds the other's plain bound pods unparsed, or, leaving them
        out, not at all (their nodes' usage still counts them: the ledger's)."""
        if not self.leave:
            assert self.deferred() > 0
            return
        assert self.deferred() == 0
        for worker in self.lazy.workers:
            assert not worker.view.holds_every_pod
            placed = {key for i in worker.snapshot.node_indices() for key in
                      worker.snapshot.pods_on(int(i))}  # fmt: skip
            bound = {o["metadata"]["name"] for o in self.lazy.store.list("Pod")[0]
                     if (o.get("spec") or {}).get("nodeName")}  # fmt: skip
            assert len(placed) < len(bound)


def _deferred_count(snapshot: Snapshot) -> int:
    return sum(
        1
        for index in snapshot.node_indices()
        for entry in snapshot.placement._pods[index].values()
        if type(entry) is DeferredPod
    )


@pytest.fixture
def twins(r: redis.Redis, clock: FakeClock) -> Twins:
    return Twins(r, clock)


@pytest.fixture
def leaving_twins(r: redis.Redis, clock: FakeClock) -> Twins:
    return Twins(r, clock, leave=True)


@contextlib.contextmanager
def never_materialized() -> Iterator[None]:
    """Break the lazy view: a read that should parse deferred pods finds them gone."""
    real = PodPlacement._materialize

    def drop(self: PodPlacement, index: int) -> None:
        self._deferred_slots.discard(index)
        pods = self._pods[index]
        for key in [k for k, v in pods.items() if type(v) is DeferredPod]:
            del pods[key]
            del self._pod_node[key]

    PodPlacement._materialize = drop  # type: ignore[method-assign]
    try:
        yield
    finally:
        PodPlacement._materialize = real  # type: ignore[method-assign]


def fill(twins: Twins, count: int, **kwargs: Any) -> None:
    """``count`` plain pods, half bound by each worker."""
    for i in range(count):
        twins.new(**kwargs)
        twins.turn(i % 2)


# ------------------------------------------------------------------ scenarios
def anti_affinity_after_lazy_pods(twins: Twins) -> None:
    fill(twins, 3, cpu=1500, color="blue")  # three full nodes without red pods
    fill(twins, 6, color="red")  # the red ones go to the emptier nodes
    twins.others_held_lazily()
    for required in (False, False, True, True):
        spec = pod_affinity("podAntiAffinity", "red", HOSTNAME, required)
        twins.new(color="blue", spec=spec)
        twins.turn(0)


def affinity_after_lazy_pods(twins: Twins) -> None:
    fill(twins, 2, cpu=700, color="red")
    fill(twins, 6, color="blue")
    twins.others_held_lazily()
    for required in (False, False, True):
        twins.new(color="blue", spec=pod_affinity("podAffinity", "red", ZONE, required))
        twins.turn(1)


def spread_after_lazy_pods(twins: Twins) -> None:
    fill(twins, 2, cpu=1500, color="red")
    fill(twins, 6, color="blue")
    twins.others_held_lazily()
    for hard in (False, False, True, True):
        twins.new(color="blue", spec=spread("blue", 1, hard))
        twins.turn(1)


def preemption_of_lazy_pods(twins: Twins) -> None:
    fill(twins, 12, cpu=700)  # two per node: full
    twins.others_held_lazily()
    twins.new(cpu=1900, priority=1000)
    twins.turn(0)
    twins.tick()
    twins.turn(0)
    twins.turn(1)


def scoring_of_pods_without_requests(twins: Twins) -> None:
    fill(twins, 12, cpu=0)
    for i in range(4):
        twins.new(cpu=300)
        twins.turn(i % 2)


SCENARIOS = [
    anti_affinity_after_lazy_pods,
    affinity_after_lazy_pods,
    spread_after_lazy_pods,
    preemption_of_lazy_pods,
]


@pytest.mark.parametrize("scenario", [*SCENARIOS, scoring_of_pods_without_requests])
def test_lazy_workers_decide_as_eager_ones(twins: Twins, scenario: Any) -> None:
    scenario(twins)
    twins.check()


@pytest.mark.parametrize("scenario", [*SCENARIOS, scoring_of_pods_without_requests])
def test_workers_leaving_others_pods_out_decide_as_eager_ones(
    leaving_twins: Twins, scenario: Any
) -> None:
    scenario(leaving_twins)
    leaving_twins.check()
    # Pods that read other pods (or preempt) made their worker follow every pod.
    plain = scenario is scoring_of_pods_without_requests
    holding = [w.view.holds_every_pod for w in leaving_twins.lazy.workers]
    assert not any(holding) if plain else any(holding)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_scenarios_fail_when_workers_keep_leaving_others_pods_out(
    leaving_twins: Twins, scenario: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ClusterView, "hold_every_pod", lambda self, why: None)
    scenario(leaving_twins)
    with pytest.raises(AssertionError):
        leaving_twins.check()


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_scenarios_fail_when_deferred_pods_are_never_parsed(
    twins: Twins, scenario: Any
) -> None:
    with never_materialized():
        scenario(twins)
        with pytest.raises(AssertionError):
            twins.check()


def test_deleting_lazily_held_pods_frees_their_nodes_for_anti_affinity(twins: Twins) -> None:
    fill(twins, 6, color="red")
    twins.turn(0)
    twins.turn(1)  # both informers have every binding now
    # Each worker holds the other's three unparsed; its own three stay as it assumed them.
    assert twins.deferred() == 6
    twins.delete(0)
    twins.delete(3)
    for _ in range(5):
        twins.new(color="blue", spec=pod_affinity("podAntiAffinity", "red", HOSTNAME, True))
        twins.turn(1)
    twins.check()
    pods = twins.state(twins.lazy)["pods"]
    red = {pods[f"p{i:03d}"][0] for i in range(1, 7) if f"p{i:03d}" in pods}
    blue = [pods[f"p{i:03d}"][0] for i in range(7, 12)]
    assert len(red) == 4 and all(node and node not in red for node in blue)


def test_a_binding_confirms_the_worker_own_assumed_pods_as_they_are(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    # kube's cache confirms an assumed pod on its binding: the worker keeps the pod it
    # parsed, and its nodes keep their generation (cached filter and score answers hold).
    # Another worker holds the same pods unparsed.
    cluster = InProcessCluster(r, keys, clock, leave_others_pods=False)
    other = cluster.add_worker()
    cluster.create(node(0), node(1))
    cluster.store.create_many([pod(f"p{i}") for i in range(4)])
    cluster.handle_events()
    cluster.schedule(cluster.pop())
    snapshot = cluster.worker.snapshot
    keys_ = [f"default/p{i}" for i in range(4)]
    assumed = {key: snapshot.pod_info(key) for key in keys_}
    generations = snapshot.table.generation.copy()
    cluster.bind()
    cluster.handle_events()
    while other.informer.poll_once(0):
        pass
    assert all(cluster.node_of(f"p{i}") for i in range(4))
    assert all(info is not None and snapshot.pod_info(key) is info for key, info in assumed.items())
    assert (snapshot.table.generation == generations).all()
    assert _deferred_count(snapshot) == 0 and _deferred_count(other.snapshot) == 4


@pytest.mark.parametrize("follow", ["events", "relist"])
def test_an_assumed_pod_changed_before_its_binding_is_placed_again_as_it_is_now(
    r: redis.Redis, keys: Keys, clock: FakeClock, follow: str
) -> None:
    # Its binding is not only a binding then: the update's event comes first, or a relist
    # hands over the pod as it is now, more than its binding changed.
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(node(0), pod("p0"))
    cluster.handle_events()
    cluster.schedule(cluster.pop())
    obj = cluster.pod("p0")
    obj["metadata"]["labels"]["color"] = "blue"
    cluster.store.update(obj)  # after the decision, before the binding
    cluster.bind()
    if follow == "events":
        cluster.handle_events()
    else:
        cluster.worker.informer.relist()
    assert cluster.node_of("p0") == "n0"
    info = cluster.worker.snapshot.pod_info("default/p0")
    assert info is not None and info.labels["color"] == "blue"
    assert info.pod.spec.node_name == "n0"


# ------------------------------------------------------------------ property
_colors = st.sampled_from(COLORS)
_op = st.one_of(
    st.tuples(st.just("plain"), st.integers(1, 6), st.sampled_from([0, 100, 300, 700]), _colors),
    st.tuples(
        st.just("pod-affinity"),
        st.sampled_from(["podAffinity", "podAntiAffinity"]),
        _colors,
        st.sampled_from([HOSTNAME, ZONE]),
        st.booleans(),
    ),
    st.tuples(st.just("spread"), _colors, st.integers(1, 2), st.booleans()),
    st.tuples(st.just("urgent"), st.sampled_from([900, 1900]), st.sampled_from([10, 1000])),
    st.tuples(st.just("delete"), st.integers(0, 1000)),
    st.tuples(st.just("tick")),
)
_steps = st.lists(st.tuples(_op, st.integers(0, 1)), min_size=4, max_size=14)


def apply(twins: Twins, op: tuple[Any, ...]) -> None:
    kind = op[0]
    if kind == "plain":
        _, count, cpu, color = op
        for _ in range(count):
            twins.new(cpu=cpu, color=color)
    elif kind == "pod-affinity":
        _, group, color, key, required = op
        other = COLORS[1 - COLORS.index(color)]
        twins.new(color=other, spec=pod_affinity(group, color, key, required))
    elif kind == "spread":
        _, color, skew, hard = op
        twins.new(color=color, spec=spread(color, skew, hard))
    elif kind == "urgent":
        _, cpu, priority = op
        twins.new(cpu=cpu, priority=priority)
    elif kind == "delete":
        twins.delete(op[1])
    else:
        twins.tick()


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(steps=_steps, leave=st.booleans())
def test_random_sequences_decide_the_same_lazily(
    r: redis.Redis, clock: FakeClock, steps: list[tuple[tuple[Any, ...], int]], leave: bool
) -> None:
    r.flushdb()
    twins = Twins(r, clock, leave=leave)
    for op, worker in steps:
        apply(twins, op)
        twins.turn(worker)
        twins.check()
    twins.turn(0)
    twins.turn(1)
    twins.check()


def test_nonzero_requests_come_from_the_ledger_as_the_pods_add_up(twins: Twins) -> None:
    scoring_of_pods_without_requests(twins)
    twins.turn(0)
    twins.turn(1)
    for worker in twins.lazy.workers:
        snapshot = worker.snapshot
        assert snapshot.has_deferred
        worker.view.refresh_from_ledger()
        for index in snapshot.node_indices():
            pods = snapshot.pods_on(int(index)).values()
            want = [sum(p.nonzero_cpu for p in pods), sum(p.nonzero_memory for p in pods)]
            assert snapshot.nonzero_requested[index].tolist() == want
    assert all(w.view.lazy_pods for w in twins.lazy.workers)
    assert not any(w.view.lazy_pods for w in twins.clusters[0].workers)
