"""The invariant checker finds each kind of violation on a hand-built store state, and
nothing on a valid one.

Valid states are built the way the system builds them: objects through the Store, bound
pods recorded in the ledger, pending pods queued. Each test then breaks one invariant.
"""

from __future__ import annotations

import re
from typing import Any

import msgpack
import pytest
import redis

from distsched.bench.checker import Violations, check, check_gangs, ledger_records, read_cluster
from distsched.bench.workloads import pod
from distsched.cache.ledger import Ledger
from distsched.clock import FakeClock
from distsched.keys import Keys
from distsched.model import Node, Pod, pod_host_ports, pod_requests
from distsched.queue_redis import RedisQueue
from distsched.queue_types import PodEntry
from distsched.store import Store
from tests.support import objects
from tests.support.objects import HOSTNAME, ZONE

Obj = dict[str, Any]


def node(name: str, zone: str = "a", *, cpu: str = "4", taints: list[Obj] | None = None) -> Obj:
    return objects.node(
        name, cpu=cpu, memory="32Gi", pods="110", labels={ZONE: zone}, taints=taints or []
    )


def with_spec(obj: Obj, **spec: Any) -> Obj:
    return {**obj, "spec": {**obj["spec"], **spec}}


def labelled(obj: Obj, **labels: str) -> Obj:
    return {**obj, "metadata": {**obj["metadata"], "labels": labels}}


class World:
    """A store, ledger and queue in a consistent state."""

    def __init__(self, r: redis.Redis, keys: Keys, clock: FakeClock) -> None:
        self.r, self.keys = r, keys
        self.store = Store(r, keys, clock)
        self.ledger = Ledger(r, keys, clock)
        self.queue = RedisQueue(r, keys)
        self.clock = clock

    def nodes(self, *objs: Obj) -> None:
        for created in self.store.create_many(list(objs)):
            self.ledger.set_node_from(Node.from_dict(created))

    def bound(self, obj: Obj, node_name: str) -> Pod:
        created = self.store.create(obj)
        parsed = Pod.from_dict(created)
        self.store.bind(parsed.key, parsed.metadata.uid, node_name)
        self.ledger.add_bound_pod(
            parsed.key,
            parsed.metadata.uid,
            node_name,
            pod_requests(parsed),
            pod_host_ports(parsed),
            anti_affinity_keys=self._anti_affinity_keys(parsed),
        )
        return parsed

    def pending(self, obj: Obj) -> Pod:
        parsed = Pod.from_dict(self.store.create(obj))
        entry = PodEntry(parsed.key, parsed.metadata.uid, 0)
        self.queue.add([entry], now_ms=self.clock.now_ms())
        return parsed

    @staticmethod
    def _anti_affinity_keys(parsed: Pod) -> list[str]:
        affinity = parsed.spec.affinity
        if affinity is None or affinity.pod_anti_affinity is None:
            return []
        return sorted({t.topology_key for t in affinity.pod_anti_affinity.required})

    def violations(self, expect_bound: set[str] | None = None) -> list[str]:
        return check(self.r, self.keys, expect_bound=expect_bound)

    def kinds(self, expect_bound: set[str] | None = None) -> set[str]:
        return {v.split(":", 1)[0] for v in self.violations(expect_bound)}


@pytest.fixture
def world(r: redis.Redis, keys: Keys, clock: FakeClock) -> World:
    w = World(r, keys, clock)
    w.nodes(node("n1", "a"), node("n2", "a"), node("n3", "b"))
    return w


def anti_affinity(name: str, topology_key: str = HOSTNAME) -> Obj:
    term = {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": topology_key}
    spec = {
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    }
    return labelled(with_spec(pod(name, "ns"), **spec), app="x")


def affinity(name: str, target: str) -> Obj:
    term = {"labelSelector": {"matchLabels": {"app": target}}, "topologyKey": ZONE}
    spec = {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}
    return labelled(with_spec(pod(name, "ns"), **spec), app="web")


def spread(name: str) -> Obj:
    constraint = {
        "maxSkew": 1,
        "topologyKey": ZONE,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "s"}},
    }
    return labelled(with_spec(pod(name, "ns"), topologySpreadConstraints=[constraint]), app="s")


