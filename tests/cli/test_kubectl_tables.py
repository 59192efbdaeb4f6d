"""`distsched get` tables (issue 25, item 4) against what kubectl prints for the same
objects: each expected table below is written by hand from kubectl's printers
(k8s.io/kubernetes pkg/printers/internalversion/printers.go) and its tabwriter (columns
padded to the widest cell + 3 spaces, the last cell never padded), with distsched's
documented stand-ins where a kubelet or controller would have written status (a bound pod
is ready; a node without conditions reads Ready).

Every object is created at T0 and the CLI's clock reads T0 + 182 s, so every AGE is
kubectl's ``3m2s``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from distsched.cli import observed
from distsched.controllers.naming import template_hash
from distsched.store import Store
from tests.cli.conftest import DATA, Obj
from tests.cli.manifests import cli_env, invoke
from tests.support.objects import node, pod

pytestmark = pytest.mark.usefixtures("frozen_clock")


def expected(name: str) -> list[str]:
    """The lines of tests/cli/data/kubectl/NAME: a table too wide for this file."""
    return (DATA / name).read_text().split("\n")[:-1]


def lines(redis_url: str, *args: str) -> list[str]:
    result = invoke(redis_url, "get", *args)
    assert result.exit_code == 0, result.output
    return result.stdout.split("\n")[:-1]


def owned_by(obj: Obj, owner: Obj) -> Obj:
    obj["metadata"]["ownerReferences"] = [
        {
            "apiVersion": owner["apiVersion"],
            "kind": owner["kind"],
            "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"],
            "controller": True,
        }
    ]
    return obj


# ----------------------------------------------------------------------------------- time


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (-5, "<invalid>"), (-1, "0s"), (0, "0s"), (119, "119s"), (120, "2m"), (182, "3m2s"),
        (600, "10m"), (10799, "179m"), (3 * 3600, "3h"), (4 * 3600 + 60 * 30, "4h30m"),
        (8 * 3600, "8h"), (47 * 3600, "47h"), (48 * 3600, "2d"), (53 * 3600, "2d5h"),
        (8 * 86400, "8d"), (400 * 86400, "400d"), (731 * 86400, "2y1d"), (9 * 365 * 86400, "9y"),
    ],
)  # fmt: skip
def test_ages_are_kubectl_human_durations(seconds: int, shown: str) -> None:
    assert observed.human_duration(seconds) == shown


# ------------------------------------------------------------------------------------ pods


def pods_of_every_state(store: Store) -> None:
    crashing = pod("crashing", container="a", image="app:1")
    crashing["spec"]["containers"].append({"name": "b", "image": "sidecar:1"})
    crashing["spec"]["nodeName"] = "node-b"
    crashing["status"] = {
        "phase": "Running",
        "podIPs": [{"ip": "10.1.2.3"}],
        "containerStatuses": [
            {"name": "a", "ready": True, "restartCount": 3, "state": {"running": {}}},
            {"name": "b", "ready": False, "restartCount": 0,
             "state": {"waiting": {"reason": "CrashLoopBackOff"}}},
        ],
    }  # fmt: skip
    done = pod("done-1")
    done["status"] = {"phase": "Succeeded"}
    pending = pod("pending-1", readinessGates=[{"conditionType": "example.com/lb"}])
    pending["status"] = {"nominatedNodeName": "node-b"}
    store.create_many(
        [
            crashing,
            done,
            pod("gated-1", schedulingGates=[{"name": "example.com/quota"}]),
            pending,
            pod("web-1"),
            pod("web-2", namespace="prod"),
        ]
    )
    store.bind("default/web-1", None, "node-a")


def test_pods_as_kubectl_get_pods(r: redis.Redis, redis_url: str, store: Store) -> None:
    pods_of_every_state(store)
    assert lines(redis_url, "pods") == [
        "NAME        READY   STATUS             RESTARTS   AGE",
        "crashing    1/2     CrashLoopBackOff   3          3m2s",
        "done-1      0/1     Succeeded          0          3m2s",
        "gated-1     0/1     SchedulingGated    0          3m2s",
        "pending-1   0/1     Pending            0          3m2s",
        "web-1       1/1     Pending            0          3m2s",
    ]


def test_pods_wide_add_ip_node_nominated_node_and_readiness_gates(
    r: redis.Redis, redis_url: str, store: Store
) -> None:
    pods_of_every_state(store)
    assert lines(redis_url, "pods", "-o", "wide") == expected("get-pods-wide.txt")  # fmt: skip


def test_the_current_namespace_and_all_namespaces(
    r: redis.Redis, redis_url: str, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    pods_of_every_state(store)
    assert lines(redis_url, "pods", "-n", "prod") == [
        "NAME    READY   STATUS    RESTARTS   AGE",
        "web-2   0/1     Pending   0          3m2s",
    ]
    monkeypatch.setenv("DISTSCHED_NAMESPACE", "prod")  # kubectl's current namespace
    assert lines(redis_url, "pods")[1].startswith("web-2 ")
    assert lines(
        redis_url, "pods", "-A", "-l", "!nothing", "--field-selector", "spec.nodeName="
    ) == [
        "NAMESPACE   NAME        READY   STATUS            RESTARTS   AGE",
        "default     done-1      0/1     Succeeded         0          3m2s",
        "default     gated-1     0/1     SchedulingGated   0          3m2s",
        "default     pending-1   0/1     Pending           0          3m2s",
        "prod        web-2       0/1     Pending           0          3m2s",
    ]
    empty = invoke(redis_url, "get", "pods", "-n", "nowhere")
    assert empty.exit_code == 0 and empty.stdout == ""
    assert empty.stderr == "No resources found in nowhere namespace.\n"


def test_names_are_never_cut(r: redis.Redis, redis_url: str, store: Store) -> None:
    long = "a-pod-whose-name-is-far-longer-than-eighty-columns-" + "x" * 60
    store.create(pod(long))
    header, row = lines(redis_url, "pods")
    assert row.split() == [long, "0/1", "Pending", "0", "3m2s"]
    assert len(row) > 120 and "…" not in row and header.startswith("NAME" + " " * (len(long) - 1))


# ----------------------------------------------------------------------------------- nodes


def nodes(store: Store) -> None:
    a = node(
        "node-a",
        labels={"node-role.kubernetes.io/control-plane": "", "kubernetes.io/role": "infra"},
    )
    b = node("node-b")
    b["spec"]["unschedulable"] = True
    b["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    b["status"]["nodeInfo"] = {"kubeletVersion": "v1.31.0", "osImage": "Debian GNU/Linux 12"}
    b["status"]["addresses"] = [{"type": "InternalIP", "address": "10.0.0.2"}]
    c = node(
        "node-c",
        taints=[
            {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
            {"key": "spot", "effect": "PreferNoSchedule"},
        ],
    )
    c["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    store.create_many([a, b, c])


def test_nodes_as_kubectl_get_nodes(r: redis.Redis, redis_url: str, store: Store) -> None:
    nodes(store)
    # An empty VERSION is the last cell: the AGE before it keeps its padding, as kubectl's.
    assert lines(redis_url, "nodes") == [
        "NAME     STATUS                     ROLES                 AGE    VERSION",
        "node-a   Ready                      control-plane,infra   3m2s   ",
        "node-b   Ready,SchedulingDisabled   <none>                3m2s   v1.31.0",
        "node-c   NotReady                   <none>                3m2s   ",
    ]
    assert lines(redis_url, "nodes", "-o", "wide") == expected("get-nodes-wide.txt")  # fmt: skip


# ------------------------------------------------------------------------------- workloads

TEMPLATE = {
    "metadata": {"labels": {"app": "web"}},
    "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]},
}


def workloads(store: Store) -> None:
    """A Deployment with a current and an old ReplicaSet, a StatefulSet, a DaemonSet and
    Jobs, with pods as the controllers make them (controller ownerReferences), some bound."""
    (deploy,) = store.create_many(
        [
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "web"},
                "spec": {
                    "replicas": 3,
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": TEMPLATE,
                },
            }
        ]
    )
    current, old = store.create_many(
        [
            owned_by(
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "metadata": {
                        "name": "web-7d4b9c",
                        "labels": {"pod-template-hash": template_hash(TEMPLATE)},
                    },
                    "spec": {"replicas": 3, "template": TEMPLATE},
                },
                deploy,
            ),
            owned_by(
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "metadata": {"name": "web-5f6d8b", "labels": {"pod-template-hash": "5f6d8b"}},
                    "spec": {"replicas": 0, "template": TEMPLATE},
                },
                deploy,
            ),
        ]
    )
    sts, ds, batch, once, done = store.create_many(
        [
            {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "metadata": {"name": "db"},
                "spec": {"replicas": 2, "template": TEMPLATE},
            },
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": {"name": "agent"},
                "spec": {
                    "template": {"spec": {**TEMPLATE["spec"], "nodeSelector": {"disktype": "ssd"}}}
                },
            },
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "batch"},
                "spec": {"completions": 4, "parallelism": 2, "template": TEMPLATE},
            },
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "once"},
                "spec": {"parallelism": 3, "template": TEMPLATE},
            },
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "report"},
                "spec": {"completions": 1, "template": TEMPLATE},
                "status": {
                    "conditions": [{"type": "Complete", "status": "True"}],
                    "succeeded": 1,
                    "startTime": "2023-11-14T22:13:20Z",  # T0
                    "completionTime": "2023-11-14T22:14:05Z",
                },
            },
        ]
    )
    succeeded = owned_by(pod("batch-0"), batch)
    succeeded["status"] = {"phase": "Succeeded"}
    store.create_many(
        [
            owned_by(pod("web-7d4b9c-a"), current),
            owned_by(pod("web-7d4b9c-b"), current),
            owned_by(pod("web-7d4b9c-c"), current),
            owned_by(pod("web-5f6d8b-a"), old),
            owned_by(pod("db-0"), sts),
            owned_by(pod("db-1"), sts),
            owned_by(pod("agent-a"), ds),
            owned_by(pod("agent-b"), ds),
            succeeded,
            owned_by(pod("batch-1"), batch),
        ]
    )
    for name, on in (
        ("web-7d4b9c-a", "n1"), ("web-7d4b9c-b", "n2"), ("web-5f6d8b-a", "n3"),
        ("db-0", "n1"), ("agent-a", "n1"), ("batch-0", "n2"),
    ):  # fmt: skip
        store.bind(f"default/{name}", None, on)
    assert done["metadata"]["name"] == "report" and once["spec"]["parallelism"] == 3


def test_workload_tables_count_their_pods(r: redis.Redis, redis_url: str, store: Store) -> None:
    workloads(store)
    # READY: the bound pods of all its ReplicaSets; UP-TO-DATE: the current one's pods.
    assert lines(redis_url, "deployments") == [
        "NAME   READY   UP-TO-DATE   AVAILABLE   AGE",
        "web    3/3     3            3           3m2s",
    ]
    assert lines(redis_url, "deploy", "-o", "wide") == [
        "NAME   READY   UP-TO-DATE   AVAILABLE   AGE    CONTAINERS   IMAGES       SELECTOR",
        "web    3/3     3            3           3m2s   nginx        nginx:1.27   app=web",
    ]
    assert lines(redis_url, "rs") == [
        "NAME         DESIRED   CURRENT   READY   AGE",
        "web-5f6d8b   0         1         1       3m2s",
        "web-7d4b9c   3         3         2       3m2s",
    ]
    assert lines(redis_url, "sts") == [
        "NAME   READY   AGE",
        "db     1/2     3m2s",
    ]
    assert lines(redis_url, "ds") == [
        "NAME    DESIRED   CURRENT   READY   UP-TO-DATE   AVAILABLE   NODE SELECTOR   AGE",
        "agent   2         1         1       1            1           disktype=ssd    3m2s",
    ]
    # A Job without a controller-written status: its pods say; DURATION from its first pod.
    assert lines(redis_url, "jobs") == [
        "NAME     STATUS     COMPLETIONS   DURATION   AGE",
        "batch    Running    1/4           3m2s       3m2s",
        "once     Running    0/1 of 3                 3m2s",
        "report   Complete   1/1           45s        3m2s",
    ]


def test_several_kinds_print_a_block_each_with_kind_prefixed_names(
    r: redis.Redis, redis_url: str, store: Store
) -> None:
    workloads(store)
    assert lines(redis_url, "deploy,sts", "-A") == [
        "NAMESPACE   NAME                  READY   UP-TO-DATE   AVAILABLE   AGE",
        "default     deployment.apps/web   3/3     3            3           3m2s",
        "",
        "NAMESPACE   NAME                  READY   AGE",
        "default     statefulset.apps/db   1/2     3m2s",
    ]
    blocks = "\n".join(lines(redis_url, "all")).split("\n\n")
    assert [block.split("\n")[1].split()[0] for block in blocks] == [
        "pod/agent-a",
        "daemonset.apps/agent",
        "deployment.apps/web",
        "replicaset.apps/web-5f6d8b",
        "statefulset.apps/db",
        "job.batch/batch",
    ]


# ----------------------------------------------------------------------- the other kinds


def test_pdbs_namespaces_and_priority_classes(r: redis.Redis, redis_url: str, store: Store) -> None:
    store.create_many(
        [
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "web-pdb"},
                "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
                "status": {"disruptionsAllowed": 1},
            },
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "db-pdb"},
                "spec": {"maxUnavailable": "50%", "selector": {"matchLabels": {"app": "db"}}},
            },
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod"}},
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": "old"},
                "status": {"phase": "Terminating"},
            },
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": "high"},
                "value": 1000,
                "globalDefault": True,
                "preemptionPolicy": "Never",
            },
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": "low"},
                "value": -10,
            },
        ]
    )
    assert lines(redis_url, "pdb") == [
        "NAME      MIN AVAILABLE   MAX UNAVAILABLE   ALLOWED DISRUPTIONS   AGE",
        "db-pdb    N/A             50%               0                     3m2s",
        "web-pdb   2               N/A               1                     3m2s",
    ]
    assert lines(redis_url, "ns") == [
        "NAME   STATUS        AGE",
        "old    Terminating   3m2s",
        "prod   Active        3m2s",
    ]
    assert lines(redis_url, "pc") == [
        "NAME   VALUE   GLOBAL-DEFAULT   AGE    PREEMPTIONPOLICY",
        "high   1000    true             3m2s   Never",
        "low    -10     false            3m2s   PreemptLowerPriority",
    ]


def test_kinds_only_stored_print_kubectls_columns(
    r: redis.Redis, redis_url: str, store: Store
) -> None:
    store.create_many(
        [
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "web"},
                "spec": {
                    "selector": {"app": "web"},
                    "ports": [{"port": 80}, {"port": 443, "nodePort": 30443}],
                },
            },
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "conf"},
                "data": {"a": "1", "b": "2"},
            },
            {
                "apiVersion": "example.com/v1",
                "kind": "Widget",
                "metadata": {"name": "w1", "namespace": "default"},
            },
        ]
    )
    assert lines(redis_url, "svc", "-o", "wide") == [
        "NAME   TYPE        CLUSTER-IP   EXTERNAL-IP   PORT(S)                AGE    SELECTOR",
        "web    ClusterIP   <none>       <none>        80/TCP,443:30443/TCP   3m2s   app=web",
    ]
    assert lines(redis_url, "cm") == ["NAME   DATA   AGE", "conf   2      3m2s"]
    assert lines(redis_url, "widgets") == ["NAME   AGE", "w1     3m2s"]


def test_claims_as_kubectl_get_pvc(r: redis.Redis, redis_url: str, store: Store) -> None:
    """printPersistentVolumeClaim: capacity and access modes only once bound to a volume;
    the class from spec.storageClassName, else the beta annotation."""
    store.create_many(
        [
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": "datadir-zk-0"},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "10Gi"}},
                    "storageClassName": "standard",
                },
                "status": {"phase": "Pending"},
            },
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {
                    "name": "logs",
                    "annotations": {"volume.beta.kubernetes.io/storage-class": "slow"},
                },
                "spec": {
                    "accessModes": ["ReadWriteOnce", "ReadOnlyMany"],
                    "resources": {"requests": {"storage": "1Gi"}},
                    "volumeName": "pv-7",
                    "volumeMode": "Filesystem",
                },
                "status": {
                    "phase": "Bound",
                    "accessModes": ["ReadWriteOnce", "ReadOnlyMany"],
                    "capacity": {"storage": "2Gi"},
                },
            },
        ]
    )
    assert lines(redis_url, "pvc", "-o", "wide") == [
        "NAME           STATUS    VOLUME   CAPACITY   ACCESS MODES   STORAGECLASS   "
        "VOLUMEATTRIBUTESCLASS   AGE    VOLUMEMODE",
        "datadir-zk-0   Pending                                      standard       "
        "<unset>                 3m2s   <unset>",
        "logs           Bound     pv-7     2Gi        RWO,ROX        slow           "
        "<unset>                 3m2s   Filesystem",
    ]


def test_volumes_classes_and_csi_nodes_as_kubectl_prints_them(
    r: redis.Redis, redis_url: str, store: Store
) -> None:
    """printPersistentVolume (claim as namespace/name, kube's access-mode order),
    printStorageClass ("(default)", reclaim policy Delete and Immediate binding when
    unset), printCSINode (the number of drivers)."""
    store.create_many(
        [
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": "pv-7"},
                "spec": {
                    "capacity": {"storage": "2Gi"},
                    "accessModes": ["ReadOnlyMany", "ReadWriteOnce"],
                    "persistentVolumeReclaimPolicy": "Retain",
                    "storageClassName": "slow",
                    "claimRef": {"namespace": "default", "name": "logs"},
                    "volumeMode": "Block",
                },
                "status": {"phase": "Bound"},
            },
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": {
                    "name": "standard",
                    "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
                },
                "provisioner": "ebs.csi.aws.com",
            },
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": {"name": "local"},
                "provisioner": "kubernetes.io/no-provisioner",
                "reclaimPolicy": "Retain",
                "volumeBindingMode": "WaitForFirstConsumer",
                "allowVolumeExpansion": True,
            },
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "CSINode",
                "metadata": {"name": "n1"},
                "spec": {"drivers": [{"name": "a"}, {"name": "b"}]},
            },
        ]
    )
    assert lines(redis_url, "pv", "-o", "wide") == [
        "NAME   CAPACITY   ACCESS MODES   RECLAIM POLICY   STATUS   CLAIM          "
        "STORAGECLASS   VOLUMEATTRIBUTESCLASS   REASON   AGE    VOLUMEMODE",
        "pv-7   2Gi        RWO,ROX        Retain           Bound    default/logs   "
        "slow           <unset>                          3m2s   Block",
    ]
    assert lines(redis_url, "sc") == [
        "NAME                 PROVISIONER                    RECLAIMPOLICY   VOLUMEBINDINGMODE"
        "      ALLOWVOLUMEEXPANSION   AGE",
        "local                kubernetes.io/no-provisioner   Retain          WaitForFirstConsumer"
        "   true                   3m2s",
        "standard (default)   ebs.csi.aws.com                Delete          Immediate"
        "              false                  3m2s",
    ]
    assert lines(redis_url, "csinodes") == ["NAME   DRIVERS   AGE", "n1     2         3m2s"]


# --------------------------------------------------------------------- logs and the demo


def test_the_demo_keeps_logs_off_its_table(tmp_path: Path) -> None:
    """`up --demo`: the table and summary on stdout, no log line among them; the roles'
    INFO lines never reach stdout, the progress bar goes to stderr."""
    env = cli_env(HOME=str(tmp_path), TMPDIR=str(tmp_path))
    run = subprocess.run(
        [sys.executable, "-m", "distsched", "up", "--demo", "--workers", "1"],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout.splitlines()
    assert out[0] == "NODE      PODS" and re.fullmatch(r"node-00   \d+", out[1]), run.stdout
    assert not [line for line in out if " INFO " in line or "━" in line], run.stdout
    assert "300/300 schedulable pods bound" in run.stdout
    assert "embedded Redis at" in run.stderr
    assert not list(tmp_path.glob("distsched-demo-*.log")), os.listdir(tmp_path)
