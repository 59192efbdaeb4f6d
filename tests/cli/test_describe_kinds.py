"""``distsched describe`` of workloads, budgets and every other kind (issue 25, item 3),
against kubectl's describers (describe.go) for the same objects: expected texts written
by hand from DeploymentDescriber, ReplicaSetDescriber, StatefulSetDescriber,
DaemonSetDescriber, JobDescriber, PodDisruptionBudgetDescriber and the generic describer
(printUnstructuredContent, smartLabelFor), laid out by the same tabwriter. The workloads
are those of the table tests (their pods as the controllers make them, some bound)."""

from __future__ import annotations

import time

import pytest
import redis

from distsched.cli.describe_kinds import smart_label
from distsched.store import Store
from tests.cli.conftest import T0_MS
from tests.cli.manifests import invoke
from tests.cli.test_kubectl_tables import workloads

pytestmark = pytest.mark.usefixtures("frozen_clock")

CREATED = time.strftime("%a, %d %b %Y %H:%M:%S %z", time.localtime(T0_MS / 1000))


def describe(redis_url: str, *args: str) -> str:
    result = invoke(redis_url, "describe", *args)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_describe_deployment(r: redis.Redis, redis_url: str, store: Store) -> None:
    workloads(store)
    assert describe(redis_url, "deploy", "web") == (
        "Name:                   web\n"
        "Namespace:              default\n"
        f"CreationTimestamp:      {CREATED}\n"
        "Labels:                 <none>\n"
        "Annotations:            <none>\n"
        "Selector:               app=web\n"
        "Replicas:               3 desired | 3 updated | 4 total | 3 available | 0 unavailable\n"
        "StrategyType:           RollingUpdate\n"
        "MinReadySeconds:        0\n"
        "RollingUpdateStrategy:  25% max unavailable, 25% max surge\n"
        "Pod Template:\n"
        "  Labels:  app=web\n"
        "  Containers:\n"
        "   nginx:\n"
        # one tabwriter block down to Events, as kubectl's (it has no line without a tab)
        "    Image:         nginx:1.27\n"
        "    Port:          <none>\n"
        "    Host Port:     <none>\n"
        "    Environment:   <none>\n"
        "    Mounts:        <none>\n"
        "  Volumes:         <none>\n"
        "  Node-Selectors:  <none>\n"
        "  Tolerations:     <none>\n"
        "OldReplicaSets:    web-5f6d8b (1/0 replicas created)\n"
        "NewReplicaSet:     web-7d4b9c (3/3 replicas created)\n"
        "Events:            <none>\n"
    )


def test_describe_replica_set_statefulset_daemonset_and_job(
    r: redis.Redis, redis_url: str, store: Store
) -> None:
    workloads(store)
    rs = describe(redis_url, "rs/web-7d4b9c").splitlines()
    assert rs[:7] == [
        "Name:           web-7d4b9c",
        "Namespace:      default",
        "Selector:       <none>",
        "Labels:         pod-template-hash=" + rs[3].rpartition("=")[2],
        "Annotations:    <none>",
        "Controlled By:  Deployment/web",
        "Replicas:       3 current / 3 desired",
    ]
    assert rs[7] == "Pods Status:    0 Running / 3 Waiting / 0 Succeeded / 0 Failed"

    sts = describe(redis_url, "statefulset", "db").splitlines()
    assert sts[5:10] == [
        "Annotations:        <none>",
        "Replicas:           2 desired | 2 total",
        "Update Strategy:    RollingUpdate",
        "  Partition:        0",
        "Pods Status:        0 Running / 2 Waiting / 0 Succeeded / 0 Failed",
    ]
    assert sts[-2:] == ["Volume Claims:     <none>", "Events:            <none>"]

    ds = describe(redis_url, "ds", "agent").splitlines()
    assert ds[:11] == [
        "Name:           agent",
        "Namespace:      default",
        "Selector:       <none>",
        "Node-Selector:  disktype=ssd",
        "Labels:         <none>",
        "Annotations:    <none>",
        "Desired Number of Nodes Scheduled: 2",
        "Current Number of Nodes Scheduled: 1",
        "Number of Nodes Scheduled with Up-to-date Pods: 1",
        "Number of Nodes Scheduled with Available Pods: 1",
        "Number of Nodes Misscheduled: 0",
    ]
    assert ds[11] == "Pods Status:  0 Running / 2 Waiting / 0 Succeeded / 0 Failed"
    assert "  Node-Selectors:  disktype=ssd" in ds

    job = describe(redis_url, "job", "batch").splitlines()
    assert job[5:11] == [
        "Parallelism:      2",
        "Completions:      4",
        "Completion Mode:  NonIndexed",
        "Suspend:          false",
        "Backoff Limit:    6",
        "Pods Statuses:    1 Active (0 Ready) / 1 Succeeded / 0 Failed",
    ]
    once = describe(redis_url, "job", "once").splitlines()
    assert "Completions:      <unset>" in once


