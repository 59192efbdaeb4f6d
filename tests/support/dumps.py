"""Cluster dumps in the API server's own shape, for replay tests and measurements: a
``NodeList`` and a ``PodList`` (and a ``PriorityClassList``) whose items carry no
``kind`` nor ``apiVersion``, each object as ``GET /api/v1/pods`` returns it:
managedFields, ownerReferences, status with conditions, container statuses and images,
the API server's defaults (tolerations, dnsPolicy, service account token volume).

Most pods are Running on a node (placed so that no node is over its allocatable), the
rest Pending with kube-scheduler's PodScheduled=False condition; a few pending ones
cannot fit anywhere (bigger than any node). Deterministic for a given ``seed``.

    python -m tests.support.dumps --nodes 5000 --pods 50000 --pending 3000 /tmp/dump
    distsched replay -f /tmp/dump/nodes.json -f /tmp/dump/pods.json -o json
"""

from __future__ import annotations

import argparse
import json
import random
import uuid
import zlib
from pathlib import Path
from typing import Any

Obj = dict[str, Any]
ZONES = ("eu-west-1a", "eu-west-1b", "eu-west-1c")
NODE_CPU_M = 16_000
NODE_MEMORY_MI = 64 * 1024
NODE_PODS = 110
T0 = "2026-11-20T09:12:44Z"
APPS = (  # (app, cpu millicores, memory Mi, with anti-affinity)
    ("web", 250, 512, False),
    ("api", 500, 1024, True),
    ("worker", 1000, 2048, False),
    ("cache", 200, 4096, False),
    ("batch", 2000, 4096, False),
    ("sidecar-heavy", 100, 256, False),
)
HUGE = (64_000, 512 * 1024)  # fits no node


def _uid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _managed(manager: str, subresource: str | None = None) -> list[Obj]:
    entry: Obj = {
        "apiVersion": "v1",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": {"f:labels": {".": {}}}, "f:spec": {}},
        "manager": manager,
        "operation": "Update",
        "time": T0,
    }
    if subresource:
        entry["subresource"] = subresource
    return [entry]


