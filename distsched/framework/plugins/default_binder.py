"""DefaultBinder: binds through the ``bind_pod`` callable the binder puts in the Handle.

The writer's answer comes back in the returned Status: a pod found bound to that node
already (the same binding run twice) is a success the binder counts as a duplicate."""

from __future__ import annotations

from typing import Any

from distsched.framework.cycle_state import CycleState
from distsched.framework.events import ClusterEvent
from distsched.framework.interface import BindPlugin, Handle
from distsched.framework.status import Code, Status
from distsched.model.objects import Pod

NAME = "DefaultBinder"
EVENTS: tuple[ClusterEvent, ...] = ()
ALREADY_BOUND = "already-bound"


def binding_answer(status: Status) -> str:
    """What the successful bind ``status`` says the write did: "bound", or "already-bound"."""
    return ALREADY_BOUND if ALREADY_BOUND in status.reasons else "bound"


class DefaultBinder(BindPlugin):
    name = NAME

    def __init__(self, handle: Handle) -> None:
        self._handle = handle

    def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        bind_pod = self._handle.bind_pod
        if bind_pod is None:
            return Status(Code.ERROR, "no bind function configured in the framework handle")
        try:
            answer = bind_pod(pod, node_name)
        except Exception as exc:  # the store's refusal travels back as an Error status
            return Status.from_error(exc)
        return Status(Code.SUCCESS, ALREADY_BOUND) if answer == ALREADY_BOUND else None


def new(args: dict[str, Any], handle: Handle) -> DefaultBinder:
    return DefaultBinder(handle)
