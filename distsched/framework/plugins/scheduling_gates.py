"""SchedulingGates: a pod with spec.schedulingGates does not enter the active queue (PreEnqueue)."""

from __future__ import annotations

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


def new(args: dict[str, Any], handle: Handle) -> SchedulingGates:
    return SchedulingGates()