def host_port(name: str, port: int, ip: str = "") -> Obj:
    container = {"name": "c", "ports": [{"containerPort": port, "hostPort": port, "hostIP": ip}]}
    return with_spec(pod(name, "ns"), containers=[container])


def test_valid_state_has_no_violation(world: World) -> None:
    world.bound(anti_affinity("aa-1"), "n1")
    world.bound(anti_affinity("aa-2"), "n2")
    world.bound(labelled(pod("db", "ns"), app="db"), "n3")
    world.bound(affinity("follower", "db"), "n3")
    world.bound(affinity("self", "web"), "n1")  # the first pod of its own group
    world.bound(spread("s-1"), "n1")
    world.bound(spread("s-2"), "n3")
    world.bound(host_port("p-1", 8080, "10.0.0.1"), "n1")
    world.bound(host_port("p-2", 8080, "10.0.0.2"), "n1")
    world.bound(host_port("p-3", 8080, "10.0.0.1"), "n2")
    tolerant = {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}
    world.nodes(node("tainted", "b", taints=[{"key": "gpu", "effect": "NoSchedule"}]))
    world.bound(with_spec(pod("tolerant", "ns"), tolerations=[tolerant]), "tainted")
    world.pending(pod("waiting", "ns"))
    assert world.violations(expect_bound={"ns/aa-1", "ns/db"}) == []


def test_overcommit(world: World) -> None:
    world.nodes(node("small", cpu="1"))
    world.bound(pod("a", "ns", cpu="600m"), "small")
    assert world.kinds() == set()
    world.bound(pod("b", "ns", cpu="600m"), "small")
    assert [v for v in world.violations() if v.startswith("overcommit")] == [
        "overcommit: node small: cpu requested 1200 > allocatable 1000"
    ]


def test_pod_count_and_extended_resources(world: World) -> None:
    world.nodes(
        {
            "kind": "Node",
            "metadata": {"name": "tiny"},
            "status": {"allocatable": {"cpu": "4", "memory": "1Gi", "pods": "1"}},
        }
    )
    gpu = with_spec(
        pod("gpu", "ns"),
        containers=[{"name": "c", "resources": {"requests": {"example.com/gpu": "1"}}}],
    )
    world.bound(gpu, "tiny")
    world.bound(pod("second", "ns", memory="1Mi"), "tiny")
    found = [v for v in world.violations() if v.startswith("overcommit")]
    assert "overcommit: node tiny: example.com/gpu requested 1 > allocatable 0" in found
    assert "overcommit: node tiny: pods requested 2 > allocatable 1" in found


def test_host_port_used_twice(world: World) -> None:
    world.bound(host_port("a", 8080, "10.0.0.1"), "n1")
    world.bound(host_port("b", 8080), "n1")  # 0.0.0.0 overlaps every address
    assert world.kinds() == {"host-port"}


def test_node_selector_and_required_node_affinity(world: World) -> None:
    world.bound(with_spec(pod("sel", "ns"), nodeSelector={ZONE: "b"}), "n1")
    requirement = {"key": ZONE, "operator": "NotIn", "values": ["a"]}
    required = {"nodeSelectorTerms": [{"matchExpressions": [requirement]}]}
    affinity_spec = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}
    world.bound(with_spec(pod("aff", "ns"), affinity=affinity_spec), "n2")
    world.bound(with_spec(pod("fine", "ns"), affinity=affinity_spec), "n3")
    found = [v for v in world.violations() if v.startswith("node-affinity")]
    assert len(found) == 2
    assert any("ns/sel on n1" in v for v in found)
    assert any("ns/aff on n2" in v for v in found)


