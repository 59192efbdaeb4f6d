"""The scheduling queue's interface, value types and invariants.

Two implementations satisfy :class:`SchedulingQueue`: :mod:`distsched.queue_redis` (the
real one, Lua on Redis) and :mod:`distsched.queue_memory` (plain Python, the reference
and the oracle of the property-based tests). Both keep the same per-pod *info* record,
whose fields are listed in :data:`INFO_FIELDS`. In Redis it is one line of text
(``distsched/lua/lib/queue_record.lua`` is its only writer; :func:`encode_info` and
:func:`decode_info` are the Python twins); both implementations hand it out as a dict.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from distsched.clock import Clock
from distsched.redis_text import as_text

# Values of the info field "w" (where the pod is).
ACTIVE = "active"
BACKOFF = "backoff"
UNSCHEDULABLE = "unschedulable"
GATED = "gated"
INFLIGHT = "inflight"
DEAD = "dead"
ASSUMED = "assumed"
HANDED_OFF = ""  # left the queue's care (reserved/assumed by the cache, or bound)

SUB_QUEUES: tuple[str, ...] = (ACTIVE, BACKOFF, UNSCHEDULABLE, GATED, INFLIGHT, DEAD)
"""Sub-queues in the order counts() and heads() list them; each is one sorted set."""

OUTSIDE_QUEUES: frozenset[str] = frozenset({HANDED_OFF, ASSUMED})

INFO_FIELDS: Mapping[str, str] = {
    "uid": "pod uid",
    "p": "priority (int32)",
    "ts": "queue timestamp ms (set on add and on every failure re-add)",
    "its": "initial attempt timestamp ms (first add, never changed)",
    "a": "attempts (incremented at pop)",
    "w": "where: active|backoff|unschedulable|gated|inflight|dead|assumed|''",
    "m": "activeQ member when w=active, else '' (derived from ts and the key, not stored)",
    "pl": "comma-joined unschedulable plugins of the last failure ('' = none)",
    "cy": "scheduling cycle of the last pop",
    "e": "lease epoch of the last pop (fencing token)",
    "d": "deliveries: pops since the last orderly outcome (done / failure add), but those "
    "handed back unattempted",
    "bo": "backoff expiry ms (0 = never failed)",
}

OPTIONAL_INFO_FIELDS: Mapping[str, str] = {
    "u": "1 while the pod's object was updated in flight/assumed (cleared at failure or pop)",
}
"""Fields present only while they mean something (absent = 0)."""

# Results of add_unschedulable_if_not_present.
STALE = "stale"
PRESENT = "present"

ACTIVE_TS_DIGITS = 13
WAKE_CAP = 64
"""Longest the wake list may grow: more tokens than waiting workers only cost spins."""


RECORD_FIELDS = ("w", "e", "cy", "a", "d", "u", "p", "ts", "its", "bo", "pl", "uid")
"""The order of the fields in the stored record ``w|e|cy|...|pl|uid``: what the per-pod
moves (pop, reserve, bind) touch first, the uid last (it may hold any text)."""
_NUMERIC = frozenset({"p", "ts", "its", "a", "cy", "e", "d", "bo", "u"})


def encode_info(info: Mapping[str, Any]) -> str:
    """The stored text of an info dict (what lib/queue_record.lua's rec_encode writes)."""
    values = {**info, "u": int(info.get("u", 0))}
    return "|".join(str(int(values[f])) if f in _NUMERIC else str(values[f]) for f in RECORD_FIELDS)


def decode_info(key: str, raw: str | bytes) -> dict[str, Any]:
    """The info dict of a stored record (``m`` derived, ``u`` present only when set)."""
    text = as_text(raw)
    if text.startswith("{"):  # JSON, written before this layout (an in-place upgrade)
        legacy = json.loads(text)
        text = encode_info({**{f: 0 for f in _NUMERIC}, "pl": "", "uid": "", **legacy})
    parts = text.split("|", len(RECORD_FIELDS) - 1)
    if len(parts) != len(RECORD_FIELDS):
        raise ValueError(f"not a queue record for {key}: {text!r}")
    info: dict[str, Any] = {
        f: int(v) if f in _NUMERIC else v for f, v in zip(RECORD_FIELDS, parts, strict=True)
    }
    info["m"] = active_member(info["ts"], key) if info["w"] == ACTIVE else ""
    if not info["u"]:
        del info["u"]
    return info


@dataclass(frozen=True, slots=True)
class QueueConfig:
    """The queue's timing. Its backoff is the only one: the failure handler, the binder's
    failure path and the reaper of expired reservations all requeue with it."""

    initial_backoff_ms: int = 1_000
    max_backoff_ms: int = 10_000
    unschedulable_max_ms: int = 300_000
    lease_ms: int = 10_000
    max_deliveries: int = 5
    pop_from_backoff: bool = True
    """kube 1.33+'s SchedulerPopFromBackoffQ (beta, on by default): a pop that empties
    activeQ takes the rest from backoffQ, pods a plugin rejected, earliest second of
    backoff expiry first and activeQ's order within one (``backoff_pop_order``); pods
    backing off after an error wait out their backoff."""


BACKOFF_WINDOW_MS = 1_000
"""kube's backoffQOrderingWindowDuration: the pop from backoffQ orders by this window of
backoff expiry first, by activeQ's order within one."""


def backoff_pop_order(key: str, info: Mapping[str, Any]) -> tuple[int, int, int, str]:
    """The order in which a pop takes pods from backoffQ (queue_pop.lua's twin)."""
    return (info["bo"] // BACKOFF_WINDOW_MS, -info["p"], info["ts"], key)


class PodBackoffSettings(Protocol):
    """podInitialBackoffSeconds / podMaxBackoffSeconds of a KubeSchedulerConfiguration
    (``distsched.framework.profile.SchedulerConfig``)."""

    @property
    def pod_initial_backoff_seconds(self) -> int: ...

    @property
    def pod_max_backoff_seconds(self) -> int: ...


def backoff_config(
    settings: PodBackoffSettings | None, queue_config: QueueConfig | None = None
) -> QueueConfig:
    """``queue_config`` (default: :class:`QueueConfig`'s) with the scheduler configuration's
    backoff, unchanged when there is no configuration. The one conversion: the workers
    and the binders build their queue and ledger with it."""
    queue_config = queue_config or QueueConfig()
    if settings is None:
        return queue_config
    return replace(
        queue_config,
        initial_backoff_ms=settings.pod_initial_backoff_seconds * 1000,
        max_backoff_ms=settings.pod_max_backoff_seconds * 1000,
    )


@dataclass(frozen=True, slots=True)
class PodEntry:
    """What the event handlers hand the queue about one pod."""

    key: str  # namespace/name
    uid: str
    priority: int
    gated: bool = False  # PreEnqueue (scheduling gates) rejects the pod for now
    # The pod group ("ns/name") of a gang member, "" for none: the queue holds the member
    # until its group is complete and pops the gang whole (lua/lib/gang.lua).
    group: str = ""


@dataclass(frozen=True, slots=True)
class QueuedPod:
    """A pod handed to a scheduling worker by pop()."""

    key: str
    uid: str
    priority: int
    timestamp_ms: int
    initial_attempt_ms: int
    attempts: int
    cycle: int
    epoch: int
    unschedulable_plugins: frozenset[str]

    @classmethod
    def from_info(cls, key: str, info: Mapping[str, Any]) -> QueuedPod:
        return cls(
            key=key,
            uid=info["uid"],
            priority=int(info["p"]),
            timestamp_ms=int(info["ts"]),
            initial_attempt_ms=int(info["its"]),
            attempts=int(info["a"]),
            cycle=int(info["cy"]),
            epoch=int(info["e"]),
            unschedulable_plugins=split_plugins(info["pl"]),
        )


@dataclass(frozen=True, slots=True)
class QueueState:
    """A full, consistent copy of the queue (tests and tooling; O(pods))."""

    sub_queues: dict[str, Sequence[tuple[str, float]]]  # name -> [(member, score)], set order
    infos: dict[str, dict[str, Any]]
    cycle: int
    move_cycle: int
    epoch: int


def backoff_duration_ms(attempts: int, cfg: QueueConfig) -> int:
    """kube's calculateBackoffDuration: initial, doubled per attempt after the first, capped."""
    duration = cfg.initial_backoff_ms
    for _ in range(1, attempts):
        if duration > cfg.max_backoff_ms - duration:
            return cfg.max_backoff_ms
        duration += duration
    return duration


def active_member(timestamp_ms: int, key: str) -> str:
    return f"{timestamp_ms:0{ACTIVE_TS_DIGITS}d}|{key}"


def key_of_active_member(member: str) -> str:
    return member.split("|", 1)[1]


def join_plugins(plugins: Iterable[str]) -> str:
    return ",".join(sorted(set(plugins)))


def split_plugins(joined: str) -> frozenset[str]:
    return frozenset(p for p in joined.split(",") if p)


def validate_plugin_names(plugins: Iterable[str]) -> None:
    for name in plugins:
        if not name or "," in name or "|" in name:
            raise ValueError(f"plugin name must be non-empty and without ',' or '|': {name!r}")


def validate_key(key: str) -> None:
    if "/" not in key or "|" in key:
        raise ValueError(f"pod key must be 'namespace/name' without '|': {key!r}")


INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def validate_entry(entry: PodEntry) -> None:
    validate_key(entry.key)
    if not INT32_MIN <= entry.priority <= INT32_MAX:
        raise ValueError(f"priority of {entry.key} is outside int32: {entry.priority}")


def queue_invariant_violations(state: QueueState) -> list[str]:
    """Every pod is in exactly one place, and each set's score means what it should."""
    problems: list[str] = []
    seen: dict[str, str] = {}
    for queue, members in state.sub_queues.items():
        for member, score in members:
            key = key_of_active_member(member) if queue == ACTIVE else member
            if key in seen:
                problems.append(f"{key} is in both {seen[key]} and {queue}")
            seen[key] = queue
            info = state.infos.get(key)
            if info is None:
                problems.append(f"{key} is in {queue} but has no info")
                continue
            if info["w"] != queue:
                problems.append(f"{key} is in {queue} but info says {info['w']!r}")
            expected = {
                ACTIVE: -info["p"],
                BACKOFF: info["bo"],
                UNSCHEDULABLE: info["ts"],
                GATED: info["ts"],
            }.get(queue)
            if expected is not None and score != expected:
                problems.append(f"{key} has score {score} in {queue}, expected {expected}")
            if queue == ACTIVE and member != info["m"]:
                problems.append(f"{key} is {member!r} in active but info says {info['m']!r}")
    for key, info in state.infos.items():
        where = info["w"]
        if where in OUTSIDE_QUEUES:
            if key in seen:
                problems.append(f"{key} is handed off ({where!r}) yet in {seen[key]}")
        elif where not in SUB_QUEUES:
            problems.append(f"{key} has unknown place {where!r}")
        elif seen.get(key) != where:
            problems.append(f"{key} says {where!r} but is in {seen.get(key)!r}")
        if where != ACTIVE and info["m"] != "":
            problems.append(f"{key} keeps active member {info['m']!r} while {where!r}")
    return problems


class SchedulingQueue(Protocol):
    """kube-scheduler's PriorityQueue, with leases. Time always comes in as ``now_ms``.

    Each implementation counts the pods its moves put into a sub-queue itself
    (``queue_incoming_pods_total{queue, event}``, :func:`distsched.metrics.count_incoming`),
    labelled with the events of :mod:`distsched.framework.events`: add (PodAdd), update
    (PodUpdate), a failure (ScheduleAttemptFailure), the flushes (BackoffComplete,
    UnschedulableTimeout), a move request (its event), an expired lease (LeaseExpired), a
    hand-back (Unattempted). The ledger's and the store's hand-offs are not counted."""

    config: QueueConfig

    def add(self, entries: Sequence[PodEntry], *, now_ms: int) -> int: ...

    def update(self, entry: PodEntry, *, now_ms: int) -> str: ...

    def delete(self, keys: Sequence[str], *, now_ms: int, uids: Sequence[str] | None = None) -> int:
        """Remove pods from wherever they are; with ``uids`` only the record of that uid
        (a re-created pod of the same name keeps its place)."""
        ...

    def pop(self, max_pods: int, *, now_ms: int) -> list[QueuedPod]: ...

    def pop_blocking(self, max_pods: int, *, timeout_s: float, clock: Clock) -> list[QueuedPod]: ...

    def done(self, key: str, *, epoch: int) -> bool: ...

    def done_many(self, leases: Sequence[tuple[str, int]]) -> list[bool]: ...

    def forget(self, keys: Sequence[str]) -> int: ...

    def hand_back(self, leases: Sequence[tuple[str, int]]) -> list[str]:
        """Popped pods their worker never attempted (an infrastructure error stopped it),
        each (key, epoch) as popped: their pop is not counted (attempts and deliveries
        -1) and a pod still inflight, or dead-lettered by a later pop, goes back to
        activeQ at its old place. A pod popped again since, deleted, given an orderly
        outcome (d = 0) or assumed is left alone. Returns where each pod is afterwards
        ('' when left alone; a key listed twice is handed back once)."""
        ...

    def assume(self, leases: Sequence[tuple[str, int, str]]) -> list[bool]:
        """The queue's half of a reservation: each (key, epoch, uid) still leased under
        that epoch leaves inflight as assumed (the ledger's reservation script does this
        move atomically with the reservation)."""
        ...

    def requeue_released(self, keys: Sequence[str], *, now_ms: int) -> list[str]:
        """The queue's half of releasing an assumed pod without a binding (expired, node
        gone): backoffQ for the backoff of its attempts, activeQ when that is 0. Returns
        where each went ('' when it was not assumed)."""
        ...

    def add_unschedulable_if_not_present(
        self,
        key: str,
        *,
        epoch: int,
        plugins: Iterable[str],
        now_ms: int,
        error: bool = False,
    ) -> str: ...

    def flush_backoff_completed(self, *, now_ms: int) -> int: ...

    def flush_unschedulable_leftover(self, *, now_ms: int) -> int: ...

    def move_all_to_active_or_backoff(
        self,
        event: str,
        *,
        now_ms: int,
        interested_plugins: frozenset[str] | None,
        keys: Sequence[str] | None = None,
    ) -> int: ...

    def reclaim_expired_leases(self, *, now_ms: int) -> list[str]: ...

    def set_gang_minimums(self, minimums: Mapping[str, int | None]) -> int:
        """Gangs (kube's GangScheduling PreEnqueue, in the queue): record each pod group's
        minimum (None: its PodGroup is gone). A member of a group (``PodEntry.group``) is
        held in the gated set while its group has no minimum or fewer members than it;
        once complete, every held member goes to activeQ together. A pop that takes one
        member takes its siblings waiting in activeQ, backoffQ or the unschedulable set
        too, so no two workers ever hold parts of one gang. Returns how many held members
        this call released."""
        ...

    def gang_members(self, group: str) -> list[str]:
        """The keys of the pod group's existing members (pending or placed), join order."""
        ...

    def gang_minimums(self) -> dict[str, int]: ...

    def unschedulable_pods(self) -> list[tuple[str, frozenset[str]]]: ...

    def unschedulable_keys(self) -> list[str]: ...

    def counts(self) -> dict[str, int]: ...

    def heads(self, n: int) -> dict[str, list[str]]: ...

    def info(self, key: str) -> dict[str, Any] | None: ...

    def where(self, key: str) -> str | None: ...

    def dump(self) -> QueueState: ...
