"""Every kind distsched keeps, with its apiVersion and scope: the one table that manifest
parsing, the store and the CLI read.

**The kinds distsched acts on** (``ALL_KINDS``): a kind has one store (one object per
name, or per namespace and name) whatever its apiVersion. ``API_VERSIONS`` gives each
kind's first apiVersion, the one the store writes when an object states none it accepts;
``ACCEPTED_API_VERSIONS`` lists every apiVersion a manifest may give, and an object keeps
the one it was given (the store checks it here). Only PodGroup has two: scheduler-plugins'
CRD and upstream Kubernetes 1.36's alpha API, with different spec shapes (see
model/podgroups.py).

**Every other kind** is kept as given (model/generic.py), in a store of its own named by
:func:`store_kind`: the Kind for the API groups kube-apiserver serves itself (``Service``,
``ConfigMap``, ``ClusterRole``), ``Kind.group`` for custom resources
(``Certificate.cert-manager.io``: kubectl's name for them, and two groups may define the
same Kind, as Knative's ``Service`` or Istio's and the Gateway API's ``Gateway`` do).

``SERVED`` is what a Kubernetes 1.34 API server serves, alpha and beta versions included
(a cluster may enable them); a group in it (or one kube removed whole, ``extensions``)
serves nothing else, so ``policy/v1beta1`` PodDisruptionBudget or ``extensions/v1beta1``
Ingress are refused as kube refuses them ("no matches for kind ... in version ...").
A custom group serves whatever its CustomResourceDefinition says: any well-formed
apiVersion is taken. Scope: ``CLUSTER_SCOPED`` lists the built-in cluster-scoped kinds; a
custom resource takes its CustomResourceDefinition's ``spec.scope`` when distsched has
seen it (model/manifest.py) and is namespaced otherwise.
"""

from __future__ import annotations

import re
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
ALL_KINDS = tuple(API_VERSIONS)  # the kinds distsched acts on
SCHEDULED_KINDS = ("Pod", "Node")  # what the scheduler reads (model.objects)
OTHER_KINDS = tuple(k for k in ALL_KINDS if k not in SCHEDULED_KINDS)  # workloads, podgroups
WORKLOAD_KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job")  # own pods

