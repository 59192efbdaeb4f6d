"""Event pre-checks of kube-scheduler's event handlers, on one node at a time.

``node_admits`` is kube's ``preCheckForNode``: before a NodeAdd/NodeUpdate moves an
unschedulable pod back to the active queue, the pod must pass the admission checks
(resources fit against what the node already runs, node name, node selector and required
node affinity, host ports) and tolerate every NoSchedule taint. It does not consider
preemption; pods it leaves behind are retried by the leftover flush.

``node_change_events`` is kube's ``nodeSchedulingPropertiesChange``: a node update only
moves pods when the node became more schedulable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from distsched.framework import events
from distsched.framework.events import ClusterEvent
from distsched.model import HostPort, pod_host_ports, pod_requests
from distsched.model.nodeaffinity import pod_matches_node_selector_and_affinity
from distsched.model.objects import Node, Pod
from distsched.model.taints import find_untolerated_taint

NO_SCHEDULE = frozenset({"NoSchedule"})


def ports_conflict(wanted: Iterable[HostPort], used: Iterable[HostPort]) -> bool:
    """Host ports collide on the same protocol and port when either ip is 0.0.0.0 or both match."""
    used_list = list(used)
    for ip, proto, port in wanted:
        for uip, uproto, uport in used_list:
            if port == uport and proto == uproto and (ip == uip or "0.0.0.0" in (ip, uip)):
                return True
    return False


def resources_fit(pod: Pod, node: Node, requested: Mapping[str, int], pod_count: int) -> bool:
    allocatable = node.status.allocatable
    if pod_count + 1 > allocatable.get("pods", 0):
        return False
    for name, amount in pod_requests(pod).items():
        if amount and requested.get(name, 0) + amount > allocatable.get(name, 0):
            return False
    return True


def node_admits(
    pod: Pod,
    node: Node,
    *,
    requested: Mapping[str, int] | None = None,
    pod_count: int = 0,
    used_ports: Iterable[HostPort] = (),
) -> bool:
    """kube's preCheckForNode for one pod against one node and what already runs there."""
    if pod.spec.node_name and pod.spec.node_name != node.metadata.name:
        return False
    if not resources_fit(pod, node, requested or {}, pod_count):
        return False
    if not pod_matches_node_selector_and_affinity(pod, node):
        return False
    if ports_conflict(pod_host_ports(pod), used_ports):
        return False
    return find_untolerated_taint(node.spec.taints, pod.spec.tolerations, NO_SCHEDULE) is None


def node_change_events(old: Node, new: Node) -> list[ClusterEvent]:
    """The events a node update stands for; empty when it became no more schedulable."""
    changes: list[ClusterEvent] = []
    if old.spec.unschedulable and not new.spec.unschedulable:
        changes.append(events.NODE_SPEC_UNSCHEDULABLE_CHANGE)
    if old.status.allocatable != new.status.allocatable:
        changes.append(events.NODE_ALLOCATABLE_CHANGE)
    if old.metadata.labels != new.metadata.labels:
        changes.append(events.NODE_LABEL_CHANGE)
    if old.spec.taints != new.spec.taints:
        changes.append(events.NODE_TAINT_CHANGE)
    old_conditions = {c.type: c.status for c in old.status.conditions}
    new_conditions = {c.type: c.status for c in new.status.conditions}
    if old_conditions != new_conditions:
        changes.append(events.NODE_CONDITION_CHANGE)
    return changes
