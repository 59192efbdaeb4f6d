"""Object kinds as ``distsched get`` / ``delete`` name them (kubectl's names, plurals and
short names), and the table rows of ``get`` for each kind."""

from __future__ import annotations

from typing import Any

from distsched.store.codec import ALL_KINDS, CLUSTER_SCOPED

_ALIASES: dict[str, tuple[str, ...]] = {
    "Pod": ("pod", "pods", "po"),
    "Node": ("node", "nodes", "no"),
    "Namespace": ("namespace", "namespaces", "ns"),
    "PriorityClass": ("priorityclass", "priorityclasses", "pc"),
    "PodDisruptionBudget": ("poddisruptionbudget", "poddisruptionbudgets", "pdb"),
    "Deployment": ("deployment", "deployments", "deploy"),
    "ReplicaSet": ("replicaset", "replicasets", "rs"),
    "StatefulSet": ("statefulset", "statefulsets", "sts"),
    "DaemonSet": ("daemonset", "daemonsets", "ds"),
    "Job": ("job", "jobs"),
}
KIND_BY_NAME = {alias: kind for kind, aliases in _ALIASES.items() for alias in aliases}
assert set(_ALIASES) == set(ALL_KINDS)


def parse_kinds(text: str) -> list[str]:
    """``pods,nodes`` -> ["Pod", "Node"]; ValueError naming an unknown kind."""
    kinds: list[str] = []
    for part in text.split(","):
        kind = KIND_BY_NAME.get(part.strip().lower())
        if kind is None:
            known = ", ".join(a[1] for a in _ALIASES.values())
            raise ValueError(f"unknown kind {part!r}: one of {known}")
        if kind not in kinds:
            kinds.append(kind)
    return kinds


def object_key(kind: str, name: str, namespace: str) -> str:
    return name if kind in CLUSTER_SCOPED else f"{namespace}/{name}"


def headers(kind: str) -> list[str]:
    if kind == "Pod":
        return ["NAMESPACE", "NAME", "NODE", "PRIORITY"]
    if kind == "Node":
        return ["NAME", "STATUS", "CPU", "MEMORY"]
    if kind == "Namespace":
        return ["NAME", "LABELS"]
    if kind == "PriorityClass":
        return ["NAME", "VALUE", "GLOBAL-DEFAULT", "PREEMPTION"]
    if kind == "PodDisruptionBudget":
        return ["NAMESPACE", "NAME", "MIN AVAILABLE", "MAX UNAVAILABLE"]
    return ["NAMESPACE", "NAME", "DESIRED"]


def row(kind: str, o: dict[str, Any]) -> tuple[Any, ...]:
    meta, spec = o["metadata"], o.get("spec") or {}
    if kind == "Pod":
        return (
            meta.get("namespace", ""),
            meta["name"],
            spec.get("nodeName", "") or "<pending>",
            spec.get("priority", 0) or 0,
        )
    if kind == "Node":
        return (
            meta["name"],
            "SchedulingDisabled" if spec.get("unschedulable") else "Ready",
            o.get("status", {}).get("allocatable", {}).get("cpu", ""),
            o.get("status", {}).get("allocatable", {}).get("memory", ""),
        )
    if kind == "Namespace":
        labels = meta.get("labels") or {}
        return (meta["name"], ",".join(f"{k}={v}" for k, v in sorted(labels.items())))
    if kind == "PriorityClass":
        return (
            meta["name"],
            o.get("value", 0),
            bool(o.get("globalDefault")),
            o.get("preemptionPolicy") or "PreemptLowerPriority",
        )
    if kind == "PodDisruptionBudget":
        return (
            meta.get("namespace", ""),
            meta["name"],
            spec.get("minAvailable", "N/A"),
            spec.get("maxUnavailable", "N/A"),
        )
    if kind == "Job":
        desired: Any = spec.get("parallelism", 1)
    elif kind == "DaemonSet":
        desired = "per node"
    else:
        desired = spec.get("replicas", 1)
    return (meta.get("namespace", ""), meta["name"], desired)