_ADMISSION = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
_MUTATING = ("MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding")
_DRA = ("DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice")
SERVED: Mapping[str, tuple[str, ...]] = {
    "v1": (
        "Pod", "Node", "Namespace", "Service", "ServiceAccount", "ConfigMap", "Secret",
        "PersistentVolume", "PersistentVolumeClaim", "Endpoints", "Event", "LimitRange",
        "ResourceQuota", "ReplicationController", "PodTemplate", "Binding", "ComponentStatus",
    ),
    "apps/v1": ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "ControllerRevision"),
    "batch/v1": ("Job", "CronJob"),
    "autoscaling/v2": ("HorizontalPodAutoscaler",),
    "autoscaling/v1": ("HorizontalPodAutoscaler",),
    "policy/v1": ("PodDisruptionBudget", "Eviction"),
    "rbac.authorization.k8s.io/v1": ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"),
    "networking.k8s.io/v1": (
        "NetworkPolicy", "Ingress", "IngressClass", "IPAddress", "ServiceCIDR",
    ),
    "networking.k8s.io/v1beta1": ("IPAddress", "ServiceCIDR"),
    "storage.k8s.io/v1": (
        "StorageClass", "VolumeAttachment", "CSIDriver", "CSINode", "CSIStorageCapacity",
        "VolumeAttributesClass",
    ),
    "storage.k8s.io/v1beta1": ("VolumeAttributesClass",),
    "storage.k8s.io/v1alpha1": ("VolumeAttributesClass",),
    "storagemigration.k8s.io/v1alpha1": ("StorageVersionMigration",),
    "apiextensions.k8s.io/v1": ("CustomResourceDefinition",),
    "apiregistration.k8s.io/v1": ("APIService",),
    "admissionregistration.k8s.io/v1": (
        "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", *_ADMISSION,
    ),
    "admissionregistration.k8s.io/v1beta1": (*_ADMISSION, *_MUTATING),
    "admissionregistration.k8s.io/v1alpha1": (*_ADMISSION, *_MUTATING),
    "scheduling.k8s.io/v1": ("PriorityClass",),
    "scheduling.k8s.io/v1alpha1": ("Workload",),
    "scheduling.k8s.io/v1alpha2": ("PodGroup", "Workload"),
    "node.k8s.io/v1": ("RuntimeClass",),
    "coordination.k8s.io/v1": ("Lease",),
    "coordination.k8s.io/v1beta1": ("LeaseCandidate",),
    "coordination.k8s.io/v1alpha2": ("LeaseCandidate",),
    "discovery.k8s.io/v1": ("EndpointSlice",),
    "events.k8s.io/v1": ("Event",),
    "certificates.k8s.io/v1": ("CertificateSigningRequest",),
    "certificates.k8s.io/v1beta1": ("ClusterTrustBundle",),
    "certificates.k8s.io/v1alpha1": ("ClusterTrustBundle", "PodCertificateRequest"),
    "flowcontrol.apiserver.k8s.io/v1": ("FlowSchema", "PriorityLevelConfiguration"),
    "authentication.k8s.io/v1": ("TokenReview", "SelfSubjectReview", "TokenRequest"),
    "authorization.k8s.io/v1": (
        "SubjectAccessReview", "SelfSubjectAccessReview", "LocalSubjectAccessReview",
        "SelfSubjectRulesReview",
    ),
    "resource.k8s.io/v1": _DRA,
    "resource.k8s.io/v1beta2": _DRA,
    "resource.k8s.io/v1beta1": _DRA,
    "resource.k8s.io/v1alpha3": ("DeviceTaintRule",),
    "internal.apiserver.k8s.io/v1alpha1": ("StorageVersion",),
}  # fmt: skip
REMOVED_GROUPS = frozenset({"extensions", "settings.k8s.io", "core"})
"""Groups kube served once and serves no more (``core`` never was one: core is ``v1``)."""

CLUSTER_SCOPED = frozenset({
    "Node", "Namespace", "PriorityClass", "PersistentVolume", "ComponentStatus",
    "StorageClass", "VolumeAttachment", "CSIDriver", "CSINode", "VolumeAttributesClass",
    "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "APIService",
    "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", *_ADMISSION, *_MUTATING,
    "IngressClass", "IPAddress", "ServiceCIDR", "RuntimeClass", "CertificateSigningRequest",
    "ClusterTrustBundle", "FlowSchema", "PriorityLevelConfiguration", "TokenReview",
    "SelfSubjectReview", "SubjectAccessReview", "SelfSubjectAccessReview",
    "SelfSubjectRulesReview", "DeviceClass", "ResourceSlice", "DeviceTaintRule",
    "StorageVersion", "StorageVersionMigration",
})  # fmt: skip
"""The built-in cluster-scoped kinds (every other built-in kind is namespaced)."""

SHORT_NAMES: Mapping[str, tuple[str, ...]] = {
    "Service": ("svc",), "ServiceAccount": ("sa",), "ConfigMap": ("cm",),
    "PersistentVolume": ("pv",), "PersistentVolumeClaim": ("pvc",), "Endpoints": ("ep",),
    "Event": ("ev",), "LimitRange": ("limits",), "ResourceQuota": ("quota",),
    "ReplicationController": ("rc",), "ComponentStatus": ("cs",), "CronJob": ("cj",),
    "HorizontalPodAutoscaler": ("hpa",), "NetworkPolicy": ("netpol",), "Ingress": ("ing",),
    "StorageClass": ("sc",), "CustomResourceDefinition": ("crd", "crds"),
    "CertificateSigningRequest": ("csr",), "PriorityLevelConfiguration": ("plc",),
    "FlowSchema": ("fs",),
}  # fmt: skip
"""kubectl's short names of the built-in kinds distsched only stores."""

SERVED_AS: Mapping[str, str] = {
    kind: version
    for version, kinds in reversed(list(SERVED.items()))
    for kind in kinds
    if "alpha" not in version and "beta" not in version
}
"""The preferred GA apiVersion of each built-in kind (the first in ``SERVED``): the hint
of a "no matches" refusal."""

