"""A pod's nodeSelector and required node affinity on one node (kube's
component-helpers/scheduling/corev1/nodeaffinity), for the queue's NodeAdd pre-check,
the DaemonSet controller and the NodeAffinity plugin's checks.

Terms are ORed, the requirements of a term ANDed; an empty term matches nothing; a term
with an invalid requirement (e.g. ``Gt`` with a non-integer value, ``In`` without values)
matches nothing. ``matchFields`` supports only ``metadata.name`` with In/NotIn and one
value. The scheduler's vectorized form (masks over every node of the snapshot) is
framework/plugins/helpers/node_selector.py, which uses the checks here.
"""

from __future__ import annotations

from collections.abc import Mapping

from distsched.model.decode_common import NODE_NAME_FIELD, NODE_SELECTOR_OPERATORS
from distsched.model.objects import Node, NodeSelectorRequirement, NodeSelectorTerm, Pod

_OPERATORS = frozenset(NODE_SELECTOR_OPERATORS)


class InvalidRequirement(ValueError):
    pass


def check_requirement(req: NodeSelectorRequirement) -> None:
    """Raise InvalidRequirement for a label requirement kube would refuse."""
    op = req.operator
    if op not in _OPERATORS:
        raise InvalidRequirement(f"{op!r} is not a valid node selector operator")
    if op in ("In", "NotIn") and not req.values:
        raise InvalidRequirement(f"values must be non-empty for operator {op}")
    if op in ("Exists", "DoesNotExist") and req.values:
        raise InvalidRequirement(f"values must be empty for operator {op}")
    if op in ("Gt", "Lt"):
        if len(req.values) != 1:
            raise InvalidRequirement(f"exactly one value is required for operator {op}")
        if parse_int(req.values[0]) is None:
            raise InvalidRequirement(f"{req.values[0]!r} is not an integer")


def check_field_requirement(req: NodeSelectorRequirement) -> None:
    """Raise InvalidRequirement for a field requirement kube would refuse."""
    if len(req.values) != 1:
        raise InvalidRequirement("field requirements must have exactly one value")
    if req.operator not in ("In", "NotIn"):
        raise InvalidRequirement(f"{req.operator!r} is not a valid field selector operator")


def check_term(term: NodeSelectorTerm) -> None:
    for req in term.match_expressions:
        check_requirement(req)
    for req in term.match_fields:
        check_field_requirement(req)


def parse_int(text: str) -> int | None:
    body = text[1:] if text[:1] in "+-" else text
    if not body or not body.isascii() or not body.isdigit():
        return None
    return int(text)


def term_is_valid(term: NodeSelectorTerm) -> bool:
    try:
        check_term(term)
    except InvalidRequirement:
        return False
    return True


def requirement_matches(labels: Mapping[str, str], req: NodeSelectorRequirement) -> bool:
    """One (valid) label requirement against a node's labels."""
    op = req.operator
    if op == "In":
        return req.key in labels and labels[req.key] in req.values
    if op == "NotIn":
        return req.key not in labels or labels[req.key] not in req.values
    if op == "Exists":
        return req.key in labels
    if op == "DoesNotExist":
        return req.key not in labels
    value = parse_int(labels.get(req.key, ""))
    if value is None:
        return False
    bound = int(req.values[0])
    return value > bound if op == "Gt" else value < bound


def term_matches_node(term: NodeSelectorTerm, node: Node) -> bool:
    if not (term.match_expressions or term.match_fields) or not term_is_valid(term):
        return False
    labels = node.metadata.labels
    if not all(requirement_matches(labels, req) for req in term.match_expressions):
        return False
    for req in term.match_fields:
        actual = node.metadata.name if req.key == NODE_NAME_FIELD else ""
        if (actual == req.values[0]) != (req.operator == "In"):
            return False
    return True


def pod_matches_node_selector_and_affinity(pod: Pod, node: Node) -> bool:
    """The required part of NodeAffinity for one node (kube's
    GetRequiredNodeAffinity(pod).Match(node))."""
    labels = node.metadata.labels
    if any(labels.get(k) != v for k, v in pod.spec.node_selector.items()):
        return False
    affinity = pod.spec.affinity
    required = affinity.node_affinity.required if affinity and affinity.node_affinity else None
    if required is None:
        return True
    return any(term_matches_node(term, node) for term in required)
