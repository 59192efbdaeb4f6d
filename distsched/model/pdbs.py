"""Which pods a PodDisruptionBudget selects, for the disruption controller and
DefaultPreemption (kube's PDB selector rules).

A budget selects the pods of its namespace that its ``spec.selector`` matches; a budget
without a selector, or with an empty one, selects nothing (policy/v1). Its
``status.disruptionsAllowed`` is computed by the disruption controller
(controllers/disruption.py) and read by preemption from each worker's budget lister
(framework/listers.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from distsched.model.labels import InvalidSelector, Selector, compile_selector
from distsched.model.objects import LabelSelector, LabelSelectorRequirement


def pdb_key(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` of a stored PDB."""
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


@dataclass(frozen=True, slots=True)
class Budget:
    key: str  # namespace/name
    namespace: str
    selector: Selector
    disruptions_allowed: int

    def selects(self, namespace: str, labels: Mapping[str, str]) -> bool:
        # kube: a PDB with an empty selector selects nothing (policy/v1 nil: nothing).
        if namespace != self.namespace or self.selector.empty():
            return False
        return self.selector.matches(labels)


def budget_from_dict(obj: Mapping[str, Any]) -> Budget | None:
    """A Budget from stored PDB JSON (None when it has no usable selector)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    raw = spec.get("selector")
    if not isinstance(raw, dict):
        return None
    selector = LabelSelector(
        match_labels=dict(raw.get("matchLabels") or {}),
        match_expressions=tuple(
            LabelSelectorRequirement(e["key"], e["operator"], tuple(e.get("values") or ()))
            for e in raw.get("matchExpressions") or ()
        ),
    )
    try:
        compiled = compile_selector(selector)
    except InvalidSelector:
        return None
    return Budget(
        key=pdb_key(obj),
        namespace=str(meta.get("namespace") or "default"),
        selector=compiled,
        disruptions_allowed=int(status.get("disruptionsAllowed") or 0),
    )