_KIND_RE = re.compile(r"[A-Za-z]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?")
_VERSION_RE = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
_GROUP_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_BUILTIN_GROUPS = frozenset(v.rpartition("/")[0] for v in SERVED) | REMOVED_GROUPS
_OWN_GROUPS: Mapping[str, frozenset[str]] = {
    kind: frozenset(v.rpartition("/")[0] for v in versions)
    for kind, versions in ACCEPTED_API_VERSIONS.items()
}


def group_of(api_version: str) -> str:
    """``apps`` of ``apps/v1``; ``""`` (core) of ``v1``."""
    return api_version.rpartition("/")[0]


def is_builtin_group(group: str) -> bool:
    return group in _BUILTIN_GROUPS


def kind_syntax(kind: str) -> str | None:
    """Why ``kind`` cannot be an object kind, or None (kube: a DNS-1035 label once
    lowercased; CamelCase by convention)."""
    if _KIND_RE.fullmatch(kind) is None:
        return "must be a letter, then letters, digits or '-' (at most 63 characters)"
    return None


def api_version_syntax(api_version: str) -> str | None:
    """Why ``api_version`` is not ``VERSION`` or ``GROUP/VERSION``, or None."""
    group, slash, version = api_version.rpartition("/")
    if _VERSION_RE.fullmatch(version) is None or (
        slash and (len(group) > 253 or _GROUP_RE.fullmatch(group) is None)
    ):
        return "must be VERSION or GROUP/VERSION (v1, apps/v1, example.com/v1alpha1)"
    return None


def unserved(kind: str, api_version: str) -> str | None:
    """kube's refusal of ``kind`` at ``api_version`` when a built-in group does not serve
    it there (a removed version, a kind of another group), else None."""
    group = group_of(api_version)
    if not is_builtin_group(group) or kind in SERVED.get(api_version, ()):
        return None
    reason = f'no matches for kind "{kind}" in version "{api_version}"'
    served = SERVED_AS.get(kind)
    if kind in ACCEPTED_API_VERSIONS:
        served = " or ".join(f'"{v}"' for v in ACCEPTED_API_VERSIONS[kind])
        return f"{reason} (the API server serves {kind} as {served})"
    if served is not None:
        return f'{reason} (the API server serves {kind} as "{served}")'
    return reason


def store_kind(kind: str, api_version: str) -> str:
    """The store an object of ``kind`` at ``api_version`` lives in: the kind itself for
    the kinds distsched acts on and for built-in API groups, ``Kind.group`` for custom
    resources."""
    group = group_of(api_version)
    if is_builtin_group(group) or group in _OWN_GROUPS.get(kind, ()):
        return kind
    return f"{kind}.{group}"


def store_kind_syntax(stored: str) -> str | None:
    """Why ``stored`` cannot be a store kind (``Kind`` or ``Kind.group``), or None."""
    kind, dot, group = stored.partition(".")
    if kind_syntax(kind) is not None or (dot and _GROUP_RE.fullmatch(group) is None):
        return "must be Kind or Kind.group (Pod, Service, Certificate.cert-manager.io)"
    return None


def object_kind(stored: str) -> str:
    """The object's ``kind`` of a store kind (``Certificate`` of
    ``Certificate.cert-manager.io``)."""
    return stored.partition(".")[0]


def is_cluster_scoped(stored: str, namespace: str | None = None) -> bool:
    """Whether objects of store kind ``stored`` are cluster-scoped. For a custom kind
    (whose scope the store does not know) the object's own ``namespace`` says it: the
    manifest loader fills it in from the kind's CustomResourceDefinition."""
    if "." not in stored:
        return stored in CLUSTER_SCOPED
    return not namespace


def plural(kind: str) -> str:
    """kubectl's resource name of a kind: ``services``, ``ingresses``, ``networkpolicies``."""
    lower = kind.lower()
    if lower.endswith(("s", "x", "z", "ch", "sh")):
        return lower if lower.endswith("endpoints") else lower + "es"
    if lower.endswith("y") and lower[-2:-1] not in "aeiou":
        return lower[:-1] + "ies"
    return lower + "s"
