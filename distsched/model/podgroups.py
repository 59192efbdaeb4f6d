"""PodGroups: the groups of pods that gang scheduling admits all together or not at all.

Two APIs define them, both accepted under the one store kind "PodGroup" (a name is one
object per namespace whatever its apiVersion; the object keeps the apiVersion it was
given):

- scheduler-plugins' CRD ``scheduling.x-k8s.io/v1alpha1`` (apis/scheduling/v1alpha1 in
  kubernetes-sigs/scheduler-plugins): ``spec.minMember`` (>= 1, required here: the CRD's
  minimum is 1 and a group without it has no gang to admit), ``spec.minResources`` (a
  ResourceList), ``spec.scheduleTimeoutSeconds``. Pods join with the label
  ``scheduling.x-k8s.io/pod-group: NAME``.
- Kubernetes 1.36's ``scheduling.k8s.io/v1alpha2`` (GenericWorkload feature gate):
  ``spec.schedulingPolicy`` holds exactly one of ``basic: {}`` (no gang: min_member 1)
  and ``gang: {minCount: N}`` (N >= 1). Pods join with ``spec.schedulingGroup.podGroupName``.
  Its other fields (podGroupTemplateRef, schedulingConstraints, priority, ...) are kept
  as given and not read.

A pod naming a group in both ways belongs to the one its ``spec.schedulingGroup`` names
(the field kube-scheduler reads; it is immutable, a label is not). A group's members are
the pods of its namespace that name it; the group object need not exist first.

:func:`podgroup_status` computes, from the pods, the status scheduler-plugins' PodGroup
controller keeps (pkg/controllers/podgroup_controller.go), at read time instead of in a
controller.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from distsched.model.decode_common import decode_meta, decode_resource_list
from distsched.model.errors import ManifestError
from distsched.model.fields import Fields, expect_object, quote
from distsched.model.kinds import POD_GROUP_API_VERSIONS
from distsched.model.objects import DEFAULT_NAMESPACE, ObjectMeta, Pod

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
SCHEDULER_PLUGINS_API_VERSION, KUBE_API_VERSION = POD_GROUP_API_VERSIONS
MAX_MIN_MEMBER = 1_000
"""The largest minMember / minCount accepted (both APIs allow any int32): a gang's minimum
is reserved in one ledger script call, which takes at most 1,000 decisions (members beyond
the minimum are not limited)."""

PENDING = "Pending"  # fewer than minMember pods exist
SCHEDULING = "Scheduling"  # enough pods exist, fewer than minMember placed
SCHEDULED = "Scheduled"  # >= minMember placed (spec.nodeName), fewer running
RUNNING = "Running"  # >= minMember running or succeeded
FAILED = "Failed"  # some failed, and failed + running + succeeded >= minMember
FINISHED = "Finished"  # >= minMember succeeded


@dataclass(frozen=True, slots=True)
class PodGroup:
    namespace: str
    name: str
    min_member: int  # scheduler-plugins spec.minMember / upstream's gang minCount; >= 1
    min_resources: Mapping[str, int]  # canonical units (model/quantity.py); {} when absent
    schedule_timeout_s: int | None  # spec.scheduleTimeoutSeconds (None when absent)
    api_version: str
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """The object's JSON as given (metadata.namespace filled in): what ``to_dict`` stores."""
    kind = "PodGroup"

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def metadata(self) -> ObjectMeta:
        meta = self.raw.get("metadata") or {}
        return ObjectMeta(
            name=self.name,
            namespace=self.namespace,
            uid=str(meta.get("uid") or ""),
            labels=dict(meta.get("labels") or {}),
            annotations=dict(meta.get("annotations") or {}),
            creation_timestamp=str(meta.get("creationTimestamp") or ""),
            resource_version=str(meta.get("resourceVersion") or ""),
        )

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> PodGroup:
        """Decode and validate a PodGroup of either apiVersion (ManifestError naming the
        field on bad input)."""
        return podgroup_from_dict(obj)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.raw)


