"""kube-scheduler's scheduling queue (PriorityQueue) on Redis.

This module owns every move between sub-queues; the ledger's and the store's scripts make
the cache hand-offs through the same record library. Every move is one Lua script
in ``distsched/lua/queue_<move>.lua`` and a batch is one script call, so a move is atomic
and any number of scheduling workers may share the queue. Each script checks the keys it
will write (their types, the counters it reads; ``lua/lib/precheck.lua``) before its
first write, since Redis does not roll back a script that fails half way: a key set by
hand fails the move with a message naming it, and no pod is left between sub-queues.
Time always comes in as ``now_ms``; no script reads the Redis clock.

Like kube's PriorityQueue the queue has these sub-queues, each a sorted set with one
meaning per score (key names from :class:`distsched.keys.Keys`):

- activeQ (``active``): pods ready to be scheduled. Member ``<queue ts ms:013d>|ns/name``,
  score ``-priority``. Redis orders equal scores by member, so ZPOPMIN yields priority
  descending, then queue timestamp ascending (kube's PrioritySort), then key; -priority
  is exact in a double over the whole int32 range.
- backoffQ (``backoff``): pods that failed and wait out their backoff. Member ns/name,
  score = backoff expiry ms. flush_backoff_completed moves expired ones to activeQ.
- unschedulable (``unschedulable``): pods that failed and wait for a cluster event that
  may help them. Member ns/name, score = queue timestamp ms, so the leftover flush after
  ``unschedulable_max_ms`` is a range query.
- gated (``gated``): pods PreEnqueue (scheduling gates) keeps out, score = queue ts ms.
- inflight (``inflight``): pods a worker popped, score = lease deadline ms. A lease that
  expires (the worker died) sends the pod back to activeQ.
- dead (``dead``): pods that were delivered ``max_deliveries`` times without an orderly
  outcome (they crash workers), score = time dead-lettered ms. A delivery its worker
  handed back unattempted (:meth:`RedisQueue.hand_back`, after an infrastructure error)
  does not count.

The ``info`` hash maps ns/name to the pod's queue record, one line of text readable in
redis-cli, ``w|e|cy|a|d|u|p|ts|its|bo|pl|uid``: where it is (a sub-queue name, or
``""``/``"assumed"`` when handed to the cache), lease epoch and scheduling cycle of the
last pop, attempts (+1 at pop), deliveries since the last orderly outcome, ``u`` (1: the
pod's object was updated while it was in flight or assumed: its failure sends it to
activeQ), priority, queue timestamp (add and every failure re-add), initial attempt
timestamp, backoff expiry ms, the comma-joined unschedulable plugins of the last failure,
and the uid. ``distsched/lua/lib/queue_record.lua`` is the one library that reads and
writes it, included by the queue's scripts and by the ledger's and store's scripts that
hand pods to and from the cache (reserve: inflight -> assumed; release: assumed ->
backoff/active; bind: assumed -> forgotten). :meth:`RedisQueue.info` returns it as a dict
(see :data:`~distsched.queue_types.INFO_FIELDS`).

Counters: ``cycle`` (+1 per popped pod, kube's schedulingCycle), ``move_cycle`` (the
cycle of the last move request, kube's moveRequestCycle: a pod whose failed cycle is not
newer than it goes to backoffQ instead of the unschedulable set, because the event that
might have helped it arrived while it was being scheduled), ``epoch`` (+1 per popped pod:
the fencing token done() and the failure handler must present). The ``wake`` list gets a
token per pod made active (capped at :data:`WAKE_CAP`); pop_blocking BLPOPs it while
activeQ is empty instead of polling, and pop drops it once activeQ is empty.

Every move counts the pods it put into a sub-queue (queue_incoming_pods_total, see
:class:`~distsched.queue_types.SchedulingQueue`), from what its script returns.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import redis

from distsched import replication
from distsched.clock import Clock
from distsched.framework import events
from distsched.keys import Keys
from distsched.lua import ScriptSet
from distsched.metrics import ACTIVE_OR_BACKOFF, count_incoming
from distsched.queue_types import (
    ACTIVE,
    GATED,
    PRESENT,
    STALE,
    SUB_QUEUES,
    WAKE_CAP,
    PodEntry,
    QueueConfig,
    QueuedPod,
    QueueState,
    decode_info,
    join_plugins,
    key_of_active_member,
    split_plugins,
    validate_entry,
    validate_plugin_names,
)
from distsched.redis_text import as_text
from distsched.scan import hash_pages

log = logging.getLogger(__name__)

MAX_SCRIPT_BATCH = 1000
"""Pods per script call for pops and flushes (their bulk commands unpack one argument per
pod, and Lua's stack holds a few thousand)."""

WAKE_RECHECK_S = 2.0
"""Longest single BLPOP: a safety net should a script outside this module fill activeQ
without pushing a wake token; an idle worker re-checks once per WAKE_RECHECK_S."""


@dataclass
class Repair:
    """What :meth:`RedisQueue.repair` did: pod keys by verdict (orphan, bound, lost:
    repaired; unreadable: left as it is), and the records it found out of step for the
    first time, left for the next sweep (key -> record)."""

    repaired: dict[str, list[str]] = field(default_factory=dict)
    suspects: dict[str, str] = field(default_factory=dict)


class RedisQueue:
    """:class:`~distsched.queue_types.SchedulingQueue` on one scheduler's Redis keys."""

    def __init__(
        self, client: redis.Redis, keys: Keys, *, config: QueueConfig | None = None
    ) -> None:
        self.config = config or QueueConfig()
        self._client = client
        self._keys = keys
        self._scripts = ScriptSet(client)
        self._set_keys = {
            "active": keys.active,
            "backoff": keys.backoff,
            "unschedulable": keys.unschedulable,
            "gated": keys.gated,
            "inflight": keys.inflight,
            "dead": keys.dead,
        }
        self._gang_keys = [keys.gang_of, keys.gang_members, keys.gang_min, keys.gang_held]

    @property
    def keys(self) -> Keys:
        return self._keys

    def _run(self, name: str, keys: list[str], args: Sequence[Any]) -> Any:
        return self._scripts.get(f"queue_{name}")(keys=keys, args=list(args))

    # --- moves ------------------------------------------------------------------------
    def add(self, entries: Sequence[PodEntry], *, now_ms: int) -> int:
        args: list[Any] = [now_ms, WAKE_CAP]
        for entry in entries:
            validate_entry(entry)
            args += [entry.key, entry.uid, entry.priority, int(entry.gated), entry.group]
        if not entries:
            return 0
        k = self._keys
        keys = [k.info, k.active, k.gated, k.wake, *self._gang_keys]
        active, gated = self._run("add", keys, args)
        count_incoming(ACTIVE, events.UNSCHEDULED_POD_ADD.label, int(active))
        count_incoming(GATED, events.UNSCHEDULED_POD_ADD.label, int(gated))
        return int(active) + int(gated)

    def update(self, entry: PodEntry, *, now_ms: int) -> str:
        validate_entry(entry)
        k = self._keys
        args = [now_ms, WAKE_CAP, entry.key, entry.uid, entry.priority, int(entry.gated)]
        args.append(entry.group)
        keys = [k.info, k.active, k.backoff, k.unschedulable, k.gated, k.wake, *self._gang_keys]
        raw_where, entered = self._run("update", keys, args)
        where = as_text(raw_where)
        if int(entered):
            count_incoming(where, events.UNSCHEDULED_POD_UPDATE.label)
        return where

    def delete(
        self,
        keys: Sequence[str],
        *,
        now_ms: int | None = None,
        uids: Sequence[str] | None = None,
    ) -> int:
        """Remove pods from wherever they are (with ``uids``: only a record of that uid).
        ``now_ms`` is accepted for symmetry only."""
        if not keys:
            return 0
        k = self._keys
        script_keys = [k.info, k.active, k.backoff, k.unschedulable, k.gated, k.inflight, k.dead]
        script_keys += [k.gang_of, k.gang_members, k.gang_held]
        pairs = zip(keys, uids if uids is not None else [""] * len(keys), strict=True)
        return int(self._run("delete", script_keys, [x for pair in pairs for x in pair]))

    def pop(
        self,
        max_pods: int,
        *,
        now_ms: int,
        unacknowledged: Callable[[list[QueuedPod]], None] | None = None,
    ) -> list[QueuedPod]:
        """Pop and lease up to ``max_pods`` pods. With a replica acknowledgement policy the
        leases are acknowledged before they are returned; should that fail (the error is
        raised), ``unacknowledged`` gets the popped pods first, so that the caller can
        :meth:`hand_back` what it was never given."""
        if max_pods < 1:
            raise ValueError("max_pods must be at least 1")
        k = self._keys
        cfg = self.config
        popped: list[QueuedPod] = []
        script_keys = [k.active, k.inflight, k.dead, k.info, k.cycle, k.epoch, k.wake]
        script_keys += [k.gang_of, k.gang_members, k.backoff, k.unschedulable]
        while len(popped) < max_pods:
            want = min(max_pods - len(popped), MAX_SCRIPT_BATCH)
            flat = self._run(
                "pop",
                script_keys,
                [want, now_ms, cfg.lease_ms, cfg.max_deliveries, int(cfg.pop_from_backoff)],
            )
            count_incoming(ACTIVE, events.POP_FROM_BACKOFF, int(flat[0]))
            for i in range(1, len(flat), 2):
                key = as_text(flat[i])
                popped.append(QueuedPod.from_info(key, decode_info(key, flat[i + 1])))
            if len(flat) - 1 < 2 * want:
                break
        if popped:
            # A worker acts on these lease epochs only once they would survive a failover:
            # a promoted replica never re-issues an epoch some worker already holds.
            try:
                replication.acknowledge(self._client, k.ack, "pop")
            except redis.RedisError:
                if unacknowledged is not None:
                    unacknowledged(popped)
                raise
        return popped

    def pop_blocking(self, max_pods: int, *, timeout_s: float, clock: Clock) -> list[QueuedPod]:
        """Pop, or wait on the wake list (BLPOP, no polling) until pods arrive or timeout."""
        deadline = time.monotonic() + timeout_s
        while True:
            pods = self.pop(max_pods, now_ms=clock.now_ms())
            remaining = deadline - time.monotonic()
            if pods or remaining <= 0:
                return pods
            # BLPOP treats 0 as "forever"; never pass it.
            wait = min(max(remaining, 0.001), WAKE_RECHECK_S)
            self._client.blpop([self._keys.wake], timeout=wait)

    def done(self, key: str, *, epoch: int) -> bool:
        return self.done_many([(key, epoch)])[0]

    def done_many(self, leases: Sequence[tuple[str, int]]) -> list[bool]:
        """done() for each (key, epoch) in one script call; each lease is fenced on its own."""
        if not leases:
            return []
        args = [part for key, epoch in leases for part in (key, epoch)]
        accepted = self._run("done", [self._keys.info, self._keys.inflight], args)
        return [bool(a) for a in accepted]

    def forget(self, keys: Sequence[str]) -> int:
        if not keys:
            return 0
        return int(self._run("forget", [self._keys.info, self._keys.inflight], keys))

    def hand_back(self, leases: Sequence[tuple[str, int]]) -> list[str]:
        if not leases:
            return []
        k = self._keys
        args: list[Any] = [WAKE_CAP]
        for key, epoch in leases:
            args += [key, epoch]
        raw = self._run("hand_back", [k.info, k.inflight, k.dead, k.active, k.wake], args)
        where = [as_text(w) for w in raw]
        count_incoming(ACTIVE, events.UNATTEMPTED, where.count(ACTIVE))
        return where

    def assume(self, leases: Sequence[tuple[str, int, str]]) -> list[bool]:
        if not leases:
            return []
        args = [part for key, epoch, uid in leases for part in (key, epoch, uid)]
        assumed = self._run("assume", [self._keys.info, self._keys.inflight], args)
        return [bool(a) for a in assumed]

    def requeue_released(self, keys: Sequence[str], *, now_ms: int) -> list[str]:
        if not keys:
            return []
        k, cfg = self._keys, self.config
        args = [now_ms, cfg.initial_backoff_ms, cfg.max_backoff_ms, WAKE_CAP, *keys]
        where = self._run("requeue_released", [k.info, k.active, k.backoff, k.wake], args)
        return [as_text(w) for w in where]

    def add_unschedulable_if_not_present(
        self,
        key: str,
        *,
        epoch: int,
        plugins: Iterable[str],
        now_ms: int,
        error: bool = False,
    ) -> str:
        plugins = list(plugins)
        validate_plugin_names(plugins)
        k = self._keys
        cfg = self.config
        args = [
            key,
            epoch,
            join_plugins(plugins),
            now_ms,
            int(error),
            cfg.initial_backoff_ms,
            cfg.max_backoff_ms,
            WAKE_CAP,
        ]
        keys = [k.info, k.inflight, k.backoff, k.unschedulable, k.move_cycle, k.active, k.wake]
        where = as_text(self._run("add_unschedulable", keys, args))
        if where not in (STALE, PRESENT):
            count_incoming(where, events.SCHEDULE_ATTEMPT_FAILURE)
        return where

    def flush_backoff_completed(self, *, now_ms: int) -> int:
        k = self._keys
        moved = self._flush(
            "flush_backoff", [k.backoff, k.active, k.info, k.wake], [now_ms, WAKE_CAP]
        )
        count_incoming(ACTIVE, events.BACKOFF_COMPLETE, moved)
        return moved

    def flush_unschedulable_leftover(self, *, now_ms: int) -> int:
        k = self._keys
        keys = [k.unschedulable, k.active, k.backoff, k.info, k.wake, k.cycle, k.move_cycle]
        args = [now_ms, self.config.unschedulable_max_ms, WAKE_CAP]
        moved = self._flush("flush_leftover", keys, args)
        count_incoming(ACTIVE_OR_BACKOFF, events.UNSCHEDULABLE_TIMEOUT.label, moved)
        return moved

    def _flush(self, name: str, keys: list[str], args: list[Any]) -> int:
        """Run a flush script until it has looked at every due member (it takes at most
        MAX_SCRIPT_BATCH per call)."""
        total = 0
        while True:
            moved, examined = self._run(name, keys, args)
            total += int(moved)
            if int(examined) < MAX_SCRIPT_BATCH:
                return total

    def move_all_to_active_or_backoff(
        self,
        event: str,
        *,
        now_ms: int,
        interested_plugins: frozenset[str] | None,
        keys: Sequence[str] | None = None,
    ) -> int:
        plugins = sorted(interested_plugins or ())
        args: list[Any] = [now_ms, WAKE_CAP, int(interested_plugins is None), len(plugins)]
        args += plugins
        args.append(int(keys is not None))
        args += list(keys or ())
        k = self._keys
        script_keys = [
            k.unschedulable,
            k.active,
            k.backoff,
            k.info,
            k.cycle,
            k.move_cycle,
            k.wake,
        ]
        moved = int(self._run("move_all", script_keys, args))
        log.debug("move request for %s moved %d unschedulable pods", event, moved)
        count_incoming(ACTIVE_OR_BACKOFF, event, moved)
        return moved

    def reclaim_expired_leases(self, *, now_ms: int) -> list[str]:
        k = self._keys
        reclaimed: list[str] = []
        while True:
            batch = self._run("reclaim", [k.inflight, k.active, k.info, k.wake], [now_ms, WAKE_CAP])
            reclaimed += [as_text(key) for key in batch]
            if len(batch) < MAX_SCRIPT_BATCH:
                count_incoming(ACTIVE, events.LEASE_EXPIRED, len(reclaimed))
                return reclaimed

    # --- repair -----------------------------------------------------------------------
    def repair(self, seen: Mapping[str, str], *, now_ms: int, scan_count: int = 500) -> Repair:
        """The consistency sweep's half for the queue (lua/sweep_queue.lua): drop the
        records of pods the store no longer has or has bound, and put back the pods that
        are in no sub-queue. Only a record that the previous sweep already found out of
        step, unchanged (``seen``: key -> record, that sweep's :attr:`Repair.suspects`), is
        repaired: a pod between the two scripts of a move (a release, then its requeue),
        or whose deletion the handlers are about to handle, is left to them."""
        k = self._keys
        script_keys = [
            k.info,
            k.active,
            k.backoff,
            k.unschedulable,
            k.gated,
            k.inflight,
            k.dead,
            k.ledger_assumed,
            k.store_meta("Pod"),
            k.wake,
        ]
        result = Repair()
        for page in hash_pages(self._client, k.info, scan_count):
            pods = [as_text(key) for key in page]
            args: list[Any] = [now_ms, WAKE_CAP]
            for key in pods:
                args += [key, seen.get(key, "")]
            verdicts = self._scripts.get("sweep_queue")(keys=script_keys, args=args)
            for i, key in enumerate(pods):
                verdict, detail = as_text(verdicts[2 * i]), as_text(verdicts[2 * i + 1])
                if verdict == "suspect":
                    result.suspects[key] = detail
                elif verdict != "ok":
                    result.repaired.setdefault(verdict, []).append(key)
        return result

    # --- gangs ------------------------------------------------------------------------
    def set_gang_minimums(self, minimums: Mapping[str, int | None]) -> int:
        """Record each pod group's minimum (None: its PodGroup is gone) and release the
        held members of every group that is now complete; returns how many became active."""
        if not minimums:
            return 0
        args: list[Any] = [WAKE_CAP]
        for group, minimum in minimums.items():
            args += [group, "" if minimum is None else int(minimum)]
        k = self._keys
        keys = [k.info, k.active, k.gated, k.wake, k.gang_members, k.gang_min, k.gang_held]
        released = int(self._run("gang_min", keys, args))
        count_incoming(ACTIVE, events.POD_GROUP_ADD.label, released)
        return released

    def gang_members(self, group: str) -> list[str]:
        """The keys of the pod group's existing members the queue knows (pending or placed)."""
        raw = self._client.hget(self._keys.gang_members, group)
        return [] if not raw else as_text(raw).split(",")

    def forget_gang_members_of_deleted_pods(
        self, seen: Collection[str]
    ) -> tuple[list[str], set[str]]:
        """The consistency sweep's half for gangs (lua/sweep_gangs.lua): members whose pod
        the store no longer has leave their group, when the previous call found them so
        too (``seen``, its second result). Returns the keys that left and those found for
        the first time."""
        k = self._keys
        left: list[str] = []
        found: set[str] = set()
        for page in hash_pages(self._client, k.gang_of):
            pods = [as_text(key) for key in page]
            metas = self._client.hmget(k.store_meta("Pod"), pods)
            gone = [key for key, meta in zip(pods, metas, strict=True) if meta is None]
            due = [key for key in gone if key in seen]
            found.update(key for key in gone if key not in seen)
            if due:
                keys = [k.gang_of, k.gang_members, k.gang_held, k.store_meta("Pod")]
                raw = self._scripts.get("sweep_gangs")(keys=keys, args=due)
                left += [as_text(key) for key in raw]
        return left, found

    def gang_state(self, groups: Sequence[str]) -> tuple[dict[str, int], dict[str, list[str]]]:
        """For these pod groups, in one round trip: the minimums of those that have one (a
        PodGroup), and every group's member keys."""
        pipe = self._client.pipeline(transaction=False)
        pipe.hmget(self._keys.gang_min, list(groups))
        pipe.hmget(self._keys.gang_members, list(groups))
        minimums, lists = pipe.execute()
        return (
            {g: int(m) for g, m in zip(groups, minimums, strict=True) if m is not None},
            {g: as_text(m).split(",") if m else [] for g, m in zip(groups, lists, strict=True)},
        )

    def gang_minimums(self) -> dict[str, int]:
        raw = cast(dict[bytes, bytes], self._client.hgetall(self._keys.gang_min))
        return {as_text(g): int(m) for g, m in raw.items()}

    # --- reads ------------------------------------------------------------------------
    def unschedulable_pods(self) -> list[tuple[str, frozenset[str]]]:
        keys = self.unschedulable_keys()
        if not keys:
            return []
        infos = self._client.hmget(self._keys.info, keys)
        return [
            (key, split_plugins(decode_info(key, raw)["pl"]))
            for key, raw in zip(keys, infos, strict=True)
            if raw is not None
        ]

    def unschedulable_keys(self) -> list[str]:
        """The unschedulable pods' keys, oldest first (no info decoding)."""
        members = cast(list[bytes], self._client.zrange(self._keys.unschedulable, 0, -1))
        return [as_text(m) for m in members]

    def counts(self) -> dict[str, int]:
        pipe = self._client.pipeline(transaction=True)
        for name in SUB_QUEUES:
            pipe.zcard(self._set_keys[name])
        return dict(zip(SUB_QUEUES, pipe.execute(), strict=True))

    def heads(self, n: int) -> dict[str, list[str]]:
        pipe = self._client.pipeline(transaction=True)
        for name in SUB_QUEUES:
            pipe.zrange(self._set_keys[name], 0, n - 1)
        heads = {
            name: [as_text(m) for m in members]
            for name, members in zip(SUB_QUEUES, pipe.execute(), strict=True)
        }
        heads[ACTIVE] = [key_of_active_member(m) for m in heads[ACTIVE]]
        return heads

    def info(self, key: str) -> dict[str, Any] | None:
        raw = self._client.hget(self._keys.info, key)
        return None if raw is None else decode_info(key, raw)

    def where(self, key: str) -> str | None:
        info = self.info(key)
        return None if info is None else info["w"]

    def dump(self) -> QueueState:
        pipe = self._client.pipeline(transaction=True)
        for name in SUB_QUEUES:
            pipe.zrange(self._set_keys[name], 0, -1, withscores=True)
        k = self._keys
        pipe.hgetall(k.info)
        pipe.mget([k.cycle, k.move_cycle, k.epoch])
        *sets, infos, counters = pipe.execute()
        cycle, move_cycle, epoch = (int(c or 0) for c in counters)
        return QueueState(
            sub_queues={
                name: [(as_text(m), score) for m, score in members]
                for name, members in zip(SUB_QUEUES, sets, strict=True)
            },
            infos={as_text(f): decode_info(as_text(f), v) for f, v in infos.items()},
            cycle=cycle,
            move_cycle=move_cycle,
            epoch=epoch,
        )

    def clear(self) -> None:
        """Delete every queue key of this scheduler (benchmarks, tests)."""
        k = self._keys
        self._client.delete(
            *self._set_keys.values(), k.info, k.cycle, k.move_cycle, k.epoch, k.wake
        )
        self._client.delete(*self._gang_keys)
