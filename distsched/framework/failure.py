"""The one failure handler of both cycles (kube's FailureHandler, ``handleSchedulingFailure``,
and ``handleBindingCycleError`` before it for the binding cycle, in schedule_one.go).

A worker's scheduling cycle and a binder's binding cycle end a failed pod the same way,
through :meth:`FailureHandler.handle`, given what failed and why (:class:`Failure`):

1. undo what the cycle did: Unreserve (the profile's Reserve plugins that ran for the
   node), then forget the ledger's reservation (kube's Cache.ForgetPod);
2. back to the queue (AddUnschedulableIfNotPresent): the unschedulable set, or backoffQ
   for an error; the queue counts the move itself (ScheduleAttemptFailure);
3. the explain record (``distsched explain``), then, unless the pod belongs to a newer
   attempt by now, the PodScheduled=False condition and a FailedScheduling event through
   the :class:`~distsched.framework.cluster_writer.ClusterWriter` (the events of a batch
   of failures in one call);
4. a scheduling attempt counts its result and duration (a binding failure was counted
   as scheduled by its worker, and as a failed binding by its binder);
5. after binding failures, one move request (AssignedPodDelete): the room the released
   reservations held may help pods that wait for it (kube moves them on unreserve).

Each role keeps only what is its own: the worker forgets the pod in its local snapshot,
the binder counts its outcome.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import redis

from distsched import metrics
from distsched.clock import Clock
from distsched.event_log import PodEvent
from distsched.explain_record import Explanation, record_failure
from distsched.framework.cluster_writer import (
    FAILED_SCHEDULING,
    SCHEDULER_ERROR,
    UNSCHEDULABLE,
    WARNING,
    ClusterWriter,
    event_message,
)
from distsched.framework.cycle_state import CycleState
from distsched.framework.events import ASSIGNED_POD_DELETE
from distsched.framework.profile import Profiles
from distsched.keys import Keys
from distsched.model import Pod, PodRef
from distsched.queue_types import STALE, SchedulingQueue

log = logging.getLogger(__name__)

SCHEDULING = "scheduling"
BINDING = "binding"


class Reservations(Protocol):
    """The ledger's half of a failure: forget a reservation (kube's Cache.ForgetPod)."""

    def release(self, pod_key: str, token: str | None = None) -> bool: ...


@dataclass(frozen=True, slots=True)
class Failure:
    """One pod's failed cycle: what failed, why, and what the cycle had done to undo."""

    pod: PodRef
    epoch: int  # the queue lease the cycle ran under: a newer one makes the requeue stale
    profile: str
    message: str  # kube's "0/N nodes are available: ..." or the error
    cycle: str = SCHEDULING  # or BINDING
    plugins: tuple[str, ...] = ()  # the plugins that rejected the pod (a FitError's)
    error: bool = True  # an error (backoff, SchedulerError), not a rejection (Unschedulable)
    started: float = 0.0  # time.perf_counter() at the attempt's start (scheduling cycle)
    reserved_on: str = ""  # the node the Reserve plugins ran for: Unreserve them
    token: str = ""  # the ledger holds the pod's reservation under this token: forget it
    parsed: Pod | None = None  # the pod, for Unreserve and to spare an unchanged condition
    state: CycleState | None = None  # the cycle's state, for Unreserve
    # The PodScheduled=False (reason, message) written already: a preemptor's goes with
    # its nomination. The condition is written unless the pod says it already.
    said: tuple[str, str] | None = None

    @property
    def reason(self) -> str:
        """The PodScheduled=False reason (kube: Unschedulable when rejected)."""
        return SCHEDULER_ERROR if self.error else UNSCHEDULABLE


def says_already(pod: Pod | None, reason: str, message: str) -> bool:
    """Whether the pod (as last seen) carries PodScheduled=False with this reason and
    message already (kube's updatePod writes nothing then)."""
    if pod is None:
        return False
    return any(
        c.type == "PodScheduled"
        and c.status == "False"
        and (c.reason, c.message) == (reason, message)
        for c in pod.status.conditions
    )


@dataclass
class FailureHandler:
    """The failure path of one role (a worker or a binder), built once from its parts."""

    client: redis.Redis
    keys: Keys
    queue: SchedulingQueue
    reservations: Reservations
    writer: ClusterWriter
    profiles: Profiles
    clock: Clock
    # Which unschedulable pods freed room may help (the move after binding failures).
    interested_on_delete: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        self.interested_on_delete = frozenset().union(
            *(fw.plugins_interested_in(ASSIGNED_POD_DELETE) for fw in self.profiles.values())
        )

    def handle(self, failures: Sequence[Failure]) -> list[str]:
        """End each failed cycle (see the module docstring); returns where each pod went
        (a sub-queue, or the queue's "stale"/"present")."""
        now = self.clock.now_ms()
        events: list[PodEvent] = []
        where = [self._handle(failure, now, events) for failure in failures]
        self.writer.record_events(events)
        if any(failure.cycle == BINDING for failure in failures):
            self.queue.move_all_to_active_or_backoff(
                ASSIGNED_POD_DELETE.label, now_ms=now, interested_plugins=self.interested_on_delete
            )
        return where

    def _handle(self, failure: Failure, now: int, events: list[PodEvent]) -> str:
        key = failure.pod.key
        fw = self.profiles.get(failure.profile)
        if failure.reserved_on and fw is not None and failure.parsed is not None:
            state = failure.state or CycleState()
            fw.run_reserve_plugins_unreserve(state, failure.parsed, failure.reserved_on)
        if failure.token:
            self.reservations.release(key, failure.token)
        where = self.queue.add_unschedulable_if_not_present(
            key, epoch=failure.epoch, plugins=failure.plugins, now_ms=now, error=failure.error
        )
        record_failure(
            self.client,
            self.keys,
            key,
            Explanation(
                failure.message, failure.plugins, profile=failure.profile, at_ms=now, queue=where
            ),
        )
        if where != STALE:
            events.append(self._tell_the_cluster(failure))
        if failure.cycle == SCHEDULING:
            result = "error" if failure.error else "unschedulable"
            attempts, duration = metrics.attempt_series(result, failure.profile)
            attempts.inc()
            duration.observe(time.perf_counter() - failure.started)
            log.debug("pod %s: %s (%s)", key, failure.message, where)
        else:
            log.warning("pod %s: %s; requeued: %s", key, failure.message, where)
        return where

    def _tell_the_cluster(self, failure: Failure) -> PodEvent:
        """kube's failure handler: the pod's condition, and the FailedScheduling event to
        record (with the others of the batch)."""
        reason = failure.reason
        if failure.said != (reason, failure.message) and not says_already(
            failure.parsed, reason, failure.message
        ):
            self.writer.pod_unschedulable(failure.pod, reason=reason, message=failure.message)
        return PodEvent(
            failure.pod.key,
            failure.pod.uid,
            WARNING,
            FAILED_SCHEDULING,
            event_message(failure.message),
            source=failure.profile,
        )