def test_untolerated_taint(world: World) -> None:
    world.nodes(
        node("t1", taints=[{"key": "k", "value": "v", "effect": "NoExecute"}]),
        node("t2", taints=[{"key": "k", "value": "v", "effect": "PreferNoSchedule"}]),
    )
    wrong_value = {"key": "k", "operator": "Equal", "value": "other"}
    world.bound(with_spec(pod("a", "ns"), tolerations=[wrong_value]), "t1")
    world.bound(pod("b", "ns"), "t2")  # a soft taint is no violation
    assert world.violations() == ["taint: ns/a on t1: k=v:NoExecute"]


def test_anti_affinity_both_directions(world: World) -> None:
    world.bound(anti_affinity("aa"), "n1")
    # The second pod has no anti-affinity of its own but is selected by the first's term.
    world.bound(labelled(pod("plain", "ns"), app="x"), "n1")
    assert world.kinds() == {"anti-affinity"}
    assert len(world.violations()) == 1


def test_anti_affinity_on_zone(world: World) -> None:
    world.bound(anti_affinity("z1", ZONE), "n1")
    world.bound(anti_affinity("z2", ZONE), "n3")
    assert world.violations() == []
    world.bound(anti_affinity("z3", ZONE), "n2")  # n1 and n2 are both in zone a
    assert world.kinds() == {"anti-affinity"}


def test_affinity_unsatisfied(world: World) -> None:
    world.bound(labelled(pod("db", "ns"), app="db"), "n3")
    world.bound(affinity("follower", "db"), "n1")  # db runs in zone b only
    assert [v.split(":", 1)[0] for v in world.violations()] == ["affinity"]


def test_topology_spread_skew_detected(world: World) -> None:
    world.bound(spread("s-1"), "n1")
    world.bound(spread("s-2"), "n2")
    world.bound(spread("s-3"), "n3")
    assert world.violations() == []
    world.bound(spread("s-4"), "n1")
    world.bound(spread("s-5"), "n2")
    found = world.violations()
    assert len(found) == 1 and found[0].startswith("topology-spread")
    assert "{'a': 4, 'b': 1} skew 3 > maxSkew 1" in found[0]


def test_double_bind_in_history(world: World, r: redis.Redis, keys: Keys) -> None:
    bound = world.bound(pod("twice", "ns"), "n1")
    assert world.violations() == []
    unbound = {"kind": "Pod", "metadata": {"name": "twice", "uid": bound.metadata.uid}}
    rebound = {**unbound, "spec": {"nodeName": "n2"}}
    r.xadd(
        keys.events,
        {
            "type": "MODIFIED",
            "kind": "Pod",
            "key": bound.key,
            "rv": "999",
            "epoch": "e",
            "obj": msgpack.packb(rebound),
            "old": msgpack.packb(unbound),
        },
    )
    assert world.violations() == [f"double-bind: ns/twice (uid {bound.metadata.uid}) bound 2 times"]


def test_expected_pod_not_bound(world: World) -> None:
    world.pending(pod("late", "ns"))
    world.bound(pod("done", "ns"), "n1")
    assert world.violations(expect_bound={"ns/done", "ns/late", "ns/gone"}) == [
        "unbound: ns/gone is missing from the store",
        "unbound: ns/late is pending",
    ]


def test_ledger_inconsistency(world: World, r: redis.Redis, keys: Keys) -> None:
    world.bound(pod("a", "ns"), "n1")
    usage = r.hget(keys.ledger_usage, "n1")
    assert usage is not None
    drifted = re.sub(rb"([|,])cpu=(\d+)", lambda m: m[1] + b"cpu=%d" % (int(m[2]) + 50), usage)
    assert drifted != usage
    r.hset(keys.ledger_usage, "n1", drifted)
    found = world.violations()
    assert found and all(v.startswith("ledger") for v in found)
    assert any("node n1 cpu" in v for v in found)


