"""Matching rules the invariant checker needs, written from the Kubernetes API semantics.

Deliberately separate from the scheduler's plugins and helpers: the checker must not
share a bug with the code it checks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from distsched.model import (
    LabelSelector,
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    PodAffinityTerm,
    Taint,
    Toleration,
)

HARD_TAINT_EFFECTS = ("NoSchedule", "NoExecute")


def selector_matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector: absent selects nothing, empty selects everything; every
    matchLabels pair and every expression must hold."""
    if selector is None:
        return False
    for key, value in selector.match_labels.items():
        if labels.get(key) != value:
            return False
    for req in selector.match_expressions:
        present = req.key in labels
        if req.operator == "In":
            ok = present and labels[req.key] in req.values
        elif req.operator == "NotIn":
            ok = not present or labels[req.key] not in req.values
        elif req.operator == "Exists":
            ok = present
        elif req.operator == "DoesNotExist":
            ok = not present
        else:
            ok = False
        if not ok:
            return False
    return True


def _requirement_holds(req: NodeSelectorRequirement, value: str | None) -> bool:
    if req.operator == "In":
        return value is not None and value in req.values
    if req.operator == "NotIn":
        return value is None or value not in req.values
    if req.operator == "Exists":
        return value is not None
    if req.operator == "DoesNotExist":
        return value is None
    if req.operator in ("Gt", "Lt") and value is not None and len(req.values) == 1:
        try:
            have, bound = int(value), int(req.values[0])
        except ValueError:
            return False
        return have > bound if req.operator == "Gt" else have < bound
    return False


def node_term_matches(term: NodeSelectorTerm, node: Node) -> bool:
    """A nodeSelectorTerm: all its requirements hold; a term without any matches nothing."""
    if not term.match_expressions and not term.match_fields:
        return False
    labels = node.metadata.labels
    for req in term.match_expressions:
        if not _requirement_holds(req, labels.get(req.key)):
            return False
    for req in term.match_fields:
        value = node.metadata.name if req.key == "metadata.name" else None
        if not _requirement_holds(req, value):
            return False
    return True


def node_selection_violations(pod: Pod, node: Node) -> list[str]:
    """Why ``node`` does not satisfy the pod's nodeSelector / required node affinity."""
    problems = []
    labels = node.metadata.labels
    for key, value in pod.spec.node_selector.items():
        if labels.get(key) != value:
            problems.append(f"nodeSelector {key}={value} (node has {labels.get(key)!r})")
    affinity = pod.spec.affinity
    required = affinity.node_affinity.required if affinity and affinity.node_affinity else None
    if required is not None and not any(node_term_matches(t, node) for t in required):
        problems.append("no required node affinity term matches")
    return problems


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    return toleration.operator in ("", "Equal") and toleration.value == taint.value


def untolerated_hard_taints(pod: Pod, node: Node) -> list[Taint]:
    """The node's NoSchedule/NoExecute taints that none of the pod's tolerations tolerate."""
    return [
        taint
        for taint in node.spec.taints
        if taint.effect in HARD_TAINT_EFFECTS
        and not any(tolerates(t, taint) for t in pod.spec.tolerations)
    ]


NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def term_namespaces(term: PodAffinityTerm, pod: Pod) -> frozenset[str]:
    """The namespaces a pod affinity term names: its ``namespaces``, or the owner's own
    when it has neither namespaces nor a namespaceSelector."""
    if term.namespaces:
        return frozenset(term.namespaces)
    if term.namespace_selector is not None:
        return frozenset()
    return frozenset({pod.metadata.namespace})


def term_matches(
    term: PodAffinityTerm,
    owner: Pod,
    other: Pod,
    namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
) -> bool:
    """Whether ``owner``'s pod affinity term selects ``other``: ``other`` is in one of the
    term's namespaces or its namespace's labels (the Namespace object's, else only
    ``kubernetes.io/metadata.name``) match the namespaceSelector, and its labels match
    the labelSelector."""
    namespace = other.metadata.namespace
    if namespace not in term_namespaces(term, owner):
        labels = (namespace_labels or {}).get(namespace) or {NAMESPACE_NAME_LABEL: namespace}
        if not selector_matches(term.namespace_selector, labels):
            return False
    return selector_matches(term.label_selector, other.metadata.labels)


def ports_conflict(a: tuple[str, str, int], b: tuple[str, str, int]) -> bool:
    """Two (hostIP, protocol, port) host ports clash: same protocol and port, and the
    same IP or either is the wildcard 0.0.0.0."""
    ip_a, proto_a, port_a = a
    ip_b, proto_b, port_b = b
    if proto_a != proto_b or port_a != port_b:
        return False
    return ip_a == ip_b or "0.0.0.0" in (ip_a, ip_b)


def port_clashes(
    ports: Sequence[tuple[str, tuple[str, str, int]]],
) -> list[tuple[str, str, tuple[str, str, int]]]:
    """Clashing pairs among ``(pod key, host port)`` entries of one node (different pods)."""
    clashes = []
    for i, (key_a, port_a) in enumerate(ports):
        for key_b, port_b in ports[i + 1 :]:
            if key_a != key_b and ports_conflict(port_a, port_b):
                clashes.append((key_a, key_b, port_a))
    return clashes
