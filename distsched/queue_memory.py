"""The scheduling queue in plain Python: the reference twin of :mod:`distsched.queue_redis`.

It mirrors the Redis layout one to one (one sorted set per sub-queue, an info dict per
pod, the cycle / move_cycle / epoch counters) so that :meth:`MemoryQueue.dump` and
:meth:`RedisQueue.dump` can be compared field by field. It favours obviousness over
speed: it is the oracle of the property-based tests and the queue of single-process
unit tests, not a production structure.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from distsched.clock import Clock
from distsched.framework import events
from distsched.metrics import ACTIVE_OR_BACKOFF, count_incoming
from distsched.queue_types import (
    ACTIVE,
    ASSUMED,
    BACKOFF,
    DEAD,
    GATED,
    HANDED_OFF,
    INFLIGHT,
    PRESENT,
    STALE,
    SUB_QUEUES,
    UNSCHEDULABLE,
    PodEntry,
    QueueConfig,
    QueuedPod,
    QueueState,
    active_member,
    backoff_duration_ms,
    backoff_pop_order,
    join_plugins,
    key_of_active_member,
    split_plugins,
    validate_entry,
    validate_plugin_names,
)


class _SortedSet:
    """A Redis zset: members ordered by (score, member)."""

    def __init__(self) -> None:
        self._scores: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._scores)

    def add(self, member: str, score: int) -> None:
        self._scores[member] = score

    def remove(self, member: str) -> bool:
        return self._scores.pop(member, None) is not None

    def __contains__(self, member: str) -> bool:
        return member in self._scores

    def ordered(self) -> list[tuple[str, int]]:
        return sorted(self._scores.items(), key=lambda item: (item[1], item[0]))

    def up_to(self, max_score: int) -> list[str]:
        return [member for member, score in self.ordered() if score <= max_score]

    def pop_min(self) -> str | None:
        if not self._scores:
            return None
        member = min(self._scores.items(), key=lambda item: (item[1], item[0]))[0]
        del self._scores[member]
        return member


class MemoryQueue:
    """:class:`~distsched.queue_types.SchedulingQueue` in one process, thread-safe."""

    def __init__(self, *, config: QueueConfig | None = None) -> None:
        self.config = config or QueueConfig()
        self._sets = {name: _SortedSet() for name in SUB_QUEUES}
        self._infos: dict[str, dict[str, Any]] = {}
        self._cycle = 0
        self._move_cycle = 0
        self._epoch = 0
        # Gangs (lua/lib/gang.lua): pod -> group, group -> members in join order, group ->
        # minimum, and the members held in the gated set until their group is complete.
        self._group_of: dict[str, str] = {}
        self._members: dict[str, list[str]] = {}
        self._minimum: dict[str, int] = {}
        self._held: set[str] = set()
        self._cond = threading.Condition(threading.RLock())

    # --- moves between sub-queues ---------------------------------------------------------
    def _detach(self, key: str, info: dict[str, Any]) -> None:
        where = info["w"]
        if where == ACTIVE:
            self._sets[ACTIVE].remove(info["m"])
            info["m"] = ""
        elif where in self._sets:
            self._sets[where].remove(key)

    def _to_active(self, key: str, info: dict[str, Any]) -> None:
        self._detach(key, info)
        info["m"] = active_member(info["ts"], key)
        info["w"] = ACTIVE
        self._sets[ACTIVE].add(info["m"], -info["p"])
        self._cond.notify_all()

    def _to_set(self, key: str, info: dict[str, Any], where: str, score: int) -> None:
        self._detach(key, info)
        info["w"] = where
        self._sets[where].add(key, score)

    def _to_active_or_backoff(self, key: str, info: dict[str, Any], now_ms: int) -> None:
        if info["bo"] > now_ms:
            self._to_set(key, info, BACKOFF, info["bo"])
        else:
            self._to_active(key, info)

    # --- gangs ----------------------------------------------------------------------------
    def _join(self, key: str, group: str) -> None:
        old = self._group_of.get(key)
        if old == group:
            return
        if old is not None:
            self._leave(key)
        self._group_of[key] = group
        self._members.setdefault(group, []).append(key)

    def _leave(self, key: str) -> None:
        group = self._group_of.pop(key, None)
        self._held.discard(key)
        if group is not None:
            members = [m for m in self._members.get(group, []) if m != key]
            if members:
                self._members[group] = members
            else:
                self._members.pop(group, None)

    def _complete(self, group: str) -> bool:
        minimum = self._minimum.get(group)
        return minimum is not None and len(self._members.get(group, [])) >= minimum

    def _release(self, group: str) -> list[str]:
        released = []
        for key in self._members.get(group, []):
            if key in self._held:
                self._held.discard(key)
                info = self._infos.get(key)
                if info is not None and info["w"] == GATED:
                    self._to_active(key, info)
                    released.append(key)
        return released

    def set_gang_minimums(self, minimums: Mapping[str, int | None]) -> int:
        with self._cond:
            released = 0
            for group, minimum in minimums.items():
                if minimum is None:
                    self._minimum.pop(group, None)
                    continue
                self._minimum[group] = int(minimum)
                if self._complete(group):
                    released += len(self._release(group))
        count_incoming(ACTIVE, events.POD_GROUP_ADD.label, released)
        return released

    def gang_members(self, group: str) -> list[str]:
        with self._cond:
            return list(self._members.get(group, []))

    def gang_minimums(self) -> dict[str, int]:
        with self._cond:
            return dict(self._minimum)

    def _insert(self, entries: Sequence[PodEntry], now_ms: int) -> tuple[int, int]:
        """Add the pods not known yet; how many went to activeQ and to the gated set."""
        active = gated = 0
        groups: list[str] = []
        new: set[str] = set()
        for entry in entries:
            if entry.key in self._infos:
                continue
            new.add(entry.key)
            if entry.group:
                self._join(entry.key, entry.group)
                if entry.group not in groups:
                    groups.append(entry.group)
            info: dict[str, Any] = {
                "uid": entry.uid,
                "p": entry.priority,
                "ts": now_ms,
                "its": now_ms,
                "a": 0,
                "w": HANDED_OFF,
                "m": "",
                "pl": "",
                "cy": 0,
                "e": 0,
                "d": 0,
                "bo": 0,
            }
            self._infos[entry.key] = info
            if entry.gated or entry.group:
                self._to_set(entry.key, info, GATED, now_ms)
                gated += 1
                if entry.group and not entry.gated:
                    self._held.add(entry.key)
            else:
                self._to_active(entry.key, info)
                active += 1
        for group in groups:
            if self._complete(group):
                for key in self._release(group):
                    active += 1
                    gated -= key in new
        return active, gated

    # --- the SchedulingQueue protocol ---------------------------------------------------
    def add(self, entries: Sequence[PodEntry], *, now_ms: int) -> int:
        for entry in entries:
            validate_entry(entry)
        with self._cond:
            active, gated = self._insert(entries, now_ms)
        count_incoming(ACTIVE, events.UNSCHEDULED_POD_ADD.label, active)
        count_incoming(GATED, events.UNSCHEDULED_POD_ADD.label, gated)
        return active + gated

    def update(self, entry: PodEntry, *, now_ms: int) -> str:
        validate_entry(entry)
        with self._cond:
            held = False
            if entry.group:
                self._join(entry.key, entry.group)
                if not entry.gated and not self._complete(entry.group):
                    held = True
                    entry = replace(entry, gated=True)
            info = self._infos.get(entry.key)
            if info is None:
                self._insert([replace(entry, group="")], now_ms)
                if held:
                    self._held.add(entry.key)
                where = self._infos[entry.key]["w"]
                count_incoming(where, events.UNSCHEDULED_POD_UPDATE.label)
                return where
            old_priority = info["p"]
            info["uid"] = entry.uid
            info["p"] = entry.priority
            where = info["w"]
            if where == ACTIVE and old_priority != entry.priority:
                self._sets[ACTIVE].add(info["m"], -entry.priority)
            elif where == UNSCHEDULABLE:
                self._to_active_or_backoff(entry.key, info, now_ms)
            elif where in (INFLIGHT, ASSUMED, HANDED_OFF):
                info["u"] = 1
            elif where == GATED and entry.gated:
                if held:
                    self._held.add(entry.key)
                else:
                    self._held.discard(entry.key)
            elif where == GATED and not entry.gated:
                self._held.discard(entry.key)
                self._to_active(entry.key, info)
            if where in (UNSCHEDULABLE, GATED) and info["w"] != where:
                count_incoming(info["w"], events.UNSCHEDULED_POD_UPDATE.label)
            return info["w"]

    def delete(
        self,
        keys: Sequence[str],
        *,
        now_ms: int | None = None,
        uids: Sequence[str] | None = None,
    ) -> int:
        """Remove pods from wherever they are (with ``uids``: only a record of that uid).
        ``now_ms`` is accepted for symmetry only."""
        with self._cond:
            deleted = 0
            wanted = uids if uids is not None else [""] * len(keys)
            for key, uid in zip(keys, wanted, strict=True):
                info = self._infos.get(key)
                if info is not None and uid in ("", info["uid"]):
                    del self._infos[key]
                    self._detach(key, info)
                    deleted += 1
                if info is None or uid in ("", info["uid"]):
                    self._leave(key)
            return deleted

    def pop(self, max_pods: int, *, now_ms: int) -> list[QueuedPod]:
        if max_pods < 1:
            raise ValueError("max_pods must be at least 1")
        with self._cond:
            popped: list[QueuedPod] = []
            while len(popped) < max_pods:
                member = self._sets[ACTIVE].pop_min()
                if member is None:
                    break
                key = key_of_active_member(member)
                leased = self._lease(key, self._infos[key], now_ms)
                if leased is not None:
                    popped.append(leased)
            if len(popped) < max_pods and self.config.pop_from_backoff:
                self._pop_from_backoff(popped, max_pods, now_ms)
            self._pop_siblings(popped, now_ms)
            return popped

    def _pop_from_backoff(self, popped: list[QueuedPod], max_pods: int, now_ms: int) -> None:
        """activeQ is empty: the rest from backoffQ, pods a plugin rejected, in
        :func:`backoff_pop_order` (queue_pop.lua)."""
        rejected = sorted(
            (backoff_pop_order(key, self._infos[key]), key)
            for key, _ in self._sets[BACKOFF].ordered()
            if self._infos[key]["pl"]
        )
        taken = 0
        for _, key in rejected:
            if len(popped) >= max_pods:
                break
            info = self._infos[key]
            self._detach(key, info)
            leased = self._lease(key, info, now_ms)
            if leased is not None:
                popped.append(leased)
                taken += 1
        count_incoming(ACTIVE, events.POP_FROM_BACKOFF, taken)

    def _lease(self, key: str, info: dict[str, Any], now_ms: int) -> QueuedPod | None:
        """A pod taken off its sub-queue goes inflight under a new lease, or is
        dead-lettered (None) after max_deliveries."""
        info["m"] = ""
        info.pop("u", None)
        if info["d"] >= self.config.max_deliveries:
            info["w"] = DEAD
            self._sets[DEAD].add(key, now_ms)
            return None
        self._cycle += 1
        self._epoch += 1
        info.update(a=info["a"] + 1, cy=self._cycle, e=self._epoch, d=info["d"] + 1, w=INFLIGHT)
        self._sets[INFLIGHT].add(key, now_ms + self.config.lease_ms)
        return QueuedPod.from_info(key, info)

    def _pop_siblings(self, popped: list[QueuedPod], now_ms: int) -> None:
        """A gang is popped whole: the siblings of popped members waiting in activeQ,
        backoffQ or the unschedulable set come along (queue_pop.lua)."""
        have = {p.key for p in popped}
        done: set[str] = set()
        for pod in list(popped):
            group = self._group_of.get(pod.key)
            if group is None or group in done:
                continue
            done.add(group)
            for key in self._members.get(group, []):
                info = self._infos.get(key)
                if key in have or info is None or info["w"] not in (ACTIVE, BACKOFF, UNSCHEDULABLE):
                    continue
                have.add(key)
                self._detach(key, info)
                leased = self._lease(key, info, now_ms)
                if leased is not None:
                    popped.append(leased)

    def pop_blocking(self, max_pods: int, *, timeout_s: float, clock: Clock) -> list[QueuedPod]:
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                pods = self.pop(max_pods, now_ms=clock.now_ms())
                remaining = deadline - time.monotonic()
                if pods or remaining <= 0:
                    return pods
                self._cond.wait(remaining)

    def done(self, key: str, *, epoch: int) -> bool:
        with self._cond:
            info = self._infos.get(key)
            if info is None or info["w"] != INFLIGHT or info["e"] != epoch:
                return False
            self._detach(key, info)
            info["w"] = HANDED_OFF
            info["d"] = 0
            return True

    def done_many(self, leases: Sequence[tuple[str, int]]) -> list[bool]:
        """done() for each (key, epoch)."""
        return [self.done(key, epoch=epoch) for key, epoch in leases]

    def forget(self, keys: Sequence[str]) -> int:
        with self._cond:
            forgotten = 0
            for key in keys:
                info = self._infos.get(key)
                if info is not None and info["w"] in (HANDED_OFF, ASSUMED, INFLIGHT):
                    self._detach(key, info)
                    del self._infos[key]
                    forgotten += 1
            return forgotten

    def hand_back(self, leases: Sequence[tuple[str, int]]) -> list[str]:
        with self._cond:
            out = []
            seen: set[str] = set()
            for key, epoch in leases:
                info = None if key in seen else self._infos.get(key)
                seen.add(key)
                if info is None or info["e"] != epoch or info["d"] <= 0:
                    out.append("")
                    continue
                if info["w"] in (ASSUMED, HANDED_OFF):
                    out.append("")
                    continue
                info["d"] -= 1
                info["a"] = max(0, info["a"] - 1)
                if info["w"] in (INFLIGHT, DEAD):
                    self._to_active(key, info)
                out.append(info["w"])
            count_incoming(ACTIVE, events.UNATTEMPTED, out.count(ACTIVE))
            return out

    def assume(self, leases: Sequence[tuple[str, int, str]]) -> list[bool]:
        with self._cond:
            out = []
            for key, epoch, uid in leases:
                info = self._infos.get(key)
                ok = (
                    info is not None
                    and info["w"] == INFLIGHT
                    and info["e"] == epoch
                    and info["uid"] in ("", uid)
                )
                if ok:
                    assert info is not None
                    self._detach(key, info)
                    info["w"] = ASSUMED
                out.append(ok)
            return out

    def requeue_released(self, keys: Sequence[str], *, now_ms: int) -> list[str]:
        with self._cond:
            out = []
            for key in keys:
                info = self._infos.get(key)
                if info is None or info["w"] != ASSUMED:
                    out.append("")
                    continue
                wait = backoff_duration_ms(info["a"], self.config)
                info["ts"] = now_ms
                info["pl"] = ""  # an error, kube's: no plugin rejected it
                info["bo"] = now_ms + wait if wait > 0 else 0
                if wait > 0:
                    self._to_set(key, info, BACKOFF, info["bo"])
                else:
                    self._to_active(key, info)
                out.append(info["w"])
            return out

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
        with self._cond:
            info = self._infos.get(key)
            if info is None or info["e"] != epoch:
                return STALE
            if info["w"] in SUB_QUEUES and info["w"] != INFLIGHT:
                return PRESENT
            info.update(
                ts=now_ms,
                pl="" if error else join_plugins(plugins),
                d=0,
                bo=now_ms + backoff_duration_ms(info["a"], self.config),
            )
            if info.pop("u", 0):
                info["ts"] = now_ms
                self._to_active(key, info)
            elif error or self._move_cycle >= info["cy"]:
                self._to_set(key, info, BACKOFF, info["bo"])
            else:
                self._to_set(key, info, UNSCHEDULABLE, now_ms)
            count_incoming(info["w"], events.SCHEDULE_ATTEMPT_FAILURE)
            return info["w"]

    def flush_backoff_completed(self, *, now_ms: int) -> int:
        with self._cond:
            due = self._sets[BACKOFF].up_to(now_ms)
            for key in due:
                self._to_active(key, self._infos[key])
            count_incoming(ACTIVE, events.BACKOFF_COMPLETE, len(due))
            return len(due)

    def flush_unschedulable_leftover(self, *, now_ms: int) -> int:
        with self._cond:
            # kube: now - timestamp > max (exclusive).
            stale = self._sets[UNSCHEDULABLE].up_to(now_ms - self.config.unschedulable_max_ms - 1)
            for key in stale:
                self._to_active_or_backoff(key, self._infos[key], now_ms)
            if stale:
                self._move_cycle = self._cycle
            count_incoming(ACTIVE_OR_BACKOFF, events.UNSCHEDULABLE_TIMEOUT.label, len(stale))
            return len(stale)

    def move_all_to_active_or_backoff(
        self,
        event: str,
        *,
        now_ms: int,
        interested_plugins: frozenset[str] | None,
        keys: Sequence[str] | None = None,
    ) -> int:
        with self._cond:
            self._move_cycle = self._cycle
            unschedulable = self._sets[UNSCHEDULABLE]
            if keys is None:
                candidates = [member for member, _ in unschedulable.ordered()]
            else:
                candidates = [key for key in dict.fromkeys(keys) if key in unschedulable]
            moved = 0
            for key in candidates:
                info = self._infos[key]
                plugins = split_plugins(info["pl"])
                if plugins and interested_plugins is not None and not plugins & interested_plugins:
                    continue
                self._to_active_or_backoff(key, info, now_ms)
                moved += 1
            count_incoming(ACTIVE_OR_BACKOFF, event, moved)
            return moved

    def reclaim_expired_leases(self, *, now_ms: int) -> list[str]:
        with self._cond:
            expired = self._sets[INFLIGHT].up_to(now_ms)
            for key in expired:
                self._to_active(key, self._infos[key])
            count_incoming(ACTIVE, events.LEASE_EXPIRED, len(expired))
            return expired

    # --- reads --------------------------------------------------------------------------
    def unschedulable_pods(self) -> list[tuple[str, frozenset[str]]]:
        with self._cond:
            return [
                (key, split_plugins(self._infos[key]["pl"]))
                for key, _ in self._sets[UNSCHEDULABLE].ordered()
            ]

    def unschedulable_keys(self) -> list[str]:
        with self._cond:
            return [key for key, _ in self._sets[UNSCHEDULABLE].ordered()]

    def counts(self) -> dict[str, int]:
        with self._cond:
            return {name: len(zset) for name, zset in self._sets.items()}

    def heads(self, n: int) -> dict[str, list[str]]:
        with self._cond:
            heads = {name: [m for m, _ in zset.ordered()[:n]] for name, zset in self._sets.items()}
            heads[ACTIVE] = [key_of_active_member(m) for m in heads[ACTIVE]]
            return heads

    def info(self, key: str) -> dict[str, Any] | None:
        with self._cond:
            info = self._infos.get(key)
            return dict(info) if info is not None else None

    def where(self, key: str) -> str | None:
        info = self.info(key)
        return None if info is None else info["w"]

    def dump(self) -> QueueState:
        with self._cond:
            return QueueState(
                sub_queues={name: zset.ordered() for name, zset in self._sets.items()},
                infos={key: dict(info) for key, info in self._infos.items()},
                cycle=self._cycle,
                move_cycle=self._move_cycle,
                epoch=self._epoch,
            )