def test_ledger_missing_a_bound_pod(world: World, r: redis.Redis, keys: Keys) -> None:
    created = Pod.from_dict(world.store.create(pod("unrecorded", "ns")))
    world.store.bind(created.key, created.metadata.uid, "n1")
    assert world.violations() == ["ledger: bound pod ns/unrecorded on n1 has no ledger record"]


def test_left_inflight_or_assumed(world: World, r: redis.Redis, keys: Keys) -> None:
    queued = world.pending(pod("popped", "ns"))
    assert world.queue.pop(1, now_ms=world.clock.now_ms())
    assert world.violations() == [f"not-drained: {queued.key} still inflight"]


def test_lost_pending_pod(world: World) -> None:
    world.store.create(pod("nowhere", "ns"))
    assert world.violations() == ["lost-pod: pending pod ns/nowhere is in no sub-queue"]


def test_violations_are_capped_per_kind(world: World) -> None:
    for i in range(5):
        world.store.create(pod(f"lost-{i}", "ns"))
    found = check(world.r, world.keys, limit_per_kind=2)
    assert len(found) == 3
    assert found[-1] == "lost-pod: ... and 3 more"


# --------------------------------------------------------------------------- gangs


def plugins_group(name: str, min_member: int) -> Obj:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"minMember": min_member},
    }


def kube_group(name: str, min_count: int) -> Obj:
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    }


def labelled_member(group: str, i: int) -> Obj:
    return labelled(pod(f"{group}-{i}", "ns"), **{"scheduling.x-k8s.io/pod-group": group})


def field_member(group: str, i: int) -> Obj:
    return with_spec(pod(f"{group}-{i}", "ns"), schedulingGroup={"podGroupName": group})


def test_partial_gang_is_caught(world: World) -> None:
    world.store.create(plugins_group("train", 3))
    world.bound(labelled_member("train", 0), "n1")
    world.bound(labelled_member("train", 1), "n2")
    world.pending(labelled_member("train", 2))
    assert world.violations() == [
        "gang: ns/train has 2 of its minimum 3 members bound or reserved: ns/train-0, ns/train-1"
    ]


def test_whole_gangs_pending_gangs_and_no_gang_pass(world: World) -> None:
    world.store.create(kube_group("whole", 2))
    world.store.create(plugins_group("waiting", 2))
    world.bound(field_member("whole", 0), "n1")
    world.bound(field_member("whole", 1), "n2")
    world.pending(field_member("whole", 2))  # beyond the minimum: may stay pending
    world.pending(labelled_member("waiting", 0))
    world.pending(labelled_member("waiting", 1))
    world.bound(pod("alone", "ns"), "n3")
    assert world.violations() == []


def test_reserved_members_count_as_held(world: World, r: redis.Redis, keys: Keys) -> None:
    world.store.create(plugins_group("train", 2))
    world.bound(labelled_member("train", 0), "n1")
    pending = world.pending(labelled_member("train", 1))
    cluster = read_cluster(r, keys)
    records = ledger_records(r, keys)

    out = Violations()
    check_gangs(cluster, {**records, pending.key: "n2"}, out)  # reserved, not yet bound
    assert out.messages() == []
    check_gangs(cluster, records, out)
    assert out.messages() == [
        "gang: ns/train has 1 of its minimum 2 members bound or reserved: ns/train-0"
    ]


def test_member_lost_after_admission_is_excused(world: World, r: redis.Redis, keys: Keys) -> None:
    world.store.create(plugins_group("train", 2))
    world.bound(labelled_member("train", 0), "n1")
    lost = world.bound(labelled_member("train", 1), "n2")
    world.store.delete("Pod", lost.key)
    world.ledger.pod_deleted(lost.key, lost.metadata.uid)
    assert world.violations() == []  # the stream shows ns/train-1 bound, then deleted
    r.delete(keys.events)  # without that history the partial gang is a violation
    assert world.kinds() == {"gang"}
