"""A real API server's objects into the store, through the store's own scripts.

In a Kubernetes cluster the API server is the source of truth and the store is its mirror
(DESIGN.md, "Two modes"): the bridge (:mod:`distsched.bridge`) lists and watches the API
server and hands each change here. A change is applied with the same scripts ``apply``
and ``delete`` use, so queue, workers, ledger and binder see the same events as in
standalone mode: a pending pod of a profile the store can enqueue goes into activeQ in
its create script, a pod created bound (a DaemonSet's, another scheduler's) is an assigned
pod, a pod that became bound is a MODIFIED event with its node. Differences from a client
write: the object keeps the API server's uid and creation time (what bindings and status
writes name), and no update rule applies (the API server already judged the change).

Batches: the changes of one call are applied in one MULTI/EXEC (one round trip), each
object by its own script, after one read of the current metas; a change whose script
finds the store moved on (another write in between) is read and applied again.

Fencing: with a :class:`Fence` (the bridge's leader lease), the transaction WATCHes the
lease key and first checks that this bridge holds it; a bridge that stalled past its
lease and wakes up gets :class:`Fenced` and writes nothing (an expired or re-taken lease
aborts the transaction too).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import redis

from distsched.redis_text import as_text
from distsched.replication import acknowledged
from distsched.store.codec import Obj, object_key, parse_meta, uid_of
from distsched.store.redis_store import Store

ROUNDS = 5


class Fence(NamedTuple):
    """Writes are allowed only while ``key`` holds ``token`` (a leader lease)."""

    key: str
    token: str


class Fenced(Exception):
    """This writer no longer holds its lease: nothing was written."""


@dataclass(frozen=True, slots=True)
class Change:
    """An object as the API server has it now (``obj``), or its deletion (``obj`` None,
    ``uid`` the deleted object's)."""

    kind: str
    key: str
    obj: Obj | None
    uid: str = ""

    @classmethod
    def upsert(cls, obj: Obj) -> Change:
        kind, key = object_key(obj)
        return cls(kind, key, obj, uid_of(obj))

    @classmethod
    def delete(cls, kind: str, key: str, uid: str) -> Change:
        return cls(kind, key, None, uid)


@dataclass
class MirrorStats:
    created: int = 0
    updated: int = 0
    deleted: int = 0
    retried: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)


class StoreMirror:
    def __init__(self, store: Store, *, fence: Fence | None = None) -> None:
        self.store = store
        self.fence = fence
        self._client: redis.Redis = store.client
        self.keys = store.keys

    @acknowledged("mirror")
    def apply(self, changes: Sequence[Change]) -> MirrorStats:
        """Make the store hold what ``changes`` say (in order; the last change of a key
        wins). Raises :class:`Fenced` when the fence is not held."""
        latest: dict[tuple[str, str], Change] = {}
        for change in changes:
            latest[(change.kind, change.key)] = change
        stats = MirrorStats()
        pending = list(latest.values())
        for round_ in range(ROUNDS):
            if not pending:
                return stats
            if round_:
                stats.retried += len(pending)
            pending = self._round(pending, stats)
        raise RuntimeError(f"mirror: {len(pending)} objects kept moving: {pending[:3]}")

    def _round(self, changes: list[Change], stats: MirrorStats) -> list[Change]:
        metas = self._metas(changes)
        creates: list[Change] = []
        updates: list[tuple[Change, str]] = []
        deletes: list[tuple[Change, str]] = []
        for change in changes:
            meta = metas[(change.kind, change.key)]
            if change.obj is None:
                if meta is not None and (not change.uid or meta.uid == change.uid):
                    deletes.append((change, meta.uid))
                continue
            if meta is None:
                creates.append(change)
            elif meta.uid != change.uid:
                deletes.append((change, meta.uid))  # another incarnation: replaced
                creates.append(change)
            else:
                updates.append((change, meta.rv))
        if not (creates or updates or deletes):
            return []
        scripts = self.store.scripts
        with self._client.pipeline(transaction=True) as pipe:
            try:
                self._check_fence(pipe)
                for change, uid in deletes:
                    keys, args = self.store.delete_call(change.kind, change.key, uid)
                    scripts.get("store_delete")(keys=keys, args=args, client=pipe)
                if creates:
                    objs = [c.obj for c in creates if c.obj is not None]
                    keys, args, _ = self.store.create_call(objs, mirrored=True)
                    scripts.get("store_create")(keys=keys, args=args, client=pipe)
                for change, rv in updates:
                    assert change.obj is not None
                    keys, args = self.store.update_call(change.kind, change.key, rv, change.obj)
                    scripts.get("store_update")(keys=keys, args=args, client=pipe)
                replies: list[Any] = pipe.execute()
            except redis.WatchError as exc:
                raise Fenced(f"lease {self.fence.key if self.fence else ''} changed") from exc
        again: list[Change] = []
        replies_iter = iter(replies)
        for change, _uid in deletes:
            reply = next(replies_iter)
            if reply[0] == b"ok":
                stats.deleted += 1
            elif change.obj is None and reply[0] == b"uid-mismatch":
                pass  # a newer incarnation is stored: the deletion was of an older one
        if creates:
            reply = next(replies_iter)
            if reply[0] == b"ok":
                stats.created += len(creates)
                for c in creates:
                    stats.by_kind[c.kind] = stats.by_kind.get(c.kind, 0) + 1
            else:
                again += creates  # one of them exists after all: read and decide again
        for change, _rv in updates:
            reply = next(replies_iter)
            if reply[0] == b"ok":
                stats.updated += 1
            else:
                again.append(change)  # moved (conflict) or gone (notfound): again
        return again

    def _check_fence(self, pipe: redis.client.Pipeline) -> None:
        if self.fence is None:
            pipe.multi()
            return
        pipe.watch(self.fence.key)
        holder = pipe.get(self.fence.key)
        if holder is None or as_text(holder) != self.fence.token:
            raise Fenced(f"lease {self.fence.key} is not held by {self.fence.token}")
        pipe.multi()

    def _metas(self, changes: list[Change]) -> dict[tuple[str, str], Any]:
        by_kind: dict[str, list[str]] = {}
        for change in changes:
            by_kind.setdefault(change.kind, []).append(change.key)
        pipe = self._client.pipeline(transaction=False)
        order = list(by_kind.items())
        for kind, keys in order:
            pipe.hmget(self.keys.store_meta(kind), keys)
        out: dict[tuple[str, str], Any] = {}
        for (kind, keys), raws in zip(order, pipe.execute(), strict=True):
            for key, raw in zip(keys, raws, strict=True):
                out[(kind, key)] = None if raw is None else parse_meta(raw)
        return out
