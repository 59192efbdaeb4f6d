"""PrioritySort: higher priority first, then earlier queue timestamp (QueueSort)."""

from __future__ import annotations

from typing import Any

from distsched.framework.events import ClusterEvent
from distsched.framework.interface import Handle, QueueSortItem, QueueSortPlugin
from distsched.model.resources import pod_priority

NAME = "PrioritySort"
EVENTS: tuple[ClusterEvent, ...] = ()


class PrioritySort(QueueSortPlugin):
    name = NAME

    def less(self, a: QueueSortItem, b: QueueSortItem) -> bool:
        pa, pb = pod_priority(a.pod), pod_priority(b.pod)
        return pa > pb or (pa == pb and a.timestamp < b.timestamp)


def new(args: dict[str, Any], handle: Handle) -> PrioritySort:
    return PrioritySort()
