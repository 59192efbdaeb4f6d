"""SchedulingGates: a pod with spec.schedulingGates does not enter the active queue (PreEnqueue)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from distsched.framework.events import POD_SCHEDULING_GATES_ELIMINATED, ClusterEvent
from distsched.framework.interface import Handle, PreEnqueuePlugin
from distsched.framework.status import Status
from distsched.model.objects import Pod

NAME = "SchedulingGates"
EVENTS: tuple[ClusterEvent, ...] = (POD_SCHEDULING_GATES_ELIMINATED,)


class SchedulingGates(PreEnqueuePlugin):
    name = NAME

    def pre_enqueue(self, pod: Pod) -> Status | None:
        gates = pod.spec.scheduling_gates
        if not gates:
            return None
        return Status.unresolvable(f"waiting for scheduling gates: [{' '.join(gates)}]")

    def admits_object(self, obj: Mapping[str, Any]) -> bool:
        """No gates in the raw object: absent, null or empty ``spec.schedulingGates``
        (anything else that is falsy does not parse, and a pod that does not parse is
        not gated either). A non-empty list goes the typed way, which also validates it."""
        spec = obj.get("spec")
        return isinstance(spec, Mapping) and not spec.get("schedulingGates")


def new(args: dict[str, Any], handle: Handle) -> SchedulingGates:
    return SchedulingGates()
