"""Every kind distsched keeps, with its apiVersion and scope: the one table that manifest
parsing, the store and the CLI read.

A kind has one store (one object per name, or per namespace and name) whatever its
apiVersion. ``API_VERSIONS`` gives each kind's first apiVersion, the one the store writes
when an object states none it accepts; ``ACCEPTED_API_VERSIONS`` lists every apiVersion a
manifest may give, and an object keeps the one it was given (the store checks it here).
Only PodGroup has two: scheduler-plugins' CRD and upstream Kubernetes 1.36's alpha API,
with different spec shapes (see model/podgroups.py).
"""

from __future__ import annotations

from collections.abc import Mapping

POD_GROUP_API_VERSIONS = ("scheduling.x-k8s.io/v1alpha1", "scheduling.k8s.io/v1alpha2")

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
    "PodGroup": POD_GROUP_API_VERSIONS[0],
}
ACCEPTED_API_VERSIONS: Mapping[str, tuple[str, ...]] = {
    kind: POD_GROUP_API_VERSIONS if kind == "PodGroup" else (version,)
    for kind, version in API_VERSIONS.items()
}
ALL_KINDS = tuple(API_VERSIONS)
SCHEDULED_KINDS = ("Pod", "Node")  # what the scheduler reads (model.objects)
OTHER_KINDS = tuple(k for k in ALL_KINDS if k not in SCHEDULED_KINDS)  # workloads, podgroups
WORKLOAD_KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job")  # own pods
CLUSTER_SCOPED = frozenset({"Node", "Namespace", "PriorityClass"})
