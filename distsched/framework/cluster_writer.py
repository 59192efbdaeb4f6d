"""What the scheduler writes back to the cluster, behind one small interface (the part of
kube's clientset that kube-scheduler uses).

The roles write a few things: bindings (the binder, DefaultBinder), preemption's victims
and nominations (the worker's PostFilter), the PodScheduled=False condition of a pod
whose attempt failed and kube-scheduler's events (Scheduled, FailedScheduling, Preempted; the
failure handler, the binder, preemption). Standalone, the Redis store is
the cluster and :class:`distsched.store.writer.StoreWriter` writes into it (the events
into the stream of :mod:`distsched.event_log`); against a real
cluster the API-server bridge implements the same interface (pods/binding, status
patches, deletes, events) and the store records what the API server accepted.

Refusals raise the store's errors (:class:`distsched.store.StoreError`: ``NotFound``,
``UidMismatch``, ``BindConflict``, ``Conflict``) whichever implementation runs, so the
roles handle them once. A Redis error is never a refusal: it propagates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from distsched.event_log import PodEvent
from distsched.model import Pod, PodRef

# kube's event types and the reasons kube-scheduler records.
NORMAL = "Normal"
WARNING = "Warning"
SCHEDULED = "Scheduled"
FAILED_SCHEDULING = "FailedScheduling"
PREEMPTED = "Preempted"

# Reasons of the PodScheduled=False condition (kube's v1.PodReasonUnschedulable and
# v1.PodReasonSchedulerError).
UNSCHEDULABLE = "Unschedulable"
SCHEDULER_ERROR = "SchedulerError"

MAX_EVENT_MESSAGE = 1024
"""kube-scheduler truncates an event's message to this many characters (truncateMessage)."""


def event_message(message: str) -> str:
    """``message`` cut to :data:`MAX_EVENT_MESSAGE` characters, as kube cuts it."""
    if len(message) <= MAX_EVENT_MESSAGE:
        return message
    return message[: MAX_EVENT_MESSAGE - 3] + "..."


class ClusterWriter(Protocol):
    """The writes of the scheduling roles (see the module docstring)."""

    checks_reservations: bool
    """Whether :meth:`bind_many` with ``reservations`` checks the ledger's reservation in
    the same step as the binding (the store's script does; an API server cannot, so the
    binder claims the reservations first)."""

    def bind_many(
        self,
        bindings: Sequence[tuple[str, str, str]],
        *,
        reservations: Mapping[str, str] | None = None,
        scheduled_by: Mapping[str, str] | None = None,
    ) -> Sequence[str]:
        """Bind each (pod key, uid, node); one answer per binding, in order: "bound",
        "already-bound" (to that node: nothing written), "conflict" (bound elsewhere),
        "not-found", "uid-mismatch", or, with ``reservations`` (pod key -> the ledger's
        token: bind only while the ledger holds it, and confirm it), "unreserved". With
        ``scheduled_by`` (pod key -> its scheduler name), each pod bound gets kube's
        Scheduled event (the store's script records them with the binding)."""
        ...

    def bind(self, pod: PodRef, node: str) -> str:
        """One binding (DefaultBinder's): "bound" or "already-bound"; raises when refused."""
        ...

    def preempt(self, victim: Pod, *, preemptor: Pod, node: str) -> None:
        """kube's PreemptPod: delete the victim (that incarnation only; one gone already
        is what preemption wanted) for ``preemptor`` on ``node``, with a Preempted event
        (and, against an API server, the DisruptionTarget condition first). Raises when
        refused (another incarnation holds the name)."""
        ...

    def preempt_all(
        self, victims: Sequence[Pod], *, preemptor: Pod, node: str
    ) -> Sequence[Exception | None]:
        """:meth:`preempt` of each victim of one preemptor, as few round trips as the
        writer can: per victim None, or the refusal (a ``StoreError``) :meth:`preempt`
        would raise."""
        ...

    def deleting(self, pod_keys: Sequence[str]) -> bool:
        """Whether a deletion :meth:`preempt` was asked for, of one of these pods, is still
        under way: never for the store (it deletes before answering); against an API
        server, until the requests are answered (kube's async preemption)."""
        ...

    def set_nominated_node(
        self,
        pod: PodRef,
        node: str,
        *,
        unschedulable: tuple[str, str] | None = None,
        seen: Mapping[str, object] | None = None,
    ) -> None:
        """Record status.nominatedNodeName ("" clears it); raises when refused. With
        ``unschedulable`` (reason, message), the preemptor's PodScheduled=False of
        :meth:`pod_unschedulable` goes with it, as kube's failure handler writes both in
        one status update; a pod bound meanwhile is then refused, with no nomination.
        ``seen``: the pod's object as the caller read it, which a writer may start from
        (its resourceVersion tells whether it is still current)."""
        ...

    def pod_unschedulable(self, pod: PodRef, *, reason: str, message: str) -> bool:
        """Set the pending pod's condition PodScheduled=False with ``reason``
        (:data:`UNSCHEDULABLE` or :data:`SCHEDULER_ERROR`) and ``message``, as kube's
        failure handler does; nothing is written when the pod already says so. Best
        effort: False, and nothing written, when the pod is gone, another incarnation
        or bound meanwhile."""
        ...

    def bind_volumes(
        self,
        pod: PodRef,
        node: str,
        *,
        static: Sequence[tuple[str, str]],
        provision: Sequence[str],
    ) -> None:
        """VolumeBinding's PreBind: bind each (PV, claim name) of ``static`` both ways and
        set the selected-node annotation to ``node`` on each claim of ``provision`` (the
        claims are in the pod's namespace). A PV taken since raises ``Conflict``."""
        ...

    def record_events(self, events: Sequence[PodEvent]) -> None:
        """Record events about pods (``event_type`` :data:`NORMAL` or :data:`WARNING`;
        kube's EventRecorder.Eventf), all in one go. Best effort, never raises a refusal
        (a Redis error propagates as for every write)."""
        ...
