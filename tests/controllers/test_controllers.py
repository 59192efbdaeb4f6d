"""The workload controllers, driven one sync at a time against a real Redis."""

from __future__ import annotations

import re
import threading

import redis

from distsched.clock import FakeClock
from distsched.controllers.naming import ALPHANUMS
from distsched.controllers.workload import WorkloadController
from distsched.keys import Keys
from distsched.lease import Lease
from distsched.store import Store
from tests.controllers.helpers import MANIFESTS, apply_path, apply_text, deployment, pods_of
from tests.support.objects import node

SUFFIX = f"[{ALPHANUMS}]{{5}}"


def controller(r: redis.Redis, keys: Keys, clock: FakeClock) -> WorkloadController:
    return WorkloadController(r, keys, clock=clock)


def test_public_examples_make_pods_named_and_owned_like_kube(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    store = Store(r, keys, clock)
    apply_path(store, MANIFESTS)
    controller(r, keys, clock).sync()

    frontend = pods_of(store, "frontend-")
    assert len(frontend) == 3
    (rs,) = [
        x for x in store.list("ReplicaSet")[0] if x["metadata"]["name"].startswith("frontend-")
    ]
    pod_hash = rs["metadata"]["labels"]["pod-template-hash"]
    assert rs["metadata"]["name"] == f"frontend-{pod_hash}"
    assert rs["metadata"]["ownerReferences"][0]["kind"] == "Deployment"
    assert rs["spec"]["selector"]["matchLabels"] == {
        "app": "guestbook",
        "tier": "frontend",
        "pod-template-hash": pod_hash,
    }
    for pod in frontend:
        assert re.fullmatch(rf"frontend-{pod_hash}-{SUFFIX}", pod["metadata"]["name"])
        (ref,) = pod["metadata"]["ownerReferences"]
        assert ref == {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": rs["metadata"]["name"],
            "uid": rs["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        assert pod["metadata"]["labels"]["tier"] == "frontend"
        # Priority admission ran on the controller's pods too.
        assert pod["spec"]["priority"] == 100000
        assert pod["spec"]["priorityClassName"] == "frontend-critical"
        # Fields distsched does not read are kept (env).
        assert pod["spec"]["containers"][0]["env"] == [{"name": "GET_HOSTS_FROM", "value": "dns"}]

    zk = sorted(p["metadata"]["name"] for p in pods_of(store, "zk-"))
    assert zk == ["zk-0", "zk-1", "zk-2"]
    zk0 = store.get("Pod", "default/zk-0")
    assert zk0 is not None
    assert zk0["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"] == "zk-0"
    assert zk0["metadata"]["labels"]["apps.kubernetes.io/pod-index"] == "0"
    assert zk0["spec"]["hostname"] == "zk-0" and zk0["spec"]["subdomain"] == "zk-hs"

    pi = pods_of(store, "pi-")
    assert len(pi) == 3  # parallelism 3 of 5 completions
    job = store.get("Job", "default/pi")
    assert job is not None
    for pod in pi:
        assert re.fullmatch(rf"pi-{SUFFIX}", pod["metadata"]["name"])
        labels = pod["metadata"]["labels"]
        assert labels["batch.kubernetes.io/job-name"] == "pi" == labels["job-name"]
        assert labels["batch.kubernetes.io/controller-uid"] == job["metadata"]["uid"]

    daemon = pods_of(store, "fluentd-elasticsearch-", "kube-system")
    # Every node: the control plane's taint is tolerated by the template, the cordoned
    # worker-6 by the unschedulable toleration the DaemonSet controller adds.
    nodes = {n["metadata"]["name"] for n in store.list("Node")[0]}
    targets = []
    for pod in daemon:
        required = pod["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]
        (term,) = required["nodeSelectorTerms"]
        assert term == {
            "matchFields": [
                {
                    "key": "metadata.name",
                    "operator": "In",
                    "values": term["matchFields"][0]["values"],
                }
            ]
        }
        targets.append(term["matchFields"][0]["values"][0])
        added = {
            (t["key"], t["effect"]) for t in pod["spec"]["tolerations"] if t["operator"] == "Exists"
        }
        assert {
            ("node.kubernetes.io/not-ready", "NoExecute"),
            ("node.kubernetes.io/unreachable", "NoExecute"),
            ("node.kubernetes.io/disk-pressure", "NoSchedule"),
            ("node.kubernetes.io/memory-pressure", "NoSchedule"),
            ("node.kubernetes.io/pid-pressure", "NoSchedule"),
            ("node.kubernetes.io/unschedulable", "NoSchedule"),
            ("node-role.kubernetes.io/control-plane", "NoSchedule"),
        } <= added
    assert sorted(targets) == sorted(nodes)


def test_reapply_scales_up_and_down_removing_unbound_pods_first(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    store = Store(r, keys, clock)
    ctl = controller(r, keys, clock)
    store.apply_many([node("n1"), node("n2")])
    apply_text(store, deployment("web", 3))
    ctl.sync()
    assert len(pods_of(store, "web-")) == 3
    apply_text(store, deployment("web", 5))
    ctl.sync()
    pods = pods_of(store, "web-")
    assert len(pods) == 5
    bound = {pods[0]["metadata"]["name"], pods[3]["metadata"]["name"]}
    for name in bound:
        store.bind(f"default/{name}", None, "n1")
    apply_text(store, deployment("web", 2))
    ctl.sync()
    assert {p["metadata"]["name"] for p in pods_of(store, "web-")} == bound
    # Same template: still one ReplicaSet, now at 2.
    (rs,) = store.list("ReplicaSet")[0]
    assert rs["spec"]["replicas"] == 2
    assert ctl.sync() == 0  # converged: nothing more to do


def test_new_template_makes_a_new_replica_set_and_empties_the_old(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    store = Store(r, keys, clock)
    ctl = controller(r, keys, clock)
    apply_text(store, deployment("web", 2))
    ctl.sync()
    apply_text(store, deployment("web", 2, image="nginx:1.26"))
    ctl.sync()
    sets = {x["metadata"]["name"]: x["spec"]["replicas"] for x in store.list("ReplicaSet")[0]}
    assert sorted(sets.values()) == [0, 2]
    (new,) = [n for n, replicas in sets.items() if replicas == 2]
    pods = pods_of(store, "web-")
    assert len(pods) == 2 and all(p["metadata"]["name"].startswith(new + "-") for p in pods)
    assert all(p["spec"]["containers"][0]["image"] == "nginx:1.26" for p in pods)


def test_statefulset_scales_down_from_the_highest_ordinal(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    store = Store(r, keys, clock)
    ctl = controller(r, keys, clock)
    text = (MANIFESTS / "zookeeper.yaml").read_text()
    apply_text(store, text.replace("replicas: 3", "replicas: 5"))
    ctl.sync()
    store.bind("default/zk-4", None, "n1")  # bound or not, StatefulSets go by ordinal
    apply_text(store, text.replace("replicas: 3", "replicas: 2"))
    ctl.sync()
    assert sorted(p["metadata"]["name"] for p in pods_of(store, "zk-")) == ["zk-0", "zk-1"]


def test_statefulset_claims_are_made_from_its_templates_and_kept(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    """kube's StatefulSet controller: one PersistentVolumeClaim per template and ordinal,
    ``<template>-<set>-<ordinal>``, the pod's volume naming it; kept when the set scales
    down (default retention), the same claim again when it scales back up."""
    store = Store(r, keys, clock)
    ctl = controller(r, keys, clock)
    text = (MANIFESTS / "zookeeper.yaml").read_text()
    apply_text(store, text)
    ctl.sync()

    def claims() -> dict[str, dict]:
        listed = store.list("PersistentVolumeClaim")[0]
        return {c["metadata"]["name"]: c for c in listed}

    made = claims()
    assert sorted(made) == ["datadir-zk-0", "datadir-zk-1", "datadir-zk-2"]
    claim = made["datadir-zk-1"]
    assert claim["metadata"]["namespace"] == "default"
    assert claim["metadata"]["labels"] == {"app": "zk"}  # the set's selector matchLabels
    assert claim["spec"]["resources"]["requests"]["storage"] == "10Gi"
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert claim["status"] == {"phase": "Pending"}
    assert "ownerReferences" not in claim["metadata"]
    pod = store.get("Pod", "default/zk-1")
    assert {"name": "datadir", "persistentVolumeClaim": {"claimName": "datadir-zk-1"}} in pod[
        "spec"
    ]["volumes"]

    apply_text(store, text.replace("replicas: 3", "replicas: 1"))
    ctl.sync()
    assert sorted(claims()) == ["datadir-zk-0", "datadir-zk-1", "datadir-zk-2"]
    uid = claims()["datadir-zk-2"]["metadata"]["uid"]
    apply_text(store, text)
    ctl.sync()
    assert claims()["datadir-zk-2"]["metadata"]["uid"] == uid  # the same claim, not a new one
    assert len(pods_of(store, "zk-")) == 3


DAEMON = """
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      nodeSelector: {kubernetes.io/os: linux}
      containers: [{name: a, image: agent, resources: {requests: {cpu: 10m}}}]
"""


def test_daemonset_follows_nodes_and_their_eligibility(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    store = Store(r, keys, clock)
    ctl = controller(r, keys, clock)
    linux = {"kubernetes.io/os": "linux"}
    store.apply_many([node("a", labels=linux), node("b", labels=linux), node("w")])
    apply_text(store, DAEMON)
    ctl.sync()

    def targets() -> list[str]:
        from distsched.controllers.pods import daemon_pod_node

        return sorted(daemon_pod_node(p) for p in pods_of(store, "agent-"))

    assert targets() == ["a", "b"]  # w has no kubernetes.io/os=linux
    store.apply(node("c", labels=linux))
    tainted = node(
        "d", labels=linux, taints=[{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]
    )
    store.apply(tainted)
    ctl.sync()
    assert targets() == ["a", "b", "c"]  # d's taint is not tolerated
    store.delete("Node", "b")
    store.apply(node("w", labels=linux))  # relabelled: now eligible
    ctl.sync()
    assert targets() == ["a", "c", "w"]


def test_job_runs_parallelism_pods_up_to_completions(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    store = Store(r, keys, clock)
    ctl = controller(r, keys, clock)
    apply_path(store, MANIFESTS / "pi-job.yaml")
    ctl.sync()
    pods = pods_of(store, "pi-")
    assert len(pods) == 3
    # Two finish (no kubelet here: the test plays it): 3 active again, 2 succeeded.
    for pod in pods[:2]:
        store.update({**pod, "status": {"phase": "Succeeded"}})
    ctl.sync()
    phases = sorted((p.get("status") or {}).get("phase", "Pending") for p in pods_of(store, "pi-"))
    assert phases == ["Pending", "Pending", "Pending", "Succeeded", "Succeeded"]
    # Two more finish: 5 - 4 = 1 completion left, and one pod is still running it.
    running = [
        p for p in pods_of(store, "pi-") if (p.get("status") or {}).get("phase") != "Succeeded"
    ]
    for pod in running[:2]:
        store.update({**pod, "status": {"phase": "Succeeded"}})
    ctl.sync()
    assert len(pods_of(store, "pi-")) == 5


def test_indexed_job_has_one_pod_per_index(r: redis.Redis, keys: Keys, clock: FakeClock) -> None:
    store = Store(r, keys, clock)
    text = (
        (MANIFESTS / "pi-job.yaml")
        .read_text()
        .replace("  completions: 5\n", "  completions: 5\n  completionMode: Indexed\n")
    )
    apply_text(store, text)
    controller(r, keys, clock).sync()
    pods = pods_of(store, "pi-")
    indexes = sorted(
        p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] for p in pods
    )
    assert indexes == ["0", "1", "2"]
    for pod in pods:
        index = pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
        assert re.fullmatch(rf"pi-{index}-{SUFFIX}", pod["metadata"]["name"])


def test_deleting_the_owner_deletes_what_it_owns(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    store = Store(r, keys, clock)
    ctl = controller(r, keys, clock)
    apply_text(store, deployment("web", 3))
    apply_text(store, deployment("api", 2))
    ctl.sync()
    store.delete("Deployment", "default/web")
    ctl.sync()
    assert pods_of(store, "web-") == []
    assert [x["metadata"]["name"].startswith("api-") for x in store.list("ReplicaSet")[0]] == [True]
    assert len(pods_of(store, "api-")) == 2


def test_a_new_controller_collects_what_a_deleted_owner_left(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    store = Store(r, keys, clock)
    apply_text(store, deployment("web", 3))
    controller(r, keys, clock).sync()
    store.delete("Deployment", "default/web")  # no controller running now
    foreign = {"apiVersion": "example.com/v1", "kind": "Rollout", "name": "r", "uid": "u-1",
               "controller": True}  # fmt: skip
    store.create({"kind": "Pod", "metadata": {"name": "theirs", "ownerReferences": [foreign]},
                  "spec": {"containers": [{"name": "c"}]}})  # fmt: skip
    fresh = controller(r, keys, clock)
    fresh.catch_up()
    assert fresh.collect_orphans() == 1  # the ReplicaSet; its pods follow it
    fresh.sync()
    assert store.list("ReplicaSet")[0] == [] and pods_of(store, "web-") == []
    assert store.get("Pod", "default/theirs") is not None  # not a kind distsched manages


def test_two_controllers_racing_make_each_pod_once(
    r: redis.Redis, redis_url: str, keys: Keys, clock: FakeClock
) -> None:
    store = Store(r, keys, clock)
    apply_text(store, deployment("web", 40))
    apply_path(store, MANIFESTS / "zookeeper.yaml")
    clients = [redis.Redis.from_url(redis_url) for _ in range(2)]
    controllers = [WorkloadController(c, keys, clock=clock) for c in clients]
    start = threading.Barrier(2)

    def run(ctl: WorkloadController) -> None:
        start.wait()
        for _ in range(3):
            ctl.sync()

    threads = [threading.Thread(target=run, args=(c,)) for c in controllers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(pods_of(store, "web-")) == 40
    assert len(pods_of(store, "zk-")) == 3
    for c in clients:
        c.close()


def test_pods_wait_for_an_unknown_priority_class(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    store = Store(r, keys, clock)
    ctl = controller(r, keys, clock)
    apply_text(store, deployment("web", 2, extra="      priorityClassName: late\n"))
    ctl.sync()
    assert pods_of(store, "web-") == []  # kube: FailedCreate, no PriorityClass "late"
    apply_text(
        store,
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\n"
        "metadata: {name: late}\nvalue: 7\npreemptionPolicy: Never\n",
    )
    ctl.sync()
    pods = pods_of(store, "web-")
    assert [(p["spec"]["priority"], p["spec"]["preemptionPolicy"]) for p in pods] == [
        (7, "Never")
    ] * 2


def test_one_lease_holder_at_a_time(r: redis.Redis, keys: Keys) -> None:
    first = Lease(r, keys, "controller", lease_ms=60_000)
    second = Lease(r, keys, "controller", lease_ms=60_000)
    assert first.hold() and first.hold()  # taken, then renewed
    assert not second.hold()
    first.release()
    assert second.hold() and not first.hold()


def test_the_disruption_controller_keeps_each_budgets_status(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    store = Store(r, keys, clock)
    ctl = controller(r, keys, clock)
    apply_path(store, MANIFESTS / "zookeeper.yaml")  # maxUnavailable: 1 over 3 replicas
    ctl.sync()

    def status() -> dict:
        budget = store.get("PodDisruptionBudget", "default/zk-pdb")
        assert budget is not None
        return budget["status"]

    assert status() == {
        "currentHealthy": 0, "desiredHealthy": 2, "expectedPods": 3, "disruptionsAllowed": 0,
    }  # fmt: skip
    for i in range(3):
        store.bind(f"default/zk-{i}", None, "n1")
    ctl.sync()
    assert status()["currentHealthy"] == 3 and status()["disruptionsAllowed"] == 1
    # minAvailable as a number counts the matching pods themselves.
    apply_text(
        store,
        (MANIFESTS / "zookeeper.yaml").read_text().replace("maxUnavailable: 1", "minAvailable: 1"),
    )
    ctl.sync()
    assert status()["disruptionsAllowed"] == 2
    apply_text(
        store,
        (MANIFESTS / "zookeeper.yaml")
        .read_text()
        .replace("maxUnavailable: 1", 'minAvailable: "50%"'),
    )
    ctl.sync()
    assert status()["desiredHealthy"] == 2 and status()["disruptionsAllowed"] == 1


STORAGE_CLASSES = """
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: ebs.csi.aws.com
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: late-binding}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: waits}
spec:
  storageClassName: late-binding
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
"""


def test_claims_of_an_immediate_class_get_a_volume_bound_both_ways(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    """The StatefulSet's claims name no class: they take the default one (Immediate) and
    get a PV each, bound both ways; a WaitForFirstConsumer claim is left for the
    scheduler; a class created after its claims provisions them then."""
    store = Store(r, keys, clock)
    ctl = controller(r, keys, clock)
    apply_text(store, (MANIFESTS / "zookeeper.yaml").read_text())
    ctl.sync()
    assert store.list("PersistentVolume")[0] == []  # no class yet: Pending, as in kube
    apply_text(store, STORAGE_CLASSES)
    ctl.sync()
    claims = {c["metadata"]["name"]: c for c in store.list("PersistentVolumeClaim")[0]}
    volumes = {v["metadata"]["name"]: v for v in store.list("PersistentVolume")[0]}
    assert len(volumes) == 3
    assert claims["waits"]["spec"].get("volumeName") is None
    claim = claims["datadir-zk-1"]
    pv = volumes[claim["spec"]["volumeName"]]
    assert claim["status"]["phase"] == "Bound" and pv["status"]["phase"] == "Bound"
    assert claim["spec"]["storageClassName"] == "standard"
    assert pv["spec"]["claimRef"]["uid"] == claim["metadata"]["uid"]
    assert pv["spec"]["capacity"] == {"storage": "10Gi"}
    assert pv["spec"]["csi"]["driver"] == "ebs.csi.aws.com"
    assert ctl.sync() == 0  # nothing left to do: a bound claim is not provisioned again


def test_the_pv_controller_marks_volumes_available_and_completes_pre_bound_claims(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    store = Store(r, keys, clock)
    ctl = controller(r, keys, clock)
    apply_text(
        store,
        """
apiVersion: v1
kind: PersistentVolume
metadata: {name: free}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  hostPath: {path: /data/free}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: wanted}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  hostPath: {path: /data/wanted}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: mine}
spec:
  volumeName: wanted
  storageClassName: ""
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
""",
    )
    ctl.sync()
    free = store.get("PersistentVolume", "free")
    wanted = store.get("PersistentVolume", "wanted")
    claim = store.get("PersistentVolumeClaim", "default/mine")
    assert free is not None and free["status"]["phase"] == "Available"
    assert wanted is not None and wanted["status"]["phase"] == "Bound"
    assert wanted["spec"]["claimRef"]["name"] == "mine"
    assert claim is not None and claim["status"]["phase"] == "Bound"
    assert claim["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] == "yes"


def test_a_wait_for_first_consumer_claim_is_provisioned_once_a_node_is_selected(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    store = Store(r, keys, clock)
    ctl = controller(r, keys, clock)
    apply_text(store, STORAGE_CLASSES)
    store.create(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": "n1",
                "labels": {"topology.kubernetes.io/zone": "z1", "kubernetes.io/hostname": "n1"},
            },
            "status": {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"}},
        }
    )
    ctl.sync()
    assert store.get("PersistentVolumeClaim", "default/waits")["spec"].get("volumeName") is None
    claim = store.get("PersistentVolumeClaim", "default/waits")
    claim["metadata"]["annotations"] = {"volume.kubernetes.io/selected-node": "n1"}
    store.update(claim)
    ctl.sync()
    claim = store.get("PersistentVolumeClaim", "default/waits")
    pv = store.get("PersistentVolume", claim["spec"]["volumeName"])
    assert pv["metadata"]["labels"] == {"topology.kubernetes.io/zone": "z1"}
    term = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]
    assert term["matchExpressions"] == [
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z1"]}
    ]


def test_generic_ephemeral_volumes_get_their_pods_claims(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    """kube's ephemeral volume controller: `<pod>-<volume>` from the template, the pod
    its controller; deleted with the pod."""
    store = Store(r, keys, clock)
    ctl = controller(r, keys, clock)
    apply_text(
        store,
        """
apiVersion: v1
kind: Pod
metadata: {name: scratchy}
spec:
  containers: [{name: c, image: busybox}]
  volumes:
    - name: scratch
      ephemeral:
        volumeClaimTemplate:
          metadata: {labels: {type: scratch}}
          spec:
            accessModes: [ReadWriteOnce]
            storageClassName: fast
            resources: {requests: {storage: 1Gi}}
""",
    )
    ctl.sync()
    pod = store.get("Pod", "default/scratchy")
    claim = store.get("PersistentVolumeClaim", "default/scratchy-scratch")
    assert claim is not None and claim["metadata"]["labels"] == {"type": "scratch"}
    owner = claim["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["controller"]) == (
        "Pod",
        pod["metadata"]["uid"],
        True,
    )
    assert claim["spec"]["storageClassName"] == "fast"
    store.delete("Pod", "default/scratchy")
    ctl.sync()
    assert store.get("PersistentVolumeClaim", "default/scratchy-scratch") is None
