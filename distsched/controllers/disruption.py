"""The disruption controller: each PodDisruptionBudget's status, as kube's
pkg/controller/disruption computes it, for DefaultPreemption to read.

- matching pods: the budget's namespace, its selector, not Succeeded/Failed;
- ``currentHealthy``: those bound to a node (readiness is not modelled: a bound pod
  counts as healthy);
- ``minAvailable`` as a number: ``expectedPods`` = the matching pods, ``desiredHealthy``
  = minAvailable;
- ``maxUnavailable``, or ``minAvailable`` as a percentage: ``expectedPods`` = the scale of
  the pods' controllers (a ReplicaSet's or StatefulSet's ``spec.replicas``, counted once
  per controller; a pod without such a controller counts as 1), ``desiredHealthy`` =
  expected - maxUnavailable, or minAvailable% of expected, percentages rounded up;
- ``disruptionsAllowed`` = max(0, currentHealthy - desiredHealthy). A budget with
  neither field allows ``currentHealthy`` - ``expectedPods`` (minAvailable defaults to
  100 %, i.e. none). ``status.disruptedPods`` is not kept (deletes are immediate here).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from distsched.controllers.pods import controller_uid
from distsched.model.pdbs import budget_from_dict
from distsched.store.codec import Obj

FINISHED = ("Succeeded", "Failed")


def _scaled(value: int | str, total: int) -> int:
    if isinstance(value, int):
        return value
    return math.ceil(int(value.rstrip("%")) * total / 100)


def budget_status(
    pdb: Obj, pods: Iterable[Obj], scale_of: Callable[[str], int | None]
) -> dict[str, int]:
    """The status fields of ``pdb`` given every pod of its namespace; ``scale_of(uid)`` is
    the replicas of the controller with that uid (None: not a scalable controller)."""
    spec = pdb.get("spec") or {}
    budget = budget_from_dict(pdb)
    matching = []
    if budget is not None:
        for pod in pods:
            meta = pod["metadata"]
            phase = (pod.get("status") or {}).get("phase") or "Pending"
            if phase in FINISHED:
                continue
            if budget.selects(meta.get("namespace", "default"), meta.get("labels") or {}):
                matching.append(pod)
    healthy = sum(1 for p in matching if (p.get("spec") or {}).get("nodeName"))
    min_available = spec.get("minAvailable")
    max_unavailable = spec.get("maxUnavailable")
    if isinstance(min_available, int):
        expected, desired = len(matching), min_available
    else:
        expected = 0
        seen: set[str] = set()
        for pod in matching:
            uid = controller_uid(pod)
            scale = scale_of(uid) if uid else None
            if scale is None:
                expected += 1
            elif uid not in seen:
                seen.add(uid)
                expected += scale
        if max_unavailable is not None:
            desired = max(0, expected - _scaled(max_unavailable, expected))
        elif min_available is not None:
            desired = _scaled(min_available, expected)
        else:
            desired = expected
    return {
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
        "disruptionsAllowed": max(0, healthy - desired),
    }
