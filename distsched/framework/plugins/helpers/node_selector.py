"""Node selectors (nodeSelector, node affinity terms) evaluated as masks over the snapshot,
and NodeAffinity's args parsing.

The semantics and the checks of a requirement are the model's (model/nodeaffinity.py,
kube's component-helpers nodeaffinity), which also matches one node; here the same
rules give bool arrays over snapshot slots, memoized in the snapshot's label cache (they
change only when node labels or the node set change).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from distsched.framework.interface import PluginArgsError
from distsched.framework.snapshot import Snapshot
from distsched.model.decode_common import NODE_NAME_FIELD, NODE_SELECTOR_OPERATORS
from distsched.model.nodeaffinity import (
    InvalidRequirement,
    check_requirement,
    check_term,
    term_is_valid,
)
from distsched.model.objects import (
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    PreferredSchedulingTerm,
)


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
    if req.key == NODE_NAME_FIELD:
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
            check_term(term)
            total += preferred.weight * term_mask(snapshot, term)
        return total

    return snapshot.label_cached(("preferred", terms), compute)


# ---------------------------------------------------------------------------- args parsing
def parse_requirement(data: Any, field: str) -> NodeSelectorRequirement:
    if not isinstance(data, Mapping):
        raise PluginArgsError(field, "must be a mapping")
    key, operator, values = data.get("key"), data.get("operator"), data.get("values", [])
    if not isinstance(key, str) or not key:
        raise PluginArgsError(f"{field}.key", "must be a non-empty string")
    if operator not in NODE_SELECTOR_OPERATORS:
        raise PluginArgsError(f"{field}.operator", f"unsupported operator {operator!r}")
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise PluginArgsError(f"{field}.values", "must be a list of strings")
    req = NodeSelectorRequirement(key, operator, tuple(values))
    try:
        check_requirement(req)
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
