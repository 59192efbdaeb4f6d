"""Priority admission, as kube's API server does it on pod create
(plugin/pkg/admission/priority):

- a pod naming ``spec.priorityClassName`` gets that class's value as ``spec.priority``
  and its ``preemptionPolicy``; an unknown class is refused ("no PriorityClass with name
  ... was found"); the two built-in classes system-cluster-critical (2000000000) and
  system-node-critical (2000001000) always exist;
- a pod without a class gets the globalDefault class (the lowest value when several are
  marked) or, when there is none, priority 0;
- a pod that gives ``spec.priority`` itself must give the value its class resolves to
  ("the integer value of priority (5) must not be provided in pod spec ...").

On update kube's plugin resolves nothing: a pod keeps the priority, class and preemption
policy it was admitted with unless the update states them (and then ValidatePodUpdate
refuses a change, spec being immutable): :func:`admit_pod_update`.

Pods work as Kubernetes JSON dicts here (the store's shape): the controllers admit the
pods they make the same way ``apply`` admits the pods it is given.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from distsched.model.errors import API_SOURCE, ManifestError
from distsched.model.fields import quote
from distsched.model.workloads import SYSTEM_PRIORITY_CLASSES

DEFAULT_PRIORITY = 0  # scheduling.DefaultPriorityWhenNoDefaultClassExists


@dataclass(frozen=True, slots=True)
class PriorityClassInfo:
    name: str
    value: int
    global_default: bool = False
    preemption_policy: str = "PreemptLowerPriority"


class PriorityClasses:
    """The priority classes admission resolves against (built-in ones included)."""

    def __init__(self, classes: Iterable[PriorityClassInfo] = ()) -> None:
        self._by_name = {
            name: PriorityClassInfo(name, value) for name, value in SYSTEM_PRIORITY_CLASSES.items()
        }
        for pc in classes:
            self._by_name[pc.name] = pc

    @classmethod
    def from_dicts(cls, objs: Iterable[Mapping[str, Any]]) -> PriorityClasses:
        """From stored PriorityClass JSON (already validated when applied)."""
        return cls(
            PriorityClassInfo(
                name=str(o["metadata"]["name"]),
                value=int(o.get("value") or 0),
                global_default=bool(o.get("globalDefault")),
                preemption_policy=str(o.get("preemptionPolicy") or "PreemptLowerPriority"),
            )
            for o in objs
        )

    def get(self, name: str) -> PriorityClassInfo | None:
        return self._by_name.get(name)

    def default(self) -> PriorityClassInfo | None:
        marked = [pc for pc in self._by_name.values() if pc.global_default]
        return min(marked, key=lambda pc: pc.value) if marked else None


def admit_pod(pod: Mapping[str, Any], classes: PriorityClasses) -> dict[str, Any]:
    """``pod`` with spec.priority, spec.priorityClassName and spec.preemptionPolicy set
    as admission sets them; ManifestError (field spec.priorityClassName or spec.priority)
    when kube's admission would refuse the pod."""
    spec = dict(pod.get("spec") or {})
    name = str(spec.get("priorityClassName") or "")
    if name:
        pc = classes.get(name)
        if pc is None:
            raise ManifestError(
                API_SOURCE,
                None,
                "spec.priorityClassName",
                f"no PriorityClass with name {quote(name)} was found",
            )
    else:
        pc = classes.default()
    value = pc.value if pc is not None else DEFAULT_PRIORITY
    given = spec.get("priority")
    if given is not None and given != value:
        raise ManifestError(
            API_SOURCE,
            None,
            "spec.priority",
            f"the integer value of priority ({given}) must not be provided in pod spec; "
            f"priority admission controller computed {value} from the given PriorityClass name",
        )
    spec["priority"] = value
    if pc is not None:
        spec["priorityClassName"] = pc.name
        spec["preemptionPolicy"] = pc.preemption_policy
    return {**pod, "spec": spec}


def admit_pod_update(pod: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, Any]:
    """``pod``, the new version of the stored pod ``current``, with what admission set on
    create carried over where ``pod`` leaves it unsaid: spec.priority and
    spec.priorityClassName, and spec.preemptionPolicy when the class is the stored one
    (the class set it; a manifest always reads back with one, so its absence cannot be
    told)."""
    spec = dict(pod.get("spec") or {})
    old = current.get("spec") or {}
    if spec.get("priority") is None and old.get("priority") is not None:
        spec["priority"] = old["priority"]
    old_class = old.get("priorityClassName")
    if not spec.get("priorityClassName") and old_class:
        spec["priorityClassName"] = old_class
    if old_class and spec.get("priorityClassName") == old_class and "preemptionPolicy" in old:
        spec["preemptionPolicy"] = old["preemptionPolicy"]
    return {**pod, "spec": spec}
