"""Kubernetes-shaped dicts, as a manifest has them: nodes and pods."""

from __future__ import annotations

from typing import Any

from distsched.model import LABEL_HOSTNAME

Obj = dict[str, Any]
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = LABEL_HOSTNAME


def node(
    name: str,
    *,
    cpu: str = "8",
    memory: str = "16Gi",
    pods: str = "30",
    labels: dict[str, str] | None = None,
    taints: list[Obj] | None = None,
) -> Obj:
    """A node with the hostname label (and ``labels``), allocatable cpu, memory and pods,
    and ``spec.taints`` when ``taints`` is given."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {HOSTNAME: name, **(labels or {})}},
        "spec": {"taints": taints} if taints is not None else {},
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods}},
    }


def pod(
    name: str,
    *,
    cpu: str | None = "100m",
    memory: str | None = "128Mi",
    labels: dict[str, str] | None = None,
    namespace: str = "default",
    container: str = "c",
    image: str | None = None,
    **spec: Any,
) -> Obj:
    """A pod of one container requesting ``cpu`` and ``memory`` (None: not requested;
    neither: no resources at all); ``spec`` keys (camelCase) go into its spec."""
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    main: Obj = {"name": container, **({"image": image} if image else {})}
    main["resources"] = {"requests": requests} if requests else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {"containers": [main], **spec},
    }


def zone_spread(name: str) -> Obj:
    """A pod app=web whose topology spread over zones is hard (maxSkew 1)."""
    obj = pod(name, labels={"app": "web"})
    obj["spec"]["topologySpreadConstraints"] = [
        {
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}},
        }
    ]
    return obj
