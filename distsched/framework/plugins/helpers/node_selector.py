"""Node selectors (nodeSelector, node affinity terms) evaluated as masks over the snapshot.

Semantics follow k8s.io/component-helpers nodeaffinity: terms are ORed, the requirements
of a term ANDed; an empty term matches nothing; a term with an invalid requirement
(e.g. ``Gt`` with a non-integer value, ``In`` without values) matches nothing.
``matchFields`` supports only ``metadata.name`` with In/NotIn and one value.

Masks are bool arrays over snapshot slots, memoized in the snapshot's label cache (they
change only when node labels or the node set change).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from distsched.framework.interface import PluginArgsError
from distsched.framework.snapshot import Snapshot
from distsched.model.objects import (
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    PreferredSchedulingTerm,
)

OBJECT_NAME_FIELD = "metadata.name"
_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})


class InvalidRequirement(ValueError):
    pass


def _check(req: NodeSelectorRequirement) -> None:
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
        if _parse_int(req.values[0]) is None:
            raise InvalidRequirement(f"{req.values[0]!r} is not an integer")


def _check_field(req: NodeSelectorRequirement) -> None:
    if len(req.values) != 1:
        raise InvalidRequirement("field requirements must have exactly one value")
    if req.operator not in ("In", "NotIn"):
        raise InvalidRequirement(f"{req.operator!r} is not a valid field selector operator")


def _parse_int(text: str) -> int | None:
    body = text[1:] if text[:1] in "+-" else text
    if not body or not body.isascii() or not body.isdigit():
        return None
    return int(text)


def term_is_valid(term: NodeSelectorTerm) -> bool:
    try:
        for req in term.match_expressions:
            _check(req)
        for req in term.match_fields:
            _check_field(req)
    except InvalidRequirement:
        return False
    return True


# ---------------------------------------------------------------------------- masks
def requirement_mask(snapshot: Snapshot, req: NodeSelectorRequirement) -> np.ndarray:
    """bool[capacity] for one (valid) label requirement."""
    op = req.operator
    if op in ("In", "NotIn"):
        mask = snapshot.label_mask(req.key, req.values[0])
        if len(req.values) > 1:
            mask = mask.copy()
            for value in req.values[1:]:
                mask |= snapshot.label_mask(req.key, value)
        return mask if op == "In" else ~mask
    if op == "Exists":
        return snapshot.label_exists_mask(req.key)
    if op == "DoesNotExist":
        return ~snapshot.label_exists_mask(req.key)
    values, ok = snapshot.label_int_values(req.key)
    bound = int(req.values[0])
    return ok & (values > bound) if op == "Gt" else ok & (values < bound)


def _field_mask(snapshot: Snapshot, req: NodeSelectorRequirement) -> np.ndarray:
    mask = np.zeros(snapshot.capacity, dtype=bool)
    if req.key == OBJECT_NAME_FIELD:
        index = snapshot.get_index(req.values[0])
        if index is not None:
            mask[index] = True
    elif req.values[0] == "":
        mask[:] = True  # the node has no such field: its value reads as ""
    return mask if req.operator == "In" else ~mask


def term_mask(snapshot: Snapshot, term: NodeSelectorTerm) -> np.ndarray:
    """bool[capacity]: nodes matching every requirement of ``term``."""

    def compute() -> np.ndarray:
        if not (term.match_expressions or term.match_fields) or not term_is_valid(term):
            return np.zeros(snapshot.capacity, dtype=bool)
        mask = np.ones(snapshot.capacity, dtype=bool)
        for req in term.match_expressions:
            mask &= requirement_mask(snapshot, req)
        for req in term.match_fields:
            mask &= _field_mask(snapshot, req)
        return mask

    return snapshot.label_cached(("term", term), compute)


def terms_mask(snapshot: Snapshot, terms: tuple[NodeSelectorTerm, ...]) -> np.ndarray:
    """bool[capacity]: nodes matching at least one term (none for an empty tuple)."""

    def compute() -> np.ndarray:
        mask = np.zeros(snapshot.capacity, dtype=bool)
        for term in terms:
            mask |= term_mask(snapshot, term)
        return mask

    return snapshot.label_cached(("terms", terms), compute)


def labels_mask(snapshot: Snapshot, selector: Mapping[str, str]) -> np.ndarray:
    """bool[capacity]: nodes carrying every label of ``selector`` (a pod's nodeSelector)."""
    key = ("labels", tuple(sorted(selector.items())))

    def compute() -> np.ndarray:
        mask = np.ones(snapshot.capacity, dtype=bool)
        for k, v in selector.items():
            mask &= snapshot.label_mask(k, v)
        return mask

    return snapshot.label_cached(key, compute)


def required_affinity_mask(snapshot: Snapshot, pod: Pod) -> np.ndarray | None:
    """bool[capacity] for the pod's nodeSelector AND required node affinity; None when
    the pod has neither (every node matches)."""
    selector = pod.spec.node_selector
    affinity = pod.spec.affinity
    node_affinity = affinity.node_affinity if affinity else None
    required = node_affinity.required if node_affinity else None
    if not selector and required is None:
        return None
    if required is None:
        return labels_mask(snapshot, selector)
    mask = terms_mask(snapshot, required)
    if selector:
        mask = mask & labels_mask(snapshot, selector)
    return mask


def preferred_weights(snapshot: Snapshot, terms: tuple[PreferredSchedulingTerm, ...]) -> np.ndarray:
    """int64[capacity]: sum of the weights of the preferred terms each node matches.

    Terms with weight 0 or no requirements are ignored; an invalid term raises
    InvalidRequirement (kube fails PreScore in that case).
    """

    def compute() -> np.ndarray:
        total = np.zeros(snapshot.capacity, dtype=np.int64)
        for preferred in terms:
            term = preferred.preference
            if preferred.weight == 0 or not (term.match_expressions or term.match_fields):
                continue
            for req in term.match_expressions:
                _check(req)
            for req in term.match_fields:
                _check_field(req)
            total += preferred.weight * term_mask(snapshot, term)
        return total

    return snapshot.label_cached(("preferred", terms), compute)


# ---------------------------------------------------------------------------- one node
def _requirement_matches(labels: Mapping[str, str], req: NodeSelectorRequirement) -> bool:
    op = req.operator
    if op == "In":
        return req.key in labels and labels[req.key] in req.values
    if op == "NotIn":
        return req.key not in labels or labels[req.key] not in req.values
    if op == "Exists":
        return req.key in labels
    if op == "DoesNotExist":
        return req.key not in labels
    value = _parse_int(labels.get(req.key, ""))
    if value is None:
        return False
    bound = int(req.values[0])
    return value > bound if op == "Gt" else value < bound


def term_matches_node(term: NodeSelectorTerm, node: Node) -> bool:
    if not (term.match_expressions or term.match_fields) or not term_is_valid(term):
        return False
    labels = node.metadata.labels
    if not all(_requirement_matches(labels, req) for req in term.match_expressions):
        return False
    for req in term.match_fields:
        actual = node.metadata.name if req.key == OBJECT_NAME_FIELD else ""
        if (actual == req.values[0]) != (req.operator == "In"):
            return False
    return True


def pod_matches_node_selector_and_affinity(pod: Pod, node: Node) -> bool:
    """The required part of NodeAffinity for one node (the queue's NodeAdd pre-check)."""
    labels = node.metadata.labels
    if any(labels.get(k) != v for k, v in pod.spec.node_selector.items()):
        return False
    affinity = pod.spec.affinity
    required = affinity.node_affinity.required if affinity and affinity.node_affinity else None
    if required is None:
        return True
    return any(term_matches_node(term, node) for term in required)


# ---------------------------------------------------------------------------- args parsing
def parse_requirement(data: Any, field: str) -> NodeSelectorRequirement:
    if not isinstance(data, Mapping):
        raise PluginArgsError(field, "must be a mapping")
    key, operator, values = data.get("key"), data.get("operator"), data.get("values", [])
    if not isinstance(key, str) or not key:
        raise PluginArgsError(f"{field}.key", "must be a non-empty string")
    if operator not in _OPERATORS:
        raise PluginArgsError(f"{field}.operator", f"unsupported operator {operator!r}")
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise PluginArgsError(f"{field}.values", "must be a list of strings")
    req = NodeSelectorRequirement(key, operator, tuple(values))
    try:
        _check(req)
    except InvalidRequirement as exc:
        raise PluginArgsError(field, str(exc)) from exc
    return req


def parse_term(data: Any, field: str) -> NodeSelectorTerm:
    if not isinstance(data, Mapping):
        raise PluginArgsError(field, "must be a mapping")
    exprs = _list(data.get("matchExpressions", []), f"{field}.matchExpressions")
    fields = _list(data.get("matchFields", []), f"{field}.matchFields")
    return NodeSelectorTerm(
        tuple(parse_requirement(e, f"{field}.matchExpressions[{i}]") for i, e in enumerate(exprs)),
        tuple(parse_requirement(e, f"{field}.matchFields[{i}]") for i, e in enumerate(fields)),
    )


def parse_preferred_terms(data: Any, field: str) -> tuple[PreferredSchedulingTerm, ...]:
    terms: list[PreferredSchedulingTerm] = []
    for i, item in enumerate(_list(data, field)):
        item_field = f"{field}[{i}]"
        if not isinstance(item, Mapping):
            raise PluginArgsError(item_field, "must be a mapping")
        weight = item.get("weight")
        if not isinstance(weight, int) or not 1 <= weight <= 100:
            raise PluginArgsError(f"{item_field}.weight", "must be an integer in [1, 100]")
        terms.append(
            PreferredSchedulingTerm(
                weight, parse_term(item.get("preference"), f"{item_field}.preference")
            )
        )
    return tuple(terms)


def _list(data: Any, field: str) -> Iterable[Any]:
    if not isinstance(data, list):
        raise PluginArgsError(field, "must be a list")
    return data