def podgroup_from_dict(data: Any) -> PodGroup:
    try:
        root = expect_object(data, "")
        found = root.get_str("kind")
        if found and found != "PodGroup":
            root.fail("kind", f'expected "PodGroup", got {quote(found)}')
        api_version = root.get_str("apiVersion", required=True)
        if api_version not in POD_GROUP_API_VERSIONS:
            supported = " or ".join(quote(v) for v in POD_GROUP_API_VERSIONS)
            root.fail(
                "apiVersion",
                f"unsupported apiVersion {quote(api_version)} for PodGroup: expected {supported}",
            )
        meta_fields = root.get_obj("metadata", required=True)
        assert meta_fields is not None
        meta = decode_meta(meta_fields, namespaced=True)
        spec = root.get_obj("spec", required=True)
        assert spec is not None
        min_resources: dict[str, int] = {}
        timeout: int | None = None
        if api_version == SCHEDULER_PLUGINS_API_VERSION:
            min_member = spec.get_int("minMember", low=1, high=MAX_MIN_MEMBER, required=True)
            min_resources = decode_resource_list(spec, "minResources", container=False)
            timeout = spec.get_int("scheduleTimeoutSeconds", low=0)
        else:
            min_member = _kube_min_count(spec)
        assert min_member is not None
        raw = copy.deepcopy(dict(data))
        raw.setdefault("metadata", {})["namespace"] = meta.namespace
        raw["kind"] = "PodGroup"
        return PodGroup(
            namespace=meta.namespace,
            name=meta.name,
            min_member=min_member,
            min_resources=min_resources,
            schedule_timeout_s=timeout,
            api_version=api_version,
            raw=raw,
        )
    except ManifestError as exc:
        raise exc.located(kind="PodGroup", name=_describe(data)) from None


def _kube_min_count(spec: Fields) -> int:
    """scheduling.k8s.io/v1alpha2: exactly one of schedulingPolicy.basic and .gang."""
    policy = spec.get_obj("schedulingPolicy", required=True)
    assert policy is not None
    basic = policy.get_obj("basic")
    gang = policy.get_obj("gang")
    if (basic is None) == (gang is None):
        policy.fail(None, "must specify exactly one of: `basic`, `gang`")
    if gang is None:
        return 1
    count = gang.get_int("minCount", low=1, high=MAX_MIN_MEMBER, required=True)
    assert count is not None
    return count


def _describe(data: Any) -> str:
    meta = data.get("metadata") if isinstance(data, Mapping) else None
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str) or not meta["name"]:
        return ""
    namespace = meta.get("namespace")
    if not isinstance(namespace, str) or not namespace:
        namespace = DEFAULT_NAMESPACE
    return f"{namespace}/{meta['name']}"


def group_of_object(obj: Mapping[str, Any]) -> str:
    """The "namespace/name" of the PodGroup a raw pod dict belongs to, or "": upstream's
    ``spec.schedulingGroup.podGroupName`` (kube 1.36), else the label
    ``scheduling.x-k8s.io/pod-group`` (value = the PodGroup's name, same namespace)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    group = spec.get("schedulingGroup")
    name = group.get("podGroupName") if isinstance(group, Mapping) else None
    if not name:
        name = (meta.get("labels") or {}).get(POD_GROUP_LABEL)
    if not isinstance(name, str) or not name:
        return ""
    return f"{meta.get('namespace') or DEFAULT_NAMESPACE}/{name}"


def group_of(pod: Pod) -> str:
    """:func:`group_of_object` for a typed Pod."""
    name = pod.spec.pod_group_name or pod.metadata.labels.get(POD_GROUP_LABEL, "")
    return f"{pod.metadata.namespace}/{name}" if name else ""


def podgroup_status(group: PodGroup, pods: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The status of ``group`` from the pods (any pods: those not in the group are
    ignored), shaped as scheduler-plugins' PodGroupStatus: ``phase`` and the counts
    ``scheduled`` (members with spec.nodeName), ``running``, ``succeeded``, ``failed``
    (by status.phase), plus ``pods``, the members that exist.

    The phase is the one scheduler-plugins' controller settles on for these pods, with
    its "Scheduled" phase of before v0.27 (kubernetes-sigs/scheduler-plugins#574) kept:
    distsched has no kubelet to make pods Running, so a placed gang would otherwise read
    "Scheduling" for ever. From the first that holds: fewer than minMember pods:
    Pending; minMember succeeded: Finished; some failed and failed + running + succeeded
    >= minMember: Failed; running + succeeded >= minMember: Running; minMember placed:
    Scheduled; else Scheduling. Computed afresh at each read, so unlike the controller's
    Finished and Failed it is not final: it follows the pods."""
    key = group.key
    total = scheduled = running = succeeded = failed = 0
    for pod in pods:
        if group_of_object(pod) != key:
            continue
        total += 1
        if (pod.get("spec") or {}).get("nodeName"):
            scheduled += 1
        phase = (pod.get("status") or {}).get("phase")
        if phase == "Running":
            running += 1
        elif phase == "Succeeded":
            succeeded += 1
        elif phase == "Failed":
            failed += 1
    need = group.min_member
    if total < need:
        status = PENDING
    elif succeeded >= need:
        status = FINISHED
    elif failed and failed + running + succeeded >= need:
        status = FAILED
    elif running + succeeded >= need:
        status = RUNNING
    elif scheduled >= need:
        status = SCHEDULED
    else:
        status = SCHEDULING
    return {
        "phase": status,
        "scheduled": scheduled,
        "running": running,
        "succeeded": succeeded,
        "failed": failed,
        "pods": total,
    }
