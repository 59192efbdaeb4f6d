"""The volume plugins through scheduling workers (real Redis, fake clock): pods land in
their disks' zones, two users of a ReadWriteOncePod claim are never placed even by two
workers at once, a node's CSI attach limit holds, and a claim created later wakes the
pods waiting for it."""

from __future__ import annotations

from typing import Any

import redis

from distsched.clock import FakeClock
from distsched.keys import Keys
from distsched.queue_types import QueuedPod
from distsched.workers.schedule_one import SchedulingWorker
from tests.support.objects import node, pod
from tests.workers.harness import InProcessCluster, decide_while_the_other_holds

Obj = dict[str, Any]
ZONE = "topology.kubernetes.io/zone"


def claim(name: str, *, volume: str = "", modes: tuple[str, ...] = ("ReadWriteOnce",)) -> Obj:
    """A claim; with ``volume``, bound to it as the PV controller leaves it."""
    spec: Obj = {"accessModes": list(modes), "resources": {"requests": {"storage": "1Gi"}}}
    meta: Obj = {"name": name, "namespace": "default"}
    if volume:
        spec["volumeName"] = volume
        meta["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec}


def zonal_volume(name: str, zone: str, handle: str = "") -> Obj:
    spec: Obj = {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}
    if handle:
        spec["csi"] = {"driver": "ebs.csi.aws.com", "volumeHandle": handle}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": {ZONE: zone}},
        "spec": spec,
    }


def one_pod_each(
    cluster: InProcessCluster, other: SchedulingWorker, clock: FakeClock
) -> tuple[list[QueuedPod], list[QueuedPod]]:
    """After ``other`` has read every event, a pod popped by the cluster's first worker and
    one popped by ``other``: two decisions about to be made at the same time."""
    while other.informer.poll_once(0):
        pass
    return cluster.pop(1), other.queue.pop(1, now_ms=clock.now_ms())


