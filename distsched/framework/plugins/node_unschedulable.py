"""NodeUnschedulable: skip nodes with spec.unschedulable unless the pod tolerates
``node.kubernetes.io/unschedulable:NoSchedule`` (Filter)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from distsched.framework.cycle_state import CycleState
from distsched.framework.events import NODE_ADD_OR_SCHEDULING_CHANGE, ClusterEvent, EventResource
from distsched.framework.interface import FilterPlugin, FilterResult, Handle, SignPlugin
from distsched.framework.podinfo import PodInfo
from distsched.framework.snapshot import Snapshot
from distsched.model.objects import Node, Pod, Taint
from distsched.model.taints import (
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


class NodeUnschedulable(FilterPlugin, SignPlugin):
    name = NAME
    reads_only_its_node = True
    reads_only_its_node_usage = True

    def sign_pod(self, pod: Pod, info: PodInfo, snapshot: Snapshot) -> Hashable | None:
        return tolerations_tolerate(pod.spec.tolerations, _UNSCHEDULABLE_TAINT)

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


# ---------------------------------------------------------------------- QueueingHint
def queueing_hint(event: ClusterEvent, pod: Pod, old: Any, new: Any, handle: Handle) -> bool | None:
    """kube's isSchedulableAfterNodeChange: Queue when the node accepts the pod now
    (schedulable, or the pod tolerates the unschedulable taint) and did not before."""
    if event.resource != EventResource.NODE or not isinstance(new, Node):
        return None

    def accepts(node: Node) -> bool:
        return not node.spec.unschedulable or tolerations_tolerate(
            pod.spec.tolerations, _UNSCHEDULABLE_TAINT
        )

    if not accepts(new):
        return False
    return not isinstance(old, Node) or not accepts(old)
