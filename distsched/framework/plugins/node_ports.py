"""NodePorts: a node must have every host port the pod asks for free (PreFilter, Filter).

Conflicts follow kube's HostPortInfo: 0.0.0.0 (or an empty hostIP) clashes with the same
protocol/port on any address, a specific address with itself and with 0.0.0.0.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from distsched.framework.cycle_state import CycleState
from distsched.framework.events import (
    NODE_ADD_OR_SCHEDULING_CHANGE,
    ActionType,
    ClusterEvent,
    EventResource,
)
from distsched.framework.interface import (
    FilterPlugin,
    FilterResult,
    Handle,
    PreFilterPlugin,
    PreFilterResult,
    SignPlugin,
)
from distsched.framework.podinfo import PodInfo, cycle_pod_info
from distsched.framework.snapshot import Snapshot
from distsched.framework.status import Status
from distsched.model import HostPort, pod_host_ports
from distsched.model.objects import Pod

NAME = "NodePorts"
EVENTS: tuple[ClusterEvent, ...] = (
    ClusterEvent(EventResource.POD, ActionType.DELETE),
    ClusterEvent(EventResource.NODE, NODE_ADD_OR_SCHEDULING_CHANGE),
)
ERR_REASON = "node(s) didn't have free ports for the requested pod ports"
_STATE_KEY = "PreFilter" + NAME


class NodePorts(PreFilterPlugin, FilterPlugin, SignPlugin):
    name = NAME
    reads_only_its_node = True

    def sign_pod(self, pod: Pod, info: PodInfo, snapshot: Snapshot) -> Hashable | None:
        return info.host_ports

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status | None]:
        ports = cycle_pod_info(state, pod).host_ports
        if not ports:
            return None, Status.skip()
        state.write(_STATE_KEY, ports)
        return None, None

    def filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, indices: np.ndarray
    ) -> FilterResult:
        ports: tuple[HostPort, ...] | None = state.get(_STATE_KEY)
        if ports is None:
            ports = cycle_pod_info(state, pod).host_ports
        conflicting: set[int] = set()
        for port in ports:
            conflicting |= snapshot.port_conflict_slots(port)
        if not conflicting:
            return FilterResult.all_pass()
        slots = np.fromiter(conflicting, dtype=np.int64, count=len(conflicting))
        return FilterResult.of(ERR_REASON, np.isin(indices, slots))


def new(args: dict[str, Any], handle: Handle) -> NodePorts:
    return NodePorts()


# ---------------------------------------------------------------------- QueueingHint
def _conflict(a: tuple[str, str, int], b: tuple[str, str, int]) -> bool:
    (ip_a, proto_a, port_a), (ip_b, proto_b, port_b) = a, b
    return port_a == port_b and proto_a == proto_b and (ip_a == ip_b or "0.0.0.0" in (ip_a, ip_b))


def queueing_hint(event: ClusterEvent, pod: Pod, old: Any, new: Any, handle: Handle) -> bool | None:
    """kube's isSchedulableAfterPodDeleted: an assigned pod's deletion helps only when it
    held a host port the pending pod wants. Node events: no hint (the pre-check)."""
    if event.resource != EventResource.ASSIGNED_POD or not event.has(ActionType.DELETE):
        return None
    if not isinstance(old, Pod):
        return None
    wanted = pod_host_ports(pod)
    held = pod_host_ports(old)
    return any(_conflict(w, h) for w in wanted for h in held)