def test_describe_pdb_shows_the_disruption_controllers_status(
    r: redis.Redis, redis_url: str, store: Store
) -> None:
    store.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web-pdb"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
            "status": {
                "disruptionsAllowed": 1,
                "currentHealthy": 3,
                "desiredHealthy": 2,
                "expectedPods": 3,
            },
        }
    )
    assert describe(redis_url, "pdb", "web-pdb") == (
        "Name:           web-pdb\n"
        "Namespace:      default\n"
        "Min available:  2\n"
        "Selector:       app=web\n"
        "Status:\n"
        "    Allowed disruptions:  1\n"
        "    Current:              3\n"
        "    Desired:              2\n"
        "    Total:                3\n"
        "Events:                   <none>\n"
    )


def test_every_other_kind_is_described_by_its_fields(
    r: redis.Redis, redis_url: str, store: Store
) -> None:
    store.create(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {
                "selector": {"app": "web"},
                "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}],
                "publishNotReadyAddresses": False,
            },
        }
    )
    out = describe(redis_url, "svc", "web").splitlines()
    uid = store.get("Service", "default/web")["metadata"]["uid"]
    assert out[:4] == [
        "Name:         web",
        "Namespace:    default",
        "Labels:       app=web",
        "Annotations:  <none>",
    ]
    assert out[4:7] == ["API Version:  v1", "Kind:         Service", "Metadata:"]
    assert f"  UID:                 {uid}" in out
    assert out[out.index("Spec:") :] == [
        "Spec:",
        "  Ports:",
        "    Port:                       80",
        "    Protocol:                   TCP",
        "    Target Port:                8080",
        "  Publish Not Ready Addresses:  false",
        "  Selector:",
        "    App:  web",
        "Events:   <none>",
    ]
    missing = invoke(redis_url, "describe", "svc", "nope")
    assert missing.exit_code == 1
    assert missing.stderr == 'Error from server (NotFound): services "nope" not found\n'


@pytest.mark.parametrize(
    ("field", "label"),
    [
        ("minMember", "Min Member"), ("apiVersion", "API Version"), ("uid", "UID"),
        ("creationTimestamp", "Creation Timestamp"), ("podIPs", "Pod I Ps"),
        ("HTTPServer", "HTTP Server"), ("v1alpha1", "v1alpha1"), ("app.kubernetes.io/name",
        "app.kubernetes.io/name"),
    ],
)  # fmt: skip
def test_smart_labels_split_camel_case_as_kubectl(field: str, label: str) -> None:
    assert smart_label(field) == label


def test_containers_show_command_environment_and_mounts_as_kubectl(
    r: redis.Redis, redis_url: str, store: Store
) -> None:
    web = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "app:2",
                    "command": ["/bin/app"],
                    "args": ["--port", "80"],
                    "envFrom": [{"configMapRef": {"name": "settings"}, "prefix": "APP_"}],
                    "env": [
                        {"name": "MODE", "value": "prod"},
                        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                        {
                            "name": "TOKEN",
                            "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}},
                        },
                    ],
                    "volumeMounts": [
                        {"name": "data", "mountPath": "/data"},
                        {"name": "conf", "mountPath": "/etc/app", "readOnly": True, "subPath": "a"},
                    ],
                }
            ],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data-web"}}],
        },
    }
    store.create(web)
    out = describe(redis_url, "pod", "web").splitlines()
    start = out.index("Containers:")
    assert out[start : start + 19] == [
        "Containers:",
        "  app:",
        "    Image:      app:2",
        "    Port:       <none>",
        "    Host Port:  <none>",
        "    Command:",
        "      /bin/app",
        "    Args:",
        "      --port",
        "      80",
        "    Environment Variables from:",
        "      settings  ConfigMap with prefix 'APP_'  Optional: false",
        "    Environment:",
        "      MODE:   prod",
        "      POD:    web (v1:metadata.name)",
        "      TOKEN:  <set to the key 'token' in secret 'creds'>  Optional: false",
        "    Mounts:",
        "      /data from data (rw)",
        '      /etc/app from conf (ro,path="a")',
    ]