def user(name: str, *claims: str) -> Obj:
    volumes = [
        {"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)
    ]
    return pod(name, volumes=volumes)


def test_pods_land_in_their_volumes_zones(r: redis.Redis, keys: Keys, clock: FakeClock) -> None:
    cluster = InProcessCluster(r, keys, clock)
    cluster.add_worker()
    cluster.create(*(node(f"n-{z}", labels={ZONE: z}) for z in "abc"))
    for i, zone in enumerate("cabcab"):
        cluster.create(zonal_volume(f"pv-{i}", zone), claim(f"data-{i}", volume=f"pv-{i}"))
    cluster.create(*(user(f"db-{i}", f"data-{i}") for i in range(6)))
    for worker in cluster.workers:
        while worker.informer.poll_once(0):
            pass
    cluster.settle()
    assert [cluster.node_of(f"db-{i}") for i in range(6)] == [f"n-{z}" for z in "cabcab"]


def test_two_workers_never_place_two_users_of_a_read_write_once_pod_claim(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    """Each worker pops one user of the claim before either decides; the second decides
    after the first reserved, on pod lists synced from the ledger: the claim is in use."""
    cluster = InProcessCluster(r, keys, clock)
    second = cluster.add_worker()
    cluster.create(node("n1"), node("n2"), zonal_volume("pv-solo", "a"))
    cluster.create(claim("solo", volume="pv-solo", modes=("ReadWriteOncePod",)))
    cluster.create(user("a", "solo"), user("b", "solo"))
    for worker in cluster.workers:
        while worker.informer.poll_once(0):
            pass
    cluster.handle_queue_events()
    first_batch = cluster.queue.pop(1, now_ms=clock.now_ms())
    second_batch = second.queue.pop(1, now_ms=clock.now_ms())
    assert len(first_batch) == len(second_batch) == 1
    cluster.worker.schedule_one_batch(first_batch)
    second.schedule_one_batch(second_batch)
    cluster.bind()
    placed = [name for name in ("a", "b") if cluster.node_of(name)]
    assert len(placed) == 1
    waiting = "b" if placed == ["a"] else "a"
    assert "ReadWriteOncePod" in cluster.explain(waiting)["message"]
    # The user goes: the waiting pod is placed (its hint: a pod using the claim left).
    cluster.store.delete("Pod", f"default/{placed[0]}")
    cluster.handle_events()
    clock.step(20_000)
    cluster.flush()
    cluster.settle()
    assert cluster.node_of(waiting)


def test_csi_attach_limit_holds_and_a_claim_created_later_wakes_its_pod(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(node("n1"))
    cluster.create(
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSINode",
            "metadata": {"name": "n1"},
            "spec": {"drivers": [{"name": "ebs.csi.aws.com", "allocatable": {"count": 2}}]},
        }
    )
    for i in range(3):
        cluster.create(
            zonal_volume(f"pv-{i}", "a", handle=f"h{i}"), claim(f"c{i}", volume=f"pv-{i}")
        )
    cluster.create(user("p0", "c0"), user("p1", "c1"), user("p2", "c2"), user("late", "later"))
    cluster.settle()
    bound = [name for name in ("p0", "p1", "p2") if cluster.node_of(name)]
    assert len(bound) == 2
    [third] = {"p0", "p1", "p2"} - set(bound)
    assert "exceed max volume count" in cluster.explain(third)["message"]
    assert 'persistentvolumeclaim "later" not found' in cluster.explain("late")["message"]
    assert cluster.where("late") == "unschedulable"
    cluster.create(zonal_volume("pv-late", "a"), claim("later", volume="pv-late"))
    cluster.handle_events()
    assert cluster.where("late") in ("active", "backoff")


def test_concurrent_decisions_on_one_read_write_once_pod_claim_take_turns(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    """Worker A holds its decision open (its reservation waits); worker B, deciding at
    the same time, must not reserve the claim's second user on the view it had: it waits
    for the claim lock, then sees A's pod."""
    cluster = InProcessCluster(r, keys, clock)
    other = cluster.add_worker()
    cluster.create(node("n1"), node("n2"), zonal_volume("pv-solo", "a"))
    cluster.create(claim("solo", volume="pv-solo", modes=("ReadWriteOncePod",)))
    cluster.create(user("a", "solo"), user("b", "solo"))
    cluster.handle_events()
    first, second = one_pod_each(cluster, other, clock)
    meanwhile, _ = decide_while_the_other_holds(cluster.worker, first, other, second)
    assert not meanwhile
    cluster.bind()
    assert sum(1 for name in ("a", "b") if cluster.node_of(name)) == 1


def test_the_informer_catches_up_with_the_events_the_queue_used(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    """The queue's handlers consumed the claim's creation before the worker's informer
    read it (the informer reads a bounded number of batches per turn): the worker reads
    on before deciding, or the pod would fail on "claim not found" with the event that
    would have moved it already spent."""
    cluster = InProcessCluster(r, keys, clock)
    cluster.worker.config.event_batches_per_loop = 0  # the turn itself reads no events
    cluster.create(node("n1"), zonal_volume("pv-0", "a"), claim("data", volume="pv-0"))
    cluster.create(user("db", "data"))
    cluster.handle_queue_events()  # the queue side only: the pod is in activeQ
    assert cluster.worker.view.listers.volumes.claim("default", "data") is None
    assert cluster.turn() == 1
    cluster.bind()
    assert cluster.node_of("db") == "n1"


def zonal_class(name: str = "zonal") -> Obj:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": "ebs.csi.aws.com",
        "volumeBindingMode": "WaitForFirstConsumer",
    }


def test_wait_for_first_consumer_claims_are_provisioned_where_their_pods_go(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    """Two workers; a StatefulSet-like set of pods with claims of a WaitForFirstConsumer
    class, spread over zones: each claim gets the selected-node annotation in PreBind,
    the controller provisions its PV in the node's zone, and the checker finds pods and
    disks together. A static PV pinned to node b is bound by PreBind to the claim of the
    pod that goes there."""
    from distsched.bench.checker import check
    from distsched.controllers.workload import WorkloadController

    cluster = InProcessCluster(r, keys, clock)
    cluster.add_worker()
    ctl = WorkloadController(r, keys, clock=clock)
    cluster.create(*(node(f"n-{z}", labels={ZONE: z}) for z in "abc"), zonal_class())
    static = zonal_volume("static-b", "b")
    static["spec"]["storageClassName"] = "zonal"
    static["spec"]["nodeAffinity"] = {
        "required": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["b"]}]}
            ]
        }
    }
    cluster.create(static)
    ctl.sync()  # the PV controller makes it Available
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "db"}},
        }
    ]
    for i in range(3):
        wanted = claim(f"data-db-{i}")
        wanted["spec"]["storageClassName"] = "zonal"
        cluster.create(wanted)
        db = user(f"db-{i}", f"data-db-{i}")
        db["metadata"]["labels"] = {"app": "db"}
        db["spec"]["topologySpreadConstraints"] = spread
        cluster.create(db)
    for _ in range(5):
        for worker in cluster.workers:
            worker.run_once()
        cluster.bind()
        ctl.sync()
        cluster.handle_events()
    zones = sorted(cluster.node_of(f"db-{i}") for i in range(3))
    assert zones == ["n-a", "n-b", "n-c"]
    for i in range(3):
        bound_claim = cluster.store.get("PersistentVolumeClaim", f"default/data-db-{i}")
        assert bound_claim is not None and bound_claim["status"]["phase"] == "Bound"
        pv = cluster.store.get("PersistentVolume", bound_claim["spec"]["volumeName"])
        assert pv is not None
        on = cluster.node_of(f"db-{i}")
        if on == "n-b":
            assert pv["metadata"]["name"] == "static-b"
        else:
            assert pv["metadata"]["labels"][ZONE] == on[-1]
            annotations = bound_claim["metadata"]["annotations"]
            assert annotations["volume.kubernetes.io/selected-node"] == on
    assert check(r, keys) == []


