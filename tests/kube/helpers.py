"""Objects and waits for the tests against a real API server."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any, TypeVar

from distsched.kube.client import NODES, PODS, ApiError, KubeClient

Obj = dict[str, Any]
T = TypeVar("T")
PAUSE = "registry.k8s.io/pause:3.10"


def api_node(
    name: str, *, cpu: str = "4", memory: str = "8Gi", pods: str = "110", **labels: str
) -> Obj:
    resources = {"cpu": cpu, "memory": memory, "pods": pods}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


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
    spec: Obj = {
        "containers": [
            {
                "name": "c",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": cpu}},
            }
        ]
    }
    if scheduler:
        spec["schedulerName"] = scheduler
    if node:
        spec["nodeName"] = node
    if priority is not None:
        spec["priority"] = priority
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": spec,
    }


def wait_for(what: str, probe: Callable[[], T | None], timeout_s: float = 20.0) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(0.05)


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
    wait_for("the cluster to be empty", lambda: not kube.list(PODS, namespace=namespace)[0])


def node_of(kube: KubeClient, name: str, namespace: str = "default") -> str:
    try:
        pod = kube.get(PODS, name, namespace)
    except ApiError:
        return ""
    return str((pod.get("spec") or {}).get("nodeName") or "")
