"""Toleration/taint matching with kube's rules (k8s.io/api core/v1 toleration.go)."""

from __future__ import annotations

from collections.abc import Iterable

from distsched.model.objects import Taint, Toleration

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"
DO_NOT_SCHEDULE_EFFECTS = frozenset({NO_SCHEDULE, NO_EXECUTE})

TAINT_NODE_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """An empty effect or key matches any; operator Exists ignores the value."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator in ("", "Equal"):
        return toleration.value == taint.value
    return toleration.operator == "Exists"


def tolerations_tolerate(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    return any(tolerates(t, taint) for t in tolerations)


def find_untolerated_taint(
    taints: Iterable[Taint], tolerations: tuple[Toleration, ...], effects: frozenset[str]
) -> Taint | None:
    """The first taint (node order) with an effect in ``effects`` no toleration tolerates."""
    for taint in taints:
        if taint.effect in effects and not tolerations_tolerate(tolerations, taint):
            return taint
    return None