def api_node(i: int, rng: random.Random) -> Obj:
    """Node ``node-<i>`` as the API server returns it inside a NodeList (no kind)."""
    name = f"node-{i:05d}"
    zone = ZONES[i % len(ZONES)]
    ip = f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}"
    resources = {
        "cpu": str(NODE_CPU_M // 1000),
        "ephemeral-storage": "101430960Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": f"{NODE_MEMORY_MI}Mi",
        "pods": str(NODE_PODS),
    }
    conditions = [
        {
            "lastHeartbeatTime": T0,
            "lastTransitionTime": T0,
            "message": message,
            "reason": reason,
            "status": status,
            "type": ctype,
        }
        for ctype, status, reason, message in (
            ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has enough memory"),
            ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has enough PIDs"),
            ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
        )
    ]  # fmt: skip
    images = [
        {"names": [f"registry.example.com/{app}@sha256:{rng.getrandbits(64):016x}",
                   f"registry.example.com/{app}:1.{n}"], "sizeBytes": rng.randrange(10**7, 10**9)}
        for n, (app, *_rest) in enumerate(APPS)
    ]  # fmt: skip
    node: Obj = {
        "metadata": {
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
            "creationTimestamp": T0,
            "labels": {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": "m6i.4xlarge",
                "topology.kubernetes.io/region": "eu-west-1",
                "topology.kubernetes.io/zone": zone,
            },
            "managedFields": _managed("kubelet"),
            "name": name,
            "resourceVersion": str(1000 + i),
            "uid": _uid(rng),
        },
        "spec": {"podCIDR": f"10.244.{i % 256}.0/24", "providerID": f"aws:///{zone}/i-{i:017x}"},
        "status": {
            "addresses": [
                {"address": ip, "type": "InternalIP"},
                {"address": name, "type": "Hostname"},
            ],
            "allocatable": resources,
            "capacity": resources,
            "conditions": conditions,
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "images": images,
            "nodeInfo": {
                "architecture": "amd64",
                "containerRuntimeVersion": "containerd://1.7.22",
                "kernelVersion": "6.1.0-26-amd64",
                "kubeProxyVersion": "v1.31.0",
                "kubeletVersion": "v1.31.0",
                "operatingSystem": "linux",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
            },
        },
    }
    if i % 50 == 49:  # a few dedicated nodes
        node["spec"]["taints"] = [{"effect": "NoSchedule", "key": "dedicated", "value": "gpu"}]
    return node


def api_pod(
    app: str, n: int, cpu_m: int, memory_mi: int, anti: bool, node: str | None, rng: random.Random
) -> Obj:
    """One pod of Deployment ``app`` as the API server returns it inside a PodList; bound
    to ``node`` (Running) or pending (None)."""
    namespace = f"team-{n % 7}"
    rs_hash = f"{zlib.crc32(app.encode()):010d}"
    name = f"{app}-{rs_hash}-{n:06d}"
    labels = {"app": app, "pod-template-hash": rs_hash}
    spec: Obj = {
        "containers": [
            {
                "env": [{"name": "LOG_LEVEL", "value": "info"}],
                "image": f"registry.example.com/{app}:1.{n % 5}",
                "imagePullPolicy": "IfNotPresent",
                "livenessProbe": {
                    "failureThreshold": 3,
                    "httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
                    "periodSeconds": 10,
                    "successThreshold": 1,
                    "timeoutSeconds": 1,
                },
                "name": app,
                "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
                "resources": {
                    "limits": {"memory": f"{memory_mi}Mi"},
                    "requests": {"cpu": f"{cpu_m}m", "memory": f"{memory_mi}Mi"},
                },
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "volumeMounts": [
                    {
                        "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                        "name": f"kube-api-access-{n % 100000:05d}",
                        "readOnly": True,
                    }
                ],
            }
        ],
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": 0,
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "serviceAccount": "default",
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": 30,
        "tolerations": [
            {"effect": "NoExecute", "key": "node.kubernetes.io/not-ready",
             "operator": "Exists", "tolerationSeconds": 300},
            {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable",
             "operator": "Exists", "tolerationSeconds": 300},
        ],
        "volumes": [
            {
                "name": f"kube-api-access-{n % 100000:05d}",
                "projected": {
                    "defaultMode": 420,
                    "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {"configMap": {"items": [{"key": "ca.crt", "path": "ca.crt"}],
                                       "name": "kube-root-ca.crt"}},
                    ],
                },
            }
        ],
    }  # fmt: skip
    if anti:
        spec["affinity"] = {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "podAffinityTerm": {
                            "labelSelector": {"matchLabels": {"app": app}},
                            "topologyKey": "kubernetes.io/hostname",
                        },
                        "weight": 100,
                    }
                ]
            }
        }
    metadata: Obj = {
        "creationTimestamp": T0,
        "generateName": f"{app}-{rs_hash}-",
        "labels": labels,
        "managedFields": _managed("kube-controller-manager"),
        "name": name,
        "namespace": namespace,
        "ownerReferences": [
            {
                "apiVersion": "apps/v1",
                "blockOwnerDeletion": True,
                "controller": True,
                "kind": "ReplicaSet",
                "name": f"{app}-{rs_hash}",
                "uid": _uid(rng),
            }
        ],
        "resourceVersion": str(100_000 + n),
        "uid": _uid(rng),
    }
    if node is None:
        status: Obj = {
            "conditions": [
                {
                    "lastProbeTime": None,
                    "lastTransitionTime": T0,
                    "message": "0/5000 nodes are available: 5000 Insufficient cpu.",
                    "reason": "Unschedulable",
                    "status": "False",
                    "type": "PodScheduled",
                }
            ],
            "phase": "Pending",
            "qosClass": "Burstable",
        }
        return {"metadata": metadata, "spec": spec, "status": status}
    spec["nodeName"] = node
    status = {
        "conditions": [
            {"lastProbeTime": None, "lastTransitionTime": T0, "status": "True", "type": ctype}
            for ctype in ("PodReadyToStartContainers", "Initialized", "Ready",
                          "ContainersReady", "PodScheduled")
        ],
        "containerStatuses": [
            {
                "containerID": f"containerd://{rng.getrandbits(64):016x}",
                "image": f"registry.example.com/{app}:1.{n % 5}",
                "imageID": f"registry.example.com/{app}@sha256:{rng.getrandbits(64):016x}",
                "lastState": {},
                "name": app,
                "ready": True,
                "restartCount": 0,
                "started": True,
                "state": {"running": {"startedAt": T0}},
            }
        ],
        "hostIP": "10.0.0.1",
        "phase": "Running",
        "podIP": f"10.244.{n // 256 % 256}.{n % 256}",
        "podIPs": [{"ip": f"10.244.{n // 256 % 256}.{n % 256}"}],
        "qosClass": "Burstable",
        "startTime": T0,
    }  # fmt: skip
    return {"metadata": metadata, "spec": spec, "status": status}


def api_server_dump(
    nodes: int, pods: int, pending: int, *, huge: int = 0, seed: int = 1
) -> tuple[Obj, Obj]:
    """(NodeList, PodList) of ``nodes`` nodes and ``pods`` pods, ``pending`` of them
    unbound (``huge`` of those fit no node); bound pods never overfill a node."""
    rng = random.Random(seed)
    node_items = [api_node(i, rng) for i in range(nodes)]
    free = [[NODE_CPU_M, NODE_MEMORY_MI, NODE_PODS] for _ in range(nodes)]
    pod_items = []
    cursor = 0
    for n in range(pods):
        app, cpu_m, memory_mi, anti = APPS[n % len(APPS)]
        if n >= pods - huge:
            cpu_m, memory_mi = HUGE
        placed = None
        if n < pods - pending:
            for step in range(nodes):
                i = (cursor + step) % nodes
                room = free[i]
                if room[0] >= cpu_m and room[1] >= memory_mi and room[2] >= 1 and i % 50 != 49:
                    room[0] -= cpu_m
                    room[1] -= memory_mi
                    room[2] -= 1
                    placed = node_items[i]["metadata"]["name"]
                    cursor = i + 1
                    break
        pod_items.append(api_pod(app, n, cpu_m, memory_mi, anti, placed, rng))
    meta = {"resourceVersion": "999999"}
    return (
        {"apiVersion": "v1", "kind": "NodeList", "metadata": meta, "items": node_items},
        {"apiVersion": "v1", "kind": "PodList", "metadata": meta, "items": pod_items},
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=50_000)
    parser.add_argument("--pending", type=int, default=3000)
    parser.add_argument("--huge", type=int, default=20)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    node_list, pod_list = api_server_dump(args.nodes, args.pods, args.pending, huge=args.huge)
    (args.out / "nodes.json").write_text(json.dumps(node_list, indent=4))
    (args.out / "pods.json").write_text(json.dumps(pod_list, indent=4))


if __name__ == "__main__":
    main()
