"""Objects and waits for the tests against a real API server."""

from __future__ import annotations

import contextlib
from typing import Any

from distsched.kube.client import NODES, PODS, PVCS, PVS, STORAGE_CLASSES, ApiError, KubeClient
from tests.support import objects
from tests.support.waits import wait_for

Obj = dict[str, Any]
PAUSE = "registry.k8s.io/pause:3.10"


def api_node(
    name: str, *, cpu: str = "4", memory: str = "8Gi", pods: str = "110", **labels: str
) -> Obj:
    """A ready node as a kubelet registers it (capacity = allocatable)."""
    obj = objects.node(name, cpu=cpu, memory=memory, pods=pods, labels=labels)
    resources = obj["status"]["allocatable"]
    ready = [{"type": "Ready", "status": "True"}]
    return {**obj, "status": {"capacity": resources, "allocatable": resources, "conditions": ready}}


def api_pod(
    name: str,
    *,
    namespace: str = "default",
    cpu: str = "100m",
    scheduler: str | None = None,
    node: str | None = None,
    labels: dict[str, str] | None = None,
    priority: int | None = None,
) -> Obj:
    """A pause pod requesting ``cpu`` (no memory)."""
    spec = {"schedulerName": scheduler, "nodeName": node, "priority": priority}
    return objects.pod(
        name,
        cpu=cpu,
        memory=None,
        labels=labels,
        namespace=namespace,
        image=PAUSE,
        **{k: v for k, v in spec.items() if v is not None and v != ""},
    )


def clean(kube: KubeClient, namespace: str = "default") -> None:
    """Delete every pod of the namespace and every node (between tests)."""
    pods, _ = kube.list(PODS, namespace=namespace)
    for pod in pods:
        with contextlib.suppress(ApiError):
            kube.delete(PODS, pod["metadata"]["name"], namespace, grace_period_s=0)
    nodes, _ = kube.list(NODES)
    for node in nodes:
        with contextlib.suppress(ApiError):
            kube.delete(NODES, node["metadata"]["name"])
    claims, _ = kube.list(PVCS, namespace=namespace)
    for claim in claims:
        with contextlib.suppress(ApiError):
            kube.delete(PVCS, claim["metadata"]["name"], namespace)
    for resource in (PVS, STORAGE_CLASSES):
        objs, _ = kube.list(resource)
        for obj in objs:
            with contextlib.suppress(ApiError):
                kube.delete(resource, obj["metadata"]["name"])
    wait_for("the cluster to be empty", lambda: not kube.list(PODS, namespace=namespace)[0], 20)


def node_of(kube: KubeClient, name: str, namespace: str = "default") -> str:
    try:
        pod = kube.get(PODS, name, namespace)
    except ApiError:
        return ""
    return str((pod.get("spec") or {}).get("nodeName") or "")
