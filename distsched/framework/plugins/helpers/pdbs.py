"""PodDisruptionBudgets as DefaultPreemption reads them (kube's PDB lister).

A budget's ``status.disruptionsAllowed`` is computed by the disruption controller (the
controller role, distsched/controllers/disruption.py) and read from the store here;
preemption counts a victim as a violation when a budget selecting it has no disruption
left (kube's filterPodsWithPDBViolation, which also spends the budget pod by pod).

Each worker's informer records the store's budgets in :data:`BUDGETS` (workers/local_cache.py);
a Handle may carry its own :class:`DisruptionBudgets` under :data:`PDB_KEY` (tests).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from distsched.framework.plugins.helpers.label_selector import (
    InvalidSelector,
    Selector,
    compile_selector,
)
from distsched.model.objects import LabelSelector, LabelSelectorRequirement

PDB_KEY = "pod-disruption-budgets"


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
    """A Budget from stored PDB JSON (None when its selector is unusable)."""
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
    namespace = str(meta.get("namespace") or "default")
    return Budget(
        key=f"{namespace}/{meta.get('name')}",
        namespace=namespace,
        selector=compiled,
        disruptions_allowed=int(status.get("disruptionsAllowed") or 0),
    )


class DisruptionBudgets:
    """The known budgets, by key; thread-safe (the informer thread writes)."""

    def __init__(self, budgets: list[Budget] | None = None) -> None:
        self._lock = threading.Lock()
        self._by_key: dict[str, Budget] = {b.key: b for b in budgets or ()}

    def set(self, obj: Mapping[str, Any]) -> None:
        budget = budget_from_dict(obj)
        meta = obj.get("metadata") or {}
        key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
        with self._lock:
            if budget is None:
                self._by_key.pop(key, None)
            else:
                self._by_key[key] = budget

    def delete(self, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        with self._lock:
            self._by_key.pop(f"{meta.get('namespace') or 'default'}/{meta.get('name')}", None)

    def all(self) -> list[Budget]:
        with self._lock:
            return list(self._by_key.values())


BUDGETS = DisruptionBudgets()
