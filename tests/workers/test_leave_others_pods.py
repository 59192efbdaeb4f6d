"""Workers leave each other's plain pods out of their views (WorkerConfig.leave_others_pods).

A worker holds the pods it pops and those whose decisions other pods read (pod affinity,
anti-affinity, claims), counts every pod's usage from the ledger, and follows every pod
from the first decision that may read other pods' lists. That its decisions equal a
worker's that holds every pod is shown in test_lazy_pods.py (the twins with ``leave``).
"""

from __future__ import annotations

from typing import Any

import pytest
import redis

from distsched.clock import FakeClock
from distsched.framework.profile import build_profiles, default_config
from distsched.keys import Keys
from distsched.model.objects import DEFAULT_SCHEDULER_NAME, Pod
from distsched.workers.schedule_one import profile_reads_other_pods, reads_other_pods
from tests.support.objects import node, pod
from tests.workers.harness import InProcessCluster

Obj = dict[str, Any]


def plain(name: str, **spec: Any) -> Obj:
    return pod(name, labels={"app": "web"}, **spec)


ANTI = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 1, "podAffinityTerm": {"topologyKey": "zone"}}]}}  # fmt: skip
SPREAD = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ({}, ""),
        ({"nodeSelector": {"zone": "a"}, "tolerations": [{"operator": "Exists"}]}, ""),
        ({"affinity": ANTI}, "pod affinity or anti-affinity"),
        ({"topologySpreadConstraints": SPREAD}, "topology spread constraints"),
        ({"volumes": [{"name": "v", "emptyDir": {}}, {"name": "s", "secret": {}}]}, ""),
        ({"volumes": [{"name": "v", "gcePersistentDisk": {"pdName": "d"}}]}, "disks or claims"),
        ({"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "c"}}]}, "claims"),
        ({"volumes": [{"name": "v", "ephemeral": {"volumeClaimTemplate": {}}}]}, "claims"),
    ],
)
def test_what_makes_a_decision_read_other_pods(spec: Obj, reason: str) -> None:
    why = reads_other_pods(Pod.from_dict(plain("p", **spec)))
    assert why.endswith(reason) and bool(why) == bool(reason)


def test_a_nominated_pod_or_a_gang_member_reads_other_pods() -> None:
    nominated = plain("p")
    nominated["status"] = {"nominatedNodeName": "n1"}
    member = plain("m")
    member["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] = "g"
    assert reads_other_pods(Pod.from_dict(nominated)).endswith("is nominated")
    assert reads_other_pods(Pod.from_dict(member)).endswith("belongs to a pod group")


def test_a_profile_with_a_plugin_outside_the_known_ones_reads_other_pods() -> None:
    fw = build_profiles(default_config())[DEFAULT_SCHEDULER_NAME]
    assert profile_reads_other_pods(fw) == ""
    fw.plugins["OutOfTree"] = fw.plugins["NodeName"]
    assert "runs OutOfTree" in profile_reads_other_pods(fw)
    del fw.plugins["OutOfTree"]
    fw.plugins["NodeName"] = object()  # type: ignore[assignment]  # an in-tree name only
    assert "runs NodeName" in profile_reads_other_pods(fw)


def test_each_worker_holds_its_own_plain_pods_and_counts_the_others_from_the_ledger(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    cluster = InProcessCluster(r, keys, clock)
    other = cluster.add_worker()
    cluster.create(node("n1", cpu="4", pods="20"))
    cluster.create(*(plain(f"a{i}") for i in range(3)))
    cluster.settle()  # the first worker schedules a0..a2
    cluster.create(*(plain(f"b{i}") for i in range(2)))
    other.run_once()  # the other one schedules b0, b1
    cluster.bind()
    for worker in (cluster.worker, other):
        worker.run_once()  # reads the stream and the ledger's feed
    assert all(cluster.node_of(p) == "n1" for p in ("a0", "a1", "a2", "b0", "b1"))
    mine = {cluster.worker: {"a0", "a1", "a2"}, other: {"b0", "b1"}}
    for worker, own in mine.items():
        assert not worker.view.holds_every_pod
        index = worker.snapshot.get_index("n1")
        assert index is not None
        assert {k.split("/")[1] for k in worker.snapshot.pods_on(index)} == own
        assert {k for k in own if worker.informer.get("Pod", f"default/{k}")} == own
        # The ledger's usage counts all five (100m each).
        snapshot = worker.snapshot
        assert int(snapshot.requested[index, snapshot.table.resource_index["cpu"]]) == 500


def test_the_first_pod_that_reads_other_pods_makes_the_worker_hold_them_all(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    cluster = InProcessCluster(r, keys, clock)
    other = cluster.add_worker()
    cluster.create(node("n1"), node("n2"))
    cluster.create(*(plain(f"a{i}") for i in range(4)))
    other.run_once()
    cluster.bind()
    cluster.handle_events()
    worker = cluster.worker
    assert not worker.view.holds_every_pod and worker.informer.get("Pod", "default/a0") is None
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
    ]}}  # fmt: skip
    cluster.create(pod("lonely", affinity=anti))
    cluster.settle()
    assert worker.view.holds_every_pod
    assert worker.informer.get("Pod", "default/a0") == cluster.pod("a0")
    web_nodes = {cluster.node_of(f"a{i}") for i in range(4)}
    assert cluster.node_of("lonely") in {"n1", "n2"} - web_nodes or (
        len(web_nodes) == 2 and cluster.node_of("lonely") == ""
    )
