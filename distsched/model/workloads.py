"""The kinds besides Pod and Node that ``apply`` accepts: Namespace, PriorityClass,
PodDisruptionBudget and the workload objects (Deployment, ReplicaSet, StatefulSet,
DaemonSet, Job).

Each decoder validates the fields distsched reads, following kube's API validation
(pkg/apis/{core,apps,batch,policy,scheduling}/validation), and keeps the object's JSON
as given (``raw``): fields kube accepts that distsched does not read (strategy,
volumeClaimTemplates, serviceName, ...) are stored unchanged. Defaults applied as the
API server does: ``spec.replicas`` 1, a Job's ``parallelism`` 1, a Job's selector and
its template labels generated from the Job's uid when absent (the store assigns the uid,
so the controller fills them in), a Namespace's ``kubernetes.io/metadata.name`` label.

A workload's pod template is decoded as a Pod (so an invalid template fails ``apply``
with the field path ``spec.template.spec....``), and its selector must select the
template's labels ("selector does not match template labels", as kube says).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

from distsched.model import names
from distsched.model.decode import pod_from_dict
from distsched.model.decode_common import decode_label_selector, decode_meta
from distsched.model.errors import ManifestError
from distsched.model.fields import Fields, expect_object, quote
from distsched.model.kinds import API_VERSIONS, CLUSTER_SCOPED
from distsched.model.labels import compile_selector
from distsched.model.objects import DEFAULT_NAMESPACE, LabelSelector, ObjectMeta, Pod

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")
HIGHEST_USER_PRIORITY = 1_000_000_000  # kube's scheduling.HighestUserDefinablePriority
SYSTEM_PRIORITY_CLASSES = {
    "system-cluster-critical": 2_000_000_000,
    "system-node-critical": 2_000_001_000,
}

JOB_RESTART_POLICIES = ("Never", "OnFailure")
_PERCENT_RE = re.compile(r"(0|[1-9][0-9]{0,8})%")


@dataclass(frozen=True, slots=True)
class Namespace:
    metadata: ObjectMeta
    raw: dict[str, Any] = field(compare=False, repr=False, default_factory=dict)
    kind = "Namespace"

    @property
    def key(self) -> str:
        return self.metadata.name

    def to_dict(self) -> dict[str, Any]:
        return self.raw


@dataclass(frozen=True, slots=True)
class PriorityClass:
    metadata: ObjectMeta
    value: int
    global_default: bool = False
    preemption_policy: str = "PreemptLowerPriority"
    raw: dict[str, Any] = field(compare=False, repr=False, default_factory=dict)
    kind = "PriorityClass"

    @property
    def key(self) -> str:
        return self.metadata.name

    def to_dict(self) -> dict[str, Any]:
        return self.raw


IntOrPercent = int | str  # 3 or "30%"


@dataclass(frozen=True, slots=True)
class PodDisruptionBudget:
    metadata: ObjectMeta
    selector: LabelSelector | None
    min_available: IntOrPercent | None = None
    max_unavailable: IntOrPercent | None = None
    raw: dict[str, Any] = field(compare=False, repr=False, default_factory=dict)
    kind = "PodDisruptionBudget"

    @property
    def key(self) -> str:
        return f"{self.metadata.namespace}/{self.metadata.name}"

    def to_dict(self) -> dict[str, Any]:
        return self.raw


@dataclass(frozen=True, slots=True)
class Workload:
    """A Deployment, ReplicaSet, StatefulSet, DaemonSet or Job: what its controller reads.

    ``replicas`` is the desired pod count (a Job's: parallelism capped by completions;
    a DaemonSet has none: one per eligible node). ``template`` is the pod template's
    JSON as given (the controller copies it into every pod); ``template_pod`` its
    decoded, validated form."""

    kind: str
    metadata: ObjectMeta
    selector: LabelSelector | None
    template: dict[str, Any]
    template_pod: Pod
    replicas: int | None = None
    completions: int | None = None
    raw: dict[str, Any] = field(compare=False, repr=False, default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.metadata.namespace}/{self.metadata.name}"

    def to_dict(self) -> dict[str, Any]:
        return self.raw


KindObject = Namespace | PriorityClass | PodDisruptionBudget | Workload


def check_api_version(root: Fields, kind: str) -> None:
    expected = API_VERSIONS[kind]
    api_version = root.get_str("apiVersion", required=True)
    if api_version != expected:
        root.fail(
            "apiVersion",
            f"unsupported apiVersion {quote(api_version)} for {kind}: expected {quote(expected)}",
        )


def describe(data: Any, kind: str) -> str:
    meta = data.get("metadata") if isinstance(data, dict) else None
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        return ""
    if kind in CLUSTER_SCOPED:
        return str(meta["name"])
    namespace = meta.get("namespace")
    if not isinstance(namespace, str) or not namespace:
        namespace = DEFAULT_NAMESPACE
    return f"{namespace}/{meta['name']}"


def object_from_dict(data: Any) -> KindObject:
    """Decode and validate one object of a kind in ``kinds.OTHER_KINDS`` (``kind`` set)."""
    root = expect_object(data, "")
    kind = root.get_str("kind", required=True)
    try:
        check_api_version(root, kind)
        meta_fields = root.get_obj("metadata", required=True)
        assert meta_fields is not None
        meta = decode_meta(meta_fields, namespaced=kind not in CLUSTER_SCOPED)
        if kind == "Namespace":
            meta_fields.check_str("name", meta.name, names.dns1123_label)
        raw = _normalized(data, kind, meta)
        if kind == "Namespace":
            return Namespace(meta, raw)
        if kind == "PriorityClass":
            return _priority_class(root, meta, raw)
        spec = root.get_obj("spec", required=kind != "PodDisruptionBudget")
        if kind == "PodDisruptionBudget":
            return _pdb(spec, meta, raw)
        assert spec is not None
        return _workload(kind, spec, meta, raw)
    except ManifestError as exc:
        raise exc.located(kind=kind, name=describe(data, kind)) from None


def _normalized(data: dict[str, Any], kind: str, meta: ObjectMeta) -> dict[str, Any]:
    raw = copy.deepcopy(data)
    metadata = raw.setdefault("metadata", {})
    if kind in CLUSTER_SCOPED:
        metadata.pop("namespace", None)
    else:
        metadata["namespace"] = meta.namespace
    if kind == "Namespace":
        metadata["labels"] = {**(metadata.get("labels") or {}), NAMESPACE_NAME_LABEL: meta.name}
    return raw


def _priority_class(root: Fields, meta: ObjectMeta, raw: dict[str, Any]) -> PriorityClass:
    value = root.get_int("value", required=True)
    assert value is not None
    if meta.name.startswith("system-"):
        root.fail("metadata.name", 'the prefix "system-" is reserved for system priority classes')
    if value > HIGHEST_USER_PRIORITY:
        root.fail("value", f"must be no greater than {HIGHEST_USER_PRIORITY}, got {value}")
    policy = root.get_str("preemptionPolicy") or "PreemptLowerPriority"
    root.check_one_of("preemptionPolicy", policy, PREEMPTION_POLICIES)
    return PriorityClass(meta, value, root.get_bool("globalDefault"), policy, raw)


def _int_or_percent(f: Fields, key: str) -> IntOrPercent | None:
    value = f.data.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        if not _PERCENT_RE.fullmatch(value) or int(value[:-1]) > 100:
            f.fail(
                key, f"invalid value {quote(value)}: must be an integer or a percentage 0%..100%"
            )
        return value
    number = f.get_int(key, low=0)
    assert number is not None
    return number


def _pdb(spec: Fields | None, meta: ObjectMeta, raw: dict[str, Any]) -> PodDisruptionBudget:
    if spec is None:
        return PodDisruptionBudget(meta, None, raw=raw)
    min_available = _int_or_percent(spec, "minAvailable")
    max_unavailable = _int_or_percent(spec, "maxUnavailable")
    if min_available is not None and max_unavailable is not None:
        spec.fail("minAvailable", "minAvailable and maxUnavailable cannot be both set")
    selector_fields = spec.get_obj("selector")
    selector = decode_label_selector(selector_fields) if selector_fields is not None else None
    return PodDisruptionBudget(meta, selector, min_available, max_unavailable, raw)


def _workload(kind: str, spec: Fields, meta: ObjectMeta, raw: dict[str, Any]) -> Workload:
    replicas: int | None = None
    completions: int | None = None
    if kind in ("Deployment", "ReplicaSet", "StatefulSet"):
        replicas = spec.get_int("replicas", low=0)
        if replicas is None:
            replicas = 1
            raw["spec"]["replicas"] = 1
    elif kind == "Job":
        parallelism = spec.get_int("parallelism", low=0)
        if parallelism is None:
            parallelism = 1
            raw["spec"]["parallelism"] = 1
        completions = spec.get_int("completions", low=0)
        replicas = parallelism if completions is None else min(parallelism, completions)
    selector_fields = spec.get_obj("selector", required=kind != "Job")
    selector = decode_label_selector(selector_fields) if selector_fields is not None else None
    if kind == "Job" and selector is not None and not spec.get_bool("manualSelector"):
        spec.fail("selector", "`selector` not auto-generated: set manualSelector: true to use it")
    template_fields = spec.get_obj("template", required=True)
    assert template_fields is not None
    template = dict(template_fields.data)
    pod = _template_pod(template_fields, meta)
    if selector is not None:
        if not selector.match_labels and not selector.match_expressions:
            spec.fail("selector", "empty selector is invalid for a workload")
        # Decoded, hence valid: compile_selector raises nothing here.
        if not compile_selector(selector).matches(pod.metadata.labels):
            spec.fail("template.metadata.labels", "`selector` does not match template `labels`")
    if kind == "Job":
        policy = (template_fields.get_obj("spec") or Fields({})).get_str("restartPolicy")
        if policy not in JOB_RESTART_POLICIES:
            template_fields.fail(
                "spec.restartPolicy",
                f'unsupported value {quote(policy)}: supported values: "OnFailure", "Never"',
            )
    else:
        policy = (template_fields.get_obj("spec") or Fields({})).get_str("restartPolicy")
        if policy and policy != "Always":
            template_fields.fail(
                "spec.restartPolicy",
                f'unsupported value {quote(policy)}: supported values: "Always"',
            )
    return Workload(kind, meta, selector, template, pod, replicas, completions, raw)


def _template_pod(template: Fields, owner: ObjectMeta) -> Pod:
    """The template decoded as a pod of the owner's namespace (named after the owner)."""
    meta = dict(template.data.get("metadata") or {})
    meta["name"] = owner.name
    meta["namespace"] = owner.namespace
    try:
        return pod_from_dict({"metadata": meta, "spec": template.data.get("spec")})
    except ManifestError as exc:
        path = template.at(exc.field) if exc.field else template.path
        raise ManifestError(exc.source, exc.document, path, exc.reason) from None
