"""Decoding and validation of the parts Pods and Nodes share: metadata, resource lists,
label and node selectors, affinity, taints and tolerations.

Each ``decode_*`` takes the :class:`~distsched.model.fields.Fields` of one JSON object
and returns the typed value, or raises ManifestError naming the offending field. The
rules follow Kubernetes' API validation (pkg/apis/core/validation) for the fields
distsched reads.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from distsched.model import names
from distsched.model.fields import (
    INT64_MAX,
    INT64_MIN,
    Fields,
    fail,
    quote,
)
from distsched.model.objects import (
    DEFAULT_NAMESPACE,
    Affinity,
    LabelSelector,
    LabelSelectorRequirement,
    NodeAffinity,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    ObjectMeta,
    PodAffinity,
    PodAffinityTerm,
    PreferredSchedulingTerm,
    ResourceList,
    Taint,
    Toleration,
    WeightedPodAffinityTerm,
)
from distsched.model.quantity import CPU, EPHEMERAL_STORAGE, HUGEPAGES_PREFIX, MEMORY
from distsched.model.quantity import parse_quantity as _parse_quantity

SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
NODE_SELECTOR_OPERATORS = (*SELECTOR_OPERATORS, "Gt", "Lt")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
TOLERATION_OPERATORS = ("Equal", "Exists")
MAX_ANNOTATIONS_BYTES = 256 * 1024
NODE_NAME_FIELD = "metadata.name"  # the only field a node selector's matchFields may use
_INT_RE = re.compile(r"[+-]?[0-9]{1,25}")


def decode_meta(
    f: Fields,
    *,
    namespaced: bool,
    name_check: Callable[[str], str | None] = names.dns1123_subdomain,
) -> ObjectMeta:
    """Pods: name a DNS-1123 subdomain (``name_check``: another kind's rule), namespace a
    DNS-1123 label (default "default"). Nodes are cluster-scoped: their namespace is
    cleared, as the API server does."""
    name = f.get_str("name", required=True)
    f.check_str("name", name, name_check)
    namespace = ""
    if namespaced:
        namespace = f.get_str("namespace") or DEFAULT_NAMESPACE
        f.check_str("namespace", namespace, names.dns1123_label)
    labels = f.get_str_map("labels", names.qualified_name, names.label_value)
    annotations = f.get_str_map("annotations", _annotation_key)
    size = sum(len(k) + len(v) for k, v in annotations.items())
    if size > MAX_ANNOTATIONS_BYTES:
        f.fail("annotations", f"may not be larger than {MAX_ANNOTATIONS_BYTES} bytes, got {size}")
    return ObjectMeta(
        name=name,
        namespace=namespace,
        uid=f.get_str("uid"),
        labels=labels,
        annotations=annotations,
        creation_timestamp=f.get_str("creationTimestamp"),
        resource_version=f.get_str("resourceVersion"),
    )


def _annotation_key(key: str) -> str | None:
    return names.qualified_name(key.lower())  # Kubernetes allows upper case here


def container_resource_name(name: str) -> str | None:
    """Containers and overhead may name native resources or domain-prefixed extended ones."""
    if name in (CPU, MEMORY, EPHEMERAL_STORAGE):
        return None
    if name.startswith(HUGEPAGES_PREFIX):
        return None if len(name) > len(HUGEPAGES_PREFIX) else "missing hugepage size"
    if "/" not in name:
        return "must be a standard resource for containers or a domain-prefixed extended resource"
    if "kubernetes.io/" in name:
        return "extended resources may not use the kubernetes.io domain"
    return names.qualified_name(name)


def decode_resource_list(f: Fields, key: str, *, container: bool) -> ResourceList:
    """A map of resource name to quantity, in canonical units, never negative."""
    check = container_resource_name if container else names.qualified_name
    out: ResourceList = {}
    for name, value, path in f.get_map(key):
        reason = check(name)
        if reason is not None:
            fail(path, f"invalid resource name {quote(name)}: {reason}")
        if value is None:
            fail(path, "expected a quantity, got null")
        try:
            amount = _parse_quantity(value, name)
        except ValueError as exc:
            fail(path, str(exc))
        if amount < 0:
            fail(path, f"must be greater than or equal to 0, got {quote(value)}")
        out[name] = amount
    return out


def decode_label_selector(f: Fields) -> LabelSelector:
    return LabelSelector(
        match_labels=f.get_str_map("matchLabels", names.qualified_name, names.label_value),
        match_expressions=tuple(
            _decode_label_requirement(e) for e in f.get_objs("matchExpressions")
        ),
    )


def _decode_label_requirement(f: Fields) -> LabelSelectorRequirement:
    key = f.get_str("key", required=True)
    f.check_str("key", key, names.qualified_name)
    operator = f.get_str("operator", required=True)
    f.check_one_of("operator", operator, SELECTOR_OPERATORS)
    values = f.get_strs("values", names.label_value)
    _check_value_count(f, operator, values)
    return LabelSelectorRequirement(key=key, operator=operator, values=tuple(values))


def _check_value_count(f: Fields, operator: str, values: list[str]) -> None:
    if operator in ("In", "NotIn") and not values:
        f.fail("values", f'must be specified when operator is "{operator}"')
    if operator in ("Exists", "DoesNotExist") and values:
        f.fail("values", f'may not be specified when operator is "{operator}"')
    if operator in ("Gt", "Lt"):
        if len(values) != 1:
            f.fail("values", f'must have exactly one value when operator is "{operator}"')
        if not _INT_RE.fullmatch(values[0]) or not INT64_MIN <= int(values[0]) <= INT64_MAX:
            f.fail("values", f"invalid value {quote(values[0])}: must be a 64-bit integer")


def _decode_node_requirement(f: Fields) -> NodeSelectorRequirement:
    key = f.get_str("key", required=True)
    f.check_str("key", key, names.qualified_name)
    operator = f.get_str("operator", required=True)
    f.check_one_of("operator", operator, NODE_SELECTOR_OPERATORS)
    # In/NotIn values are label values (kube's labels.NewRequirement refuses others, so
    # the scheduler's term matches nothing, and API servers refuse the pod); Gt/Lt take
    # an integer, checked below.
    values = f.get_strs("values", names.label_value if operator in ("In", "NotIn") else None)
    _check_value_count(f, operator, values)
    return NodeSelectorRequirement(key=key, operator=operator, values=tuple(values))


def _decode_field_requirement(f: Fields) -> NodeSelectorRequirement:
    key = f.get_str("key", required=True)
    if key != NODE_NAME_FIELD:
        f.fail("key", f'unsupported field {quote(key)}: only "{NODE_NAME_FIELD}" is supported')
    operator = f.get_str("operator", required=True)
    f.check_one_of("operator", operator, ("In", "NotIn"))
    values = f.get_strs("values", names.dns1123_subdomain)
    if len(values) != 1:
        f.fail("values", f'must have exactly one value when operator is "{operator}"')
    return NodeSelectorRequirement(key=key, operator=operator, values=tuple(values))


def decode_node_selector_term(f: Fields) -> NodeSelectorTerm:
    return NodeSelectorTerm(
        match_expressions=tuple(
            _decode_node_requirement(e) for e in f.get_objs("matchExpressions")
        ),
        match_fields=tuple(_decode_field_requirement(e) for e in f.get_objs("matchFields")),
    )


def _get_weight(f: Fields) -> int:
    weight = f.get_int("weight", required=True)
    assert weight is not None
    if not 1 <= weight <= 100:
        f.fail("weight", f"must be in the range 1-100, got {weight}")
    return weight


def decode_node_affinity(f: Fields) -> NodeAffinity:
    required: tuple[NodeSelectorTerm, ...] | None = None
    selector = f.get_obj("requiredDuringSchedulingIgnoredDuringExecution")
    if selector is not None:
        terms = selector.get_objs("nodeSelectorTerms")
        if not terms:
            selector.fail("nodeSelectorTerms", "must have at least one node selector term")
        required = tuple(decode_node_selector_term(t) for t in terms)
    preferred = []
    for p in f.get_objs("preferredDuringSchedulingIgnoredDuringExecution"):
        weight = _get_weight(p)
        preference = p.get_obj("preference", required=True)
        assert preference is not None
        preferred.append(
            PreferredSchedulingTerm(weight=weight, preference=decode_node_selector_term(preference))
        )
    return NodeAffinity(required=required, preferred=tuple(preferred))


def decode_pod_affinity_term(f: Fields) -> PodAffinityTerm:
    topology_key = f.get_str("topologyKey", required=True)
    f.check_str("topologyKey", topology_key, names.qualified_name)
    selector = f.get_obj("labelSelector")
    namespace_selector = f.get_obj("namespaceSelector")
    return PodAffinityTerm(
        topology_key=topology_key,
        label_selector=decode_label_selector(selector) if selector is not None else None,
        namespaces=tuple(f.get_strs("namespaces", names.dns1123_label)),
        namespace_selector=(
            decode_label_selector(namespace_selector) if namespace_selector is not None else None
        ),
    )


def decode_pod_affinity(f: Fields) -> PodAffinity:
    required = tuple(
        decode_pod_affinity_term(t)
        for t in f.get_objs("requiredDuringSchedulingIgnoredDuringExecution")
    )
    preferred = []
    for p in f.get_objs("preferredDuringSchedulingIgnoredDuringExecution"):
        weight = _get_weight(p)
        term = p.get_obj("podAffinityTerm", required=True)
        assert term is not None
        decoded = decode_pod_affinity_term(term)
        preferred.append(WeightedPodAffinityTerm(weight=weight, term=decoded))
    return PodAffinity(required=required, preferred=tuple(preferred))


def decode_affinity(f: Fields) -> Affinity:
    node = f.get_obj("nodeAffinity")
    pod = f.get_obj("podAffinity")
    anti = f.get_obj("podAntiAffinity")
    return Affinity(
        node_affinity=decode_node_affinity(node) if node is not None else None,
        pod_affinity=decode_pod_affinity(pod) if pod is not None else None,
        pod_anti_affinity=decode_pod_affinity(anti) if anti is not None else None,
    )


def decode_toleration(f: Fields) -> Toleration:
    key = f.get_str("key")
    if key:
        f.check_str("key", key, names.qualified_name)
    operator = f.get_str("operator") or "Equal"
    f.check_one_of("operator", operator, TOLERATION_OPERATORS)
    value = f.get_str("value")
    effect = f.get_str("effect")
    if effect:
        f.check_one_of("effect", effect, TAINT_EFFECTS)
    seconds = f.get_int("tolerationSeconds", low=INT64_MIN, high=INT64_MAX)
    if not key and operator != "Exists":
        f.fail("operator", 'must be "Exists" when key is empty (to match all keys)')
    if operator == "Exists" and value:
        f.fail("value", 'must be empty when operator is "Exists"')
    if operator == "Equal":
        f.check_str("value", value, names.label_value)
    if seconds is not None and effect != "NoExecute":
        f.fail("effect", 'must be "NoExecute" when tolerationSeconds is set')
    return Toleration(
        key=key, operator=operator, value=value, effect=effect, toleration_seconds=seconds
    )


def decode_taint(f: Fields) -> Taint:
    key = f.get_str("key", required=True)
    f.check_str("key", key, names.qualified_name)
    value = f.get_str("value")
    f.check_str("value", value, names.label_value)
    effect = f.get_str("effect", required=True)
    f.check_one_of("effect", effect, TAINT_EFFECTS)
    return Taint(key=key, effect=effect, value=value)