def test_explain_names_the_volume_reasons(r: redis.Redis, keys: Keys, clock: FakeClock) -> None:
    """kube's messages: a local class with no volume for the pod on any node, and a
    bound claim whose PV sits on another node."""
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(node("n1"), node("n2"))
    local = zonal_class("local")
    local["provisioner"] = "kubernetes.io/no-provisioner"
    pinned = zonal_volume("pinned", "a")
    pinned["spec"]["nodeAffinity"] = {
        "required": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n9"]}
                    ]
                }
            ]
        }
    }
    waiting = claim("scratch")
    waiting["spec"]["storageClassName"] = "local"
    cluster.create(local, pinned, claim("data", volume="pinned"), waiting)
    cluster.create(user("no-volume", "scratch"), user("elsewhere", "data"))
    cluster.settle()
    assert cluster.explain("no-volume")["message"] == (
        "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind."
    )
    assert cluster.explain("elsewhere")["message"] == (
        "0/2 nodes are available: 2 node(s) didn't match PersistentVolume's node affinity."
    )


def attach_limit_node(name: str, count: int) -> Obj:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": name},
        "spec": {"drivers": [{"name": "ebs.csi.aws.com", "allocatable": {"count": count}}]},
    }


def test_a_second_worker_sees_the_first_ones_volume_on_the_node(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    """A node allows one EBS volume. Worker A reserves a pod with one there; worker B,
    deciding next on a view that never had A's pod, must not put a second one there: a
    pod with claims syncs its nodes' pod lists and checks the node's generation."""
    cluster = InProcessCluster(r, keys, clock)
    other = cluster.add_worker()
    cluster.create(node("n1"), attach_limit_node("n1", 1))
    for i in range(2):
        cluster.create(
            zonal_volume(f"pv-{i}", "a", handle=f"h{i}"), claim(f"c{i}", volume=f"pv-{i}")
        )
    cluster.create(user("a", "c0"), user("b", "c1"))
    cluster.handle_events()
    first, second = one_pod_each(cluster, other, clock)
    cluster.schedule(first)
    other.schedule_one_batch(second)
    cluster.bind()
    assert sum(1 for name in ("a", "b") if cluster.node_of(name)) == 1


def test_a_bound_user_of_a_read_write_once_pod_claim_stays_counted(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    """Worker B counted A's pod while it was only reserved; its binding then reaches B's
    informer. Pods with claims are parsed when bound (not held unparsed), so the claim
    stays in use for B and its next user waits."""
    cluster = InProcessCluster(r, keys, clock)
    other = cluster.add_worker()
    cluster.create(node("n1"), node("n2"), zonal_volume("pv-solo", "a"))
    cluster.create(claim("solo", volume="pv-solo", modes=("ReadWriteOncePod",)))
    cluster.create(user("a", "solo"))
    cluster.settle()
    assert cluster.node_of("a")
    other.view.refresh_from_ledger()
    other.view.sync_pod_lists()
    while other.informer.poll_once(0):  # a's binding
        pass
    assert other.snapshot.claim_users == {"default/solo": 1}
    cluster.create(user("b", "solo"))
    cluster.handle_queue_events()
    other.schedule_one_batch(other.queue.pop(1, now_ms=clock.now_ms()))
    cluster.bind()
    assert not cluster.node_of("b")
