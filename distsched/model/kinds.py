"""Every kind distsched keeps, with its apiVersion and scope: the one table that manifest
parsing, the store and the CLI read."""

from __future__ import annotations

from collections.abc import Mapping

API_VERSIONS: Mapping[str, str] = {
    "Pod": "v1",
    "Node": "v1",
    "Namespace": "v1",
    "PriorityClass": "scheduling.k8s.io/v1",
    "PodDisruptionBudget": "policy/v1",
    "Deployment": "apps/v1",
    "ReplicaSet": "apps/v1",
    "StatefulSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "Job": "batch/v1",
}
ALL_KINDS = tuple(API_VERSIONS)
SCHEDULED_KINDS = ("Pod", "Node")  # what the scheduler reads (model.objects)
OTHER_KINDS = tuple(k for k in ALL_KINDS if k not in SCHEDULED_KINDS)  # model.workloads
WORKLOAD_KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job")  # own pods
CLUSTER_SCOPED = frozenset({"Node", "Namespace", "PriorityClass"})
