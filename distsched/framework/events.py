"""Cluster events and the matching rule the queue uses to wake unschedulable pods.

A plugin module's ``EVENTS`` lists the events that may make a pod it rejected schedulable
(kube's EventsToRegister). ``None`` means the plugin did not say, and it is then treated
as interested in every event, as kube does for plugins without EnqueueExtensions.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntFlag


class ActionType(IntFlag):
    ADD = 1 << 0
    DELETE = 1 << 1
    UPDATE_NODE_ALLOCATABLE = 1 << 2
    UPDATE_NODE_LABEL = 1 << 3
    UPDATE_NODE_TAINT = 1 << 4
    UPDATE_NODE_CONDITION = 1 << 5
    UPDATE_NODE_ANNOTATION = 1 << 6
    UPDATE_POD_LABEL = 1 << 7
    UPDATE_POD_SCALE_DOWN = 1 << 8
    UPDATE_POD_TOLERATIONS = 1 << 9
    UPDATE_POD_SCHEDULING_GATES_ELIMINATED = 1 << 10
    UPDATE_POD_OTHER = 1 << 11
    UPDATE = (
        UPDATE_NODE_ALLOCATABLE
        | UPDATE_NODE_LABEL
        | UPDATE_NODE_TAINT
        | UPDATE_NODE_CONDITION
        | UPDATE_NODE_ANNOTATION
        | UPDATE_POD_LABEL
        | UPDATE_POD_SCALE_DOWN
        | UPDATE_POD_TOLERATIONS
        | UPDATE_POD_SCHEDULING_GATES_ELIMINATED
        | UPDATE_POD_OTHER
    )
    ALL = ADD | DELETE | UPDATE


class EventResource:
    """Resource names. Plugins register POD; the queue emits ASSIGNED_POD / UNSCHEDULED_POD."""

    POD = "Pod"
    ASSIGNED_POD = "AssignedPod"
    UNSCHEDULED_POD = "UnschedulablePod"
    NODE = "Node"
    POD_GROUP = "PodGroup"
    PERSISTENT_VOLUME = "PersistentVolume"
    PERSISTENT_VOLUME_CLAIM = "PersistentVolumeClaim"
    STORAGE_CLASS = "storage.k8s.io/StorageClass"
    CSI_NODE = "storage.k8s.io/CSINode"
    CSI_DRIVER = "storage.k8s.io/CSIDriver"
    CSI_STORAGE_CAPACITY = "storage.k8s.io/CSIStorageCapacity"
    WILDCARD = "*"


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    resource: str
    action: ActionType
    label: str = ""

    def is_wildcard(self) -> bool:
        return self.resource == EventResource.WILDCARD and self.action == ActionType.ALL

    def has(self, action: ActionType) -> bool:
        """Whether the event's action includes any of ``action``'s bits. The queue asks
        this per parked pod and event: plain int arithmetic, as IntFlag's ``&`` builds a
        new member each time (~10x slower)."""
        return _bits(self.action, action) != 0

    def matches(self, incoming: ClusterEvent) -> bool:
        """Whether this registered event covers ``incoming`` (kube's MatchClusterEvents).

        ``incoming`` must be the same or more specific: a registration for Update matches
        an incoming UpdateNodeLabel, but a registration for UpdateNodeLabel does not match
        an incoming generic Update.
        """
        if self.is_wildcard():
            return True
        return (
            _resource_matches(self.resource, incoming.resource)
            and _bits(self.action, incoming.action) != 0
            and incoming.action <= self.action
        )


_bits = int.__and__


def _resource_matches(registered: str, incoming: str) -> bool:
    return (
        registered == EventResource.WILDCARD
        or registered == incoming
        or (
            registered == EventResource.POD
            and incoming in (EventResource.ASSIGNED_POD, EventResource.UNSCHEDULED_POD)
        )
    )


WILDCARD_EVENT = ClusterEvent(EventResource.WILDCARD, ActionType.ALL, "WildCardEvent")

# The events the queue emits (kube's framework/events.go names).
NODE_ADD = ClusterEvent(EventResource.NODE, ActionType.ADD, "NodeAdd")
NODE_DELETE = ClusterEvent(EventResource.NODE, ActionType.DELETE, "NodeDelete")
NODE_ALLOCATABLE_CHANGE = ClusterEvent(
    EventResource.NODE, ActionType.UPDATE_NODE_ALLOCATABLE, "NodeAllocatableChange"
)
NODE_LABEL_CHANGE = ClusterEvent(
    EventResource.NODE, ActionType.UPDATE_NODE_LABEL, "NodeLabelChange"
)
NODE_TAINT_CHANGE = ClusterEvent(
    EventResource.NODE, ActionType.UPDATE_NODE_TAINT, "NodeTaintChange"
)
# kube reports a change of spec.unschedulable as a taint change.
NODE_SPEC_UNSCHEDULABLE_CHANGE = ClusterEvent(
    EventResource.NODE, ActionType.UPDATE_NODE_TAINT, "NodeSpecUnschedulableChange"
)
NODE_CONDITION_CHANGE = ClusterEvent(
    EventResource.NODE, ActionType.UPDATE_NODE_CONDITION, "NodeConditionChange"
)
ASSIGNED_POD_ADD = ClusterEvent(EventResource.ASSIGNED_POD, ActionType.ADD, "AssignedPodAdd")
ASSIGNED_POD_UPDATE = ClusterEvent(
    EventResource.ASSIGNED_POD, ActionType.UPDATE, "AssignedPodUpdate"
)
# A running pod's labels changed (kube's AssignedPodUpdate, as its updatePodInCache emits
# it for a label change): specific, so plugins registered for UpdatePodLabel match it.
ASSIGNED_POD_LABEL_CHANGE = ClusterEvent(
    EventResource.ASSIGNED_POD, ActionType.UPDATE_POD_LABEL, "AssignedPodUpdate"
)
ASSIGNED_POD_DELETE = ClusterEvent(
    EventResource.ASSIGNED_POD, ActionType.DELETE, "AssignedPodDelete"
)
POD_LABEL_CHANGE = ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_LABEL, "PodLabelChange")
POD_TOLERATION_CHANGE = ClusterEvent(
    EventResource.POD, ActionType.UPDATE_POD_TOLERATIONS, "PodTolerationChange"
)
POD_SCHEDULING_GATES_ELIMINATED = ClusterEvent(
    EventResource.POD,
    ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED,
    "PodSchedulingGateChange",
)

# Node registration shared by the filter plugins that register Node/Add: kube also
# registers UpdateNodeLabel|UpdateNodeTaint for them, because the queue's pre-check may
# drop a Node/Add (kubernetes/kubernetes#109437).
NODE_ADD_OR_SCHEDULING_CHANGE = (
    ActionType.ADD | ActionType.UPDATE_NODE_LABEL | ActionType.UPDATE_NODE_TAINT
)
NODE_ANNOTATION_CHANGE = ClusterEvent(
    EventResource.NODE, ActionType.UPDATE_NODE_ANNOTATION, "NodeAnnotationChange"
)

# Why a pod entered a sub-queue: the ``event`` label of queue_incoming_pods_total, which
# the queue counts itself on every move it makes (kube's framework.EventUnscheduledPodAdd,
# ScheduleAttemptFailure, BackoffComplete, ... and the ClusterEvents above by label).
# A pending pod the handlers add (kube's EventUnscheduledPodAdd; the label is kube's
# earlier PodAdd, which dashboards read) or update.
UNSCHEDULED_POD_ADD = ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.ADD, "PodAdd")
UNSCHEDULED_POD_UPDATE = ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE, "PodUpdate")
# The leftover flush: a pod unschedulable for longer than the queue's maximum.
UNSCHEDULABLE_TIMEOUT = ClusterEvent(EventResource.WILDCARD, ActionType.ALL, "UnschedulableTimeout")
SCHEDULE_ATTEMPT_FAILURE = "ScheduleAttemptFailure"
BACKOFF_COMPLETE = "BackoffComplete"
# kube 1.33+ (SchedulerPopFromBackoffQ): a pod popped from backoffQ while activeQ was empty.
POP_FROM_BACKOFF = "PopFromBackoffQ"
# distsched's own: a worker's lease ran out (the worker died or stalled), and popped pods
# an infrastructure error kept the worker from attempting, handed back uncounted.
LEASE_EXPIRED = "LeaseExpired"
# A PodGroup added or changed: the queue releases its held members (GangScheduling).
POD_GROUP_ADD = ClusterEvent(EventResource.POD_GROUP, ActionType.ADD, "PodGroupAdd")
# The store kinds of the storage objects the volume plugins read -> their EventResource.
STORAGE_RESOURCES = {
    "PersistentVolume": EventResource.PERSISTENT_VOLUME,
    "PersistentVolumeClaim": EventResource.PERSISTENT_VOLUME_CLAIM,
    "StorageClass": EventResource.STORAGE_CLASS,
    "CSINode": EventResource.CSI_NODE,
    "CSIDriver": EventResource.CSI_DRIVER,
    "CSIStorageCapacity": EventResource.CSI_STORAGE_CAPACITY,
}


def storage_event(kind: str, action: ActionType) -> ClusterEvent:
    """A storage object's event, labelled as kube's ClusterEvent.Label ("<resource><action>":
    "PersistentVolumeClaimAdd", "storage.k8s.io/CSINodeUpdate")."""
    resource = STORAGE_RESOURCES[kind]
    verb = {ActionType.ADD: "Add", ActionType.DELETE: "Delete"}.get(action, "Update")
    return ClusterEvent(resource, action, f"{resource}{verb}")


UNATTEMPTED = "Unattempted"
