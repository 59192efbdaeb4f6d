"""What of the API server's objects the store keeps, and in what shape.

Kinds: the ones the scheduler and its plugins read (nodes, pods, namespaces, priority
classes, PodDisruptionBudgets, and the volume plugins' claims, volumes, storage classes,
CSINodes, CSIDrivers and CSIStorageCapacities). Objects are kept as the API server
returns them, with ``kind`` and ``apiVersion`` set (list items carry neither), minus
``managedFields`` (the largest part of most objects, never read; kube-scheduler's
informers strip it too) and the API server's ``resourceVersion`` (the store writes its
own).

Pods: those a scheduler must know (kube-scheduler's informers): every assigned pod,
whoever placed it, and the unassigned pods of this deployment's profiles. An unassigned
pod of another scheduler is left out until it is bound. Pods that finished (Succeeded,
Failed) are left out by the watches' field selector, as kube-scheduler's are: one that
finishes leaves the selection, and the watch reports it as deleted.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from distsched.kube.client import (
    CSI_CAPACITIES,
    CSI_DRIVERS,
    CSI_NODES,
    NAMESPACES,
    NODES,
    PDBS,
    PODS,
    PRIORITY_CLASSES,
    PVCS,
    PVS,
    STORAGE_CLASSES,
    Resource,
)

Obj = dict[str, Any]

POD_FIELD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"


@dataclass(frozen=True, slots=True)
class Mirrored:
    kind: str
    api_version: str
    resource: Resource
    field_selector: str = ""


MIRRORED = (
    Mirrored("Node", "v1", NODES),
    Mirrored("Namespace", "v1", NAMESPACES),
    Mirrored("PriorityClass", "scheduling.k8s.io/v1", PRIORITY_CLASSES),
    Mirrored("PodDisruptionBudget", "policy/v1", PDBS),
    Mirrored("StorageClass", "storage.k8s.io/v1", STORAGE_CLASSES),
    Mirrored("CSINode", "storage.k8s.io/v1", CSI_NODES),
    Mirrored("CSIDriver", "storage.k8s.io/v1", CSI_DRIVERS),
    Mirrored("CSIStorageCapacity", "storage.k8s.io/v1", CSI_CAPACITIES),
    Mirrored("PersistentVolume", "v1", PVS),
    Mirrored("PersistentVolumeClaim", "v1", PVCS),
    Mirrored("Pod", "v1", PODS, POD_FIELD_SELECTOR),
)
"""In the order a start lists them: nodes before the pods bound to them, the storage
objects before the pods that use them."""


def store_object(kind: str, api_version: str, obj: Obj) -> Obj:
    """The API object as the store keeps it (a shallow copy: the input is not changed).
    A pod's status keeps what scheduling reads (phase, nominatedNodeName, and of the
    conditions only DisruptionTarget: a victim whose preemption is under way, which
    preemption's eligibility check reads): the rest (other conditions, container
    statuses, IPs) is the kubelet's, changes often and is never read, and writing it
    would wake every worker for nothing."""
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _DROPPED_META}
    out = {**obj, "kind": kind, "apiVersion": api_version, "metadata": meta}
    if kind == "Pod" and "status" in obj:
        status = obj.get("status") or {}
        out["status"] = {k: status[k] for k in _POD_STATUS if k in status}
        kept = [
            c
            for c in status.get("conditions") or ()
            if isinstance(c, dict) and c.get("type") in _POD_CONDITIONS
        ]
        if kept:
            out["status"]["conditions"] = kept
    return out


_DROPPED_META = frozenset({"managedFields", "resourceVersion"})
_POD_STATUS = ("phase", "nominatedNodeName")
_POD_CONDITIONS = frozenset({"DisruptionTarget"})


def wanted(kind: str, obj: Obj, profiles: Collection[str]) -> bool:
    """Whether the store keeps this object: every object of the mirrored kinds but pods
    that are pending for another scheduler, and pending pods being deleted (kube-scheduler
    skips those: "skip schedule deleting pod")."""
    if kind != "Pod":
        return True
    spec = obj.get("spec") or {}
    if spec.get("nodeName"):
        return True
    if (obj.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return spec.get("schedulerName", "default-scheduler") in profiles
