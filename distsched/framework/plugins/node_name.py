"""NodeName: a pod with spec.nodeName fits only that node (Filter)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from distsched.framework.cycle_state import CycleState
from distsched.framework.events import NODE_ADD_OR_SCHEDULING_CHANGE, ClusterEvent, EventResource
from distsched.framework.interface import FilterPlugin, FilterResult, Handle, SignPlugin
from distsched.framework.podinfo import PodInfo
from distsched.framework.snapshot import Snapshot
from distsched.model.objects import Pod

NAME = "NodeName"
EVENTS: tuple[ClusterEvent, ...] = (
    ClusterEvent(EventResource.NODE, NODE_ADD_OR_SCHEDULING_CHANGE),
)
ERR_REASON = "node(s) didn't match the requested node name"


class NodeName(FilterPlugin, SignPlugin):
    name = NAME
    reads_only_its_node = True
    reads_only_its_node_usage = True

    def sign_pod(self, pod: Pod, info: PodInfo, snapshot: Snapshot) -> Hashable | None:
        return pod.spec.node_name

    def filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, indices: np.ndarray
    ) -> FilterResult:
        wanted = pod.spec.node_name
        if not wanted:
            return FilterResult.all_pass()
        index = snapshot.get_index(wanted)
        mismatch = indices != index if index is not None else np.ones(indices.size, dtype=bool)
        return FilterResult.of(ERR_REASON, mismatch, unresolvable=True)


def new(args: dict[str, Any], handle: Handle) -> NodeName:
    return NodeName()
