"""Small builders and waits for end-to-end tests (Kubernetes-shaped dicts)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import redis

from distsched.keys import Keys
from distsched.store import parse_meta

Obj = dict[str, Any]
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"


def node(name: str, *, cpu: str = "8", memory: str = "16Gi", pods: str = "30", **extra: Any) -> Obj:
    labels = {HOSTNAME: name, **extra.pop("labels", {})}
    spec = {"taints": extra.pop("taints")} if "taints" in extra else {}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods}},
    }


def pod(
    name: str,
    *,
    cpu: str = "100m",
    memory: str = "128Mi",
    labels: dict[str, str] | None = None,
    namespace: str = "default",
    **spec: Any,
) -> Obj:
    container = {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {"containers": [container], **spec},
    }


def bound_nodes(client: redis.Redis, keys: Keys) -> dict[str, str]:
    """ns/name -> node of every bound pod, from the store's meta hash (one HGETALL)."""
    out = {}
    for key, raw in client.hgetall(keys.store_meta("Pod")).items():
        node_name = parse_meta(raw).node
        if node_name:
            out[key.decode()] = node_name
    return out


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> float:
    """Poll until ``condition()``; returns the seconds it took, fails the test on timeout."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout_s:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(0.05)
    return time.monotonic() - start
