"""NodeUnschedulable: skip nodes with spec.unschedulable unless the pod tolerates
``node.kubernetes.io/unschedulable:NoSchedule`` (Filter)."""

from __future__ import annotations

from typing import Any

import numpy as np

from distsched.cache.snapshot import Snapshot
from distsched.framework.cycle_state import CycleState
from distsched.framework.events import NODE_ADD_OR_SCHEDULING_CHANGE, ClusterEvent, EventResource
from distsched.framework.interface import FilterPlugin, FilterResult, Handle
from distsched.model.objects import Pod, Taint
from distsched.plugins.helpers.taints import (
    NO_SCHEDULE,
    TAINT_NODE_UNSCHEDULABLE,
    tolerations_tolerate,
)

NAME = "NodeUnschedulable"
EVENTS: tuple[ClusterEvent, ...] = (
    ClusterEvent(EventResource.NODE, NODE_ADD_OR_SCHEDULING_CHANGE),
)
ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"

_UNSCHEDULABLE_TAINT = Taint(TAINT_NODE_UNSCHEDULABLE, NO_SCHEDULE)


class NodeUnschedulable(FilterPlugin):
    name = NAME

    def filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, indices: np.ndarray
    ) -> FilterResult:
        if snapshot.num_unschedulable == 0 or tolerations_tolerate(
            pod.spec.tolerations, _UNSCHEDULABLE_TAINT
        ):
            return FilterResult.all_pass()
        return FilterResult.of(
            ERR_REASON_UNSCHEDULABLE, snapshot.unschedulable[indices], unresolvable=True
        )


def new(args: dict[str, Any], handle: Handle) -> NodeUnschedulable:
    return NodeUnschedulable()
