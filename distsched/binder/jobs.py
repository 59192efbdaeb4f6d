"""Binding jobs: what a scheduling worker enqueues and what a binder process runs.

A job carries a batch of bindings so one rq job amortizes rq's per-job round trips.
Payloads are plain lists (msgpack). The enqueue side uses :class:`AllowListJob` with an
empty allow-list; binder processes resolve ``BIND_FUNCTION`` through their own allow-list
(:data:`distsched.binder.cycle.JOB_FUNCTIONS`), never by importing a name from Redis.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import redis
from rq import Queue

from distsched.binder.safety import AllowListJob, MsgpackSerializer
from distsched.keys import Keys

BIND_FUNCTION = "distsched.bind_batch"
JOB_TIMEOUT_S = 60
RESULT_TTL_S = 0  # results are not kept: the store and ledger are the record
FAILURE_TTL_S = 3600


@dataclass(frozen=True, slots=True)
class Binding:
    pod_key: str
    uid: str
    node: str
    profile: str
    cycle: int
    epoch: int
    token: str
    initial_attempt_ms: int = 0
    attempts: int = 1
    # Permit plugins that asked the pod to wait, and until when (ms); see framework/permit.py.
    permit_plugins: tuple[str, ...] = ()
    permit_deadline_ms: int = 0
    # Each waiting plugin's own deadline (ms), aligned with permit_plugins (kube: a timer per
    # plugin); empty = permit_deadline_ms for every plugin.
    permit_deadlines_ms: tuple[int, ...] = ()
    # The scheduling cycle's CycleState, its plain-data entries (CycleState.to_wire), for
    # PreBind/Bind/PostBind and Unreserve; empty for profiles that bind in one store call.
    state: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    def permit_deadlines(self) -> dict[str, int]:
        """Waiting plugin -> its deadline (ms)."""
        if len(self.permit_deadlines_ms) == len(self.permit_plugins):
            return dict(zip(self.permit_plugins, self.permit_deadlines_ms, strict=True))
        return dict.fromkeys(self.permit_plugins, self.permit_deadline_ms)

    def to_wire(self) -> list[object]:
        return [
            self.pod_key,
            self.uid,
            self.node,
            self.profile,
            self.cycle,
            self.epoch,
            self.token,
            self.initial_attempt_ms,
            self.attempts,
            list(self.permit_plugins),
            self.permit_deadline_ms,
            list(self.permit_deadlines_ms),
            self.state,
        ]

    @classmethod
    def from_wire(cls, item: list[object]) -> Binding:
        if not isinstance(item, list | tuple) or len(item) not in (9, 11, 13):
            raise ValueError(f"malformed binding: {item!r}")
        key, uid, node, profile, cycle, epoch, token, initial, attempts = item[:9]
        plugins, deadline = (item[9], item[10]) if len(item) >= 11 else ([], 0)
        deadlines, state = (item[11], item[12]) if len(item) == 13 else ([], {})
        if not isinstance(plugins, list | tuple) or not all(isinstance(p, str) for p in plugins):
            raise ValueError(f"malformed binding: {item!r}")
        if not isinstance(deadlines, list | tuple) or not all(
            isinstance(d, int) for d in deadlines
        ):
            raise ValueError(f"malformed binding: {item!r}")
        if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
            raise ValueError(f"malformed binding: {item!r}")
        return cls(
            str(key),
            str(uid),
            str(node),
            str(profile),
            int(cycle),  # type: ignore[call-overload]
            int(epoch),  # type: ignore[call-overload]
            str(token),
            int(initial),  # type: ignore[call-overload]
            int(attempts),  # type: ignore[call-overload]
            tuple(plugins),
            int(deadline),  # type: ignore[call-overload]
            tuple(deadlines),
            dict(state),
        )


def queue_name(keys: Keys) -> str:
    return f"distsched-bind-{keys.scheduler}"


def bind_queue(
    client: redis.Redis, keys: Keys, *, job_class: type[AllowListJob] = AllowListJob
) -> Queue:
    """The rq queue of binding jobs; binder processes pass their allow-listing job class."""
    return Queue(
        queue_name(keys),
        connection=client,
        serializer=MsgpackSerializer,
        job_class=job_class,
        default_timeout=JOB_TIMEOUT_S,
    )


def enqueue_bindings(queue: Queue, keys: Keys, bindings: list[Binding]) -> str:
    """One rq job for the batch; returns the job id.

    The job's description is given: rq would otherwise build it from the repr of every
    binding (then cut it to 75 characters), ~1.3 µs of the worker's CPU per pod."""
    job = queue.enqueue(
        BIND_FUNCTION,
        keys.scheduler,
        [b.to_wire() for b in bindings],
        result_ttl=RESULT_TTL_S,
        failure_ttl=FAILURE_TTL_S,
        description=f"{BIND_FUNCTION}({keys.scheduler!r}, <{len(bindings)} bindings>)",
    )
    return str(job.id)
