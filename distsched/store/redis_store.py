"""The "API server": Pod and Node objects in Redis, a global resourceVersion, an event stream.

Objects live in one hash per kind (msgpack of the whole object) beside a small meta hash,
``<rv>|<node>|<bound_at>|<uid>`` (:class:`~distsched.store.codec.Meta`), that Lua checks
preconditions against without decoding a blob; every write bumps the global
resourceVersion and appends one entry to the event stream, whose id is the rv, so a gap in
ids means trimmed entries. The key layout is in :mod:`distsched.keys`.

Every write is one Lua script (``distsched/lua/store_*.lua``) that checks its preconditions,
writes the object and its meta, increments the rv and appends the event. With a replica
acknowledgement policy (Sentinel), create, update, apply, delete and bind return only once
the replicas hold the write, one WAIT per call (:mod:`distsched.replication`).

Binds are the hot write (one per pod) and say little: the script checks uid and node
against the meta and writes the meta alone (rv, node, and the binding's time), leaving
the blob as it was, and its event carries no object. Every read (:meth:`Store.get`,
:meth:`Store.list`, :meth:`Store.snapshot`, informers) applies the meta to the blob, so
a bound pod reads exactly as if the whole object had been rewritten; the next full write
of the pod stores the whole object again.

Trade-off for the other writes: Lua cannot merge msgpack safely, so Python computes every
new object. Writes that depend on the current state (update, apply, update_pod_status) read
the object, build the new one, and the script refuses it if the stored rv moved since that
read; Python then re-reads and retries up to ``retries`` times. That costs one read round
trip per such write and a retry under contention, and keeps objects bit-exact.

resourceVersion semantics: ``update`` with a non-empty metadata.resourceVersion is optimistic
(stale -> :class:`Conflict`); an empty one means an unconditional replace of the current
object (what ``kubectl replace``/``apply`` does without a precondition). Updates that change
nothing write nothing (no rv, no event), as in Kubernetes.
"""

from __future__ import annotations

import builtins
import random
import secrets
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, cast

import redis

from distsched import event_log
from distsched.clock import SYSTEM_CLOCK, Clock
from distsched.keys import Keys
from distsched.lua import ScriptSet
from distsched.model.errors import ManifestError
from distsched.model.kinds import (
    ACCEPTED_API_VERSIONS,
    API_VERSIONS,
    SCHEDULED_KINDS,
    is_cluster_scoped,
    object_kind,
    store_kind_syntax,
)
from distsched.model.objects import DEFAULT_NAMESPACE, DEFAULT_SCHEDULER_NAME
from distsched.model.pod_update import validate_pod_update
from distsched.model.podgroups import group_of_object
from distsched.queue_types import WAKE_CAP
from distsched.redis_text import as_text
from distsched.replication import acknowledged
from distsched.store.codec import (
    Meta,
    Obj,
    check_node_name,
    decode_object,
    node_name_of,
    nominated_of,
    object_key,
    pack_with_rv_slot,
    parse_meta,
    rfc3339,
    rv_of,
    set_condition,
    stored_object,
    uid_of,
    with_rv,
)
from distsched.store.errors import (
    AlreadyExists,
    BindConflict,
    Conflict,
    InvalidObject,
    InvalidUpdate,
    NotFound,
    StoreError,
    UidMismatch,
    Undecodable,
)

DEFAULT_MAX_EVENTS = 1_000_000
DEFAULT_RETRIES = 40
RETRY_PAUSE_CAP_S = 0.1
EVENTS_WITH_OLD = frozenset({"Pod", "Node"})
"""Kinds whose MODIFIED events carry the previous object: the queue's event handlers
compare old and new pods and nodes and have no copy of their own (informers keep theirs,
so other kinds' updates ship the new object only)."""

OnUndecodable = Callable[[Undecodable], None]
"""What a reader does with a record it cannot decode (it is left out of the answer)."""

BindStatus = Literal[
    "bound", "already-bound", "conflict", "not-found", "uid-mismatch", "unreserved"
]
ApplyAction = Literal["created", "configured", "unchanged"]


class BindRequest(NamedTuple):
    """One pod to bind, as Store.bind_many takes it (the binder's job item is
    binder.jobs.Binding)."""

    pod_key: str
    uid: str | None
    node_name: str


class BindResult(str):
    """Outcome of one binding: the status string itself (so ``result == "bound"`` works),
    plus details. ``node`` is the pod's node afterwards ("" if not found or uid-mismatch);
    ``rv`` the pod's new resourceVersion when bound; ``detail`` the current uid
    (uid-mismatch)."""

    pod_key: str
    node: str
    rv: int | None
    detail: str

    def __new__(
        cls,
        pod_key: str,
        status: BindStatus,
        node: str = "",
        rv: int | None = None,
        detail: str = "",
    ) -> BindResult:
        self = super().__new__(cls, status)
        self.pod_key, self.node, self.rv, self.detail = pod_key, node, rv, detail
        return self

    def __getnewargs__(self) -> tuple[str, str, str, int | None, str]:  # type: ignore[override]
        return (self.pod_key, str(self), self.node, self.rv, self.detail)

    def __repr__(self) -> str:
        return f"BindResult({self.pod_key!r}, {self.status!r}, node={self.node!r}, rv={self.rv})"

    @property
    def status(self) -> BindStatus:
        return cast(BindStatus, str(self))

    @property
    def ok(self) -> bool:
        return self in ("bound", "already-bound")

    def error(self, wanted: str, uid: str | None) -> StoreError | None:
        """The exception :meth:`Store.bind` raises for this outcome (None when ok)."""
        if self == "conflict":
            return BindConflict(self.pod_key, self.node, wanted)
        if self == "not-found":
            return NotFound("Pod", self.pod_key)
        if self == "uid-mismatch":
            return UidMismatch("Pod", self.pod_key, uid or "", self.detail)
        return None


@dataclass(frozen=True, slots=True)
class StoreListing:
    """Objects of some kinds and the resourceVersion/epoch they were read at, atomically."""

    objects: dict[str, dict[str, Obj]]
    rv: int
    epoch: str


def _bound_meta(raw: bytes | None) -> Meta | None:
    """The meta of a pod whose blob predates its binding (None for every other object)."""
    if raw is None:
        return None
    parts = raw.split(b"|", 3)  # (a JSON meta of an older version never has a binding)
    if len(parts) < 4 or not parts[2] or raw.startswith(b"{"):
        return None
    return Meta(parts[0].decode(), parts[1].decode(), parts[2].decode(), parts[3].decode())


def _whole(obj: Any) -> Obj:
    """``obj`` if it has the shape every reader relies on (a map with a metadata map)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
        raise ValueError(f"a {type(obj).__name__} where an object with metadata belongs")
    return obj


def _reason(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def api_version(kind: str, obj: Obj) -> str:
    """The apiVersion stored for ``obj``: for a kind distsched acts on, its own when the
    kind accepts it (PodGroup has two), else the kind's; any other kind keeps its own."""
    given = obj.get("apiVersion")
    if kind not in API_VERSIONS:
        return str(given)
    return given if given in ACCEPTED_API_VERSIONS[kind] else API_VERSIONS[kind]


def queue_fields(pod: Obj) -> builtins.list[Any]:
    """What store_create needs to enqueue a pending pod itself: scheduler name, priority
    (as given; the script enqueues only an int32) and whether it has scheduling gates (1)
    or is a gang member (2: the handlers add it, with its pod group)."""
    spec = pod.get("spec") or {}
    priority = spec.get("priority")
    gates = 2 if group_of_object(pod) else 1 if spec.get("schedulingGates") else 0
    return [
        str(spec.get("schedulerName") or DEFAULT_SCHEDULER_NAME),
        "0" if priority is None else str(priority),
        gates,
    ]


def merge_update(current: Obj, obj: Obj, kind: str, key: str) -> Obj:
    """The object an update of ``current`` to ``obj`` stores, or the error it is refused
    with: uid, creationTimestamp and resourceVersion are ``current``'s (a given uid must
    match: :class:`UidMismatch`); status is kept when ``obj`` has none; a bound pod keeps
    its node when ``obj`` names none (:class:`BindConflict` when it names another); and a
    pod's spec may change only as kube allows (:class:`InvalidUpdate`, see
    :mod:`distsched.model.pod_update`). Pure: :meth:`Store.update` and :meth:`Store.apply`
    run it on the object they read, and ``apply`` runs it before writing anything."""
    cur_meta = current["metadata"]
    given_uid = uid_of(obj)
    if given_uid and given_uid != cur_meta["uid"]:
        raise UidMismatch(kind, key, given_uid, cur_meta["uid"])
    meta = {
        **obj["metadata"],
        "uid": cur_meta["uid"],
        "creationTimestamp": cur_meta.get("creationTimestamp", ""),
        "resourceVersion": cur_meta["resourceVersion"],
    }
    if not is_cluster_scoped(kind, cur_meta.get("namespace")):
        meta["namespace"] = cur_meta["namespace"]
    new: Obj = {
        **obj,
        "apiVersion": api_version(kind, obj),
        "kind": object_kind(kind),
        "metadata": meta,
    }
    if "status" not in obj and "status" in current:
        new["status"] = current["status"]
    cur_node, new_node = node_name_of(current), node_name_of(new)
    if cur_node and new_node != cur_node:
        if new_node:
            raise BindConflict(key, cur_node, new_node)
        new["spec"] = {**(new.get("spec") or {}), "nodeName": cur_node}
    if kind == "Pod":
        try:
            validate_pod_update(new, current)
        except ManifestError as exc:
            raise InvalidUpdate(kind, key, exc.field, exc.reason) from None
    return new


class Store:
    """Pods, nodes and objects of every other kind in Redis (one hash per store kind,
    :func:`~distsched.model.kinds.store_kind`: the kinds are not a fixed list). Objects are
    Kubernetes-shaped dicts; returned objects are new dicts but may share nested values
    with the caller's input (never mutate either)."""

    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        clock: Clock = SYSTEM_CLOCK,
        *,
        max_events: int = DEFAULT_MAX_EVENTS,
        retries: int = DEFAULT_RETRIES,
    ) -> None:
        if client.get_connection_kwargs().get("decode_responses"):
            raise ValueError("Store needs a client with decode_responses=False (msgpack values)")
        self._client = client
        self._keys = keys
        self._clock = clock
        self._max_events = max_events
        self._retries = retries
        self._scripts = ScriptSet(client)

    @property
    def client(self) -> redis.Redis:
        return self._client

    @property
    def clock(self) -> Clock:
        """The clock the store stamps writes with (its readers share it)."""
        return self._clock

    @property
    def keys(self) -> Keys:
        return self._keys

    def _attempts(self) -> Iterator[int]:
        """The attempts of an optimistic read-merge-write (at most ``retries``). After a
        lost race the writer pauses a random while, up to 2**attempt ms (capped at
        RETRY_PAUSE_CAP_S), so that writers of one object stop colliding. Measured with
        threads re-applying one pod 800 times in all: 8 attempts without pauses failed
        21 (4 threads) and 127 (16 threads) applies with Conflict; with the pauses none
        failed up to 32 threads, the worst apply needing 17 attempts."""
        for attempt in range(self._retries):
            if attempt:
                time.sleep(random.uniform(0, min(RETRY_PAUSE_CAP_S, 0.001 * 2**attempt)))
            yield attempt

    def _write_keys(self) -> builtins.list[str]:
        """The KEYS every write script starts with: rv counter, event stream, epoch, and
        the queue handlers' stream (lib/storeevent.lua)."""
        k = self._keys
        return [k.resource_version, k.events, k.store_epoch, k.queue_events]

    # --- reads ------------------------------------------------------------------------
    def get(self, kind: str, key: str) -> Obj | None:
        if kind != "Pod":  # only pods are bound, so only their meta may add to the blob
            blob = self._client.hget(self._keys.objects(kind), key)
            return None if blob is None else decode_object(blob)
        return self.get_many(kind, [key])[0]

    def get_many(self, kind: str, keys: Sequence[str]) -> builtins.list[Obj | None]:
        """Objects of ``kind`` by key (None where absent), read in one MULTI."""
        return [
            None if blob is None else stored_object(blob, meta)
            for blob, meta in self._raw(kind, keys)
        ]

    def _raw(
        self, kind: str, keys: Sequence[str]
    ) -> builtins.list[tuple[bytes | None, Meta | None]]:
        """(blob, meta) of each key, read together (the meta is what a bind wrote)."""
        if not keys:
            return []
        pipe = self._client.pipeline(transaction=True)
        pipe.hmget(self._keys.objects(kind), keys)
        pipe.hmget(self._keys.store_meta(kind), keys)
        blobs, metas = pipe.execute()
        return [
            (blob, None if meta is None else parse_meta(meta))
            for blob, meta in zip(blobs, metas, strict=True)
        ]

    def binding_states(
        self, bindings: Sequence[tuple[str, int, str]]
    ) -> builtins.list[tuple[Obj | None, Obj | None]]:
        """For readers without a copy of a pod from before its binding event (pod key,
        rv, node): (previous object, object after the binding), one pair per binding.
        While the pod is still as that binding left it, both exactly (the blob is the
        previous object); once it moved on, (None, its current state) if it is still on
        that node, else (None, None): deleted or re-created since, as a later event says."""
        out: builtins.list[tuple[Obj | None, Obj | None]] = []
        keys = [key for key, _, _ in bindings]
        for (_, rv, node), (blob, meta) in zip(bindings, self._raw("Pod", keys), strict=True):
            if blob is None or meta is None or meta.node != node:
                out.append((None, None))
            elif meta.rv == str(rv) and meta.bound_at:
                out.append((decode_object(blob), stored_object(blob, meta)))
            else:
                out.append((None, stored_object(blob, meta)))
        return out

    def custom_kinds(self) -> builtins.list[str]:
        """Every custom store kind (``Kind.group``) objects were ever created in."""
        return sorted(as_text(k) for k in self._client.hkeys(self._keys.store_kinds))

    def resource_version(self) -> int:
        return int(self._client.get(self._keys.resource_version) or 0)

    def list(
        self,
        kind: str,
        namespace: str | None = None,
        *,
        on_undecodable: OnUndecodable | None = None,
    ) -> tuple[builtins.list[Obj], int]:
        """Objects of ``kind`` (pods optionally of one namespace), sorted by key, and the
        resourceVersion they were read at (``on_undecodable``: see :meth:`snapshot`)."""
        snap = self.snapshot([kind], on_undecodable=on_undecodable)
        items = snap.objects[kind]
        if namespace is not None:
            prefix = namespace + "/"
            return [o for k, o in sorted(items.items()) if k.startswith(prefix)], snap.rv
        return [o for _, o in sorted(items.items())], snap.rv

    def snapshot(
        self, kinds: Iterable[str] = SCHEDULED_KINDS, *, on_undecodable: OnUndecodable | None = None
    ) -> StoreListing:
        """All objects of ``kinds`` with the rv and epoch, read in one MULTI. Since event ids
        are ``<rv>-0``, watching from ``rv`` misses nothing and repeats nothing.

        A record that cannot be decoded raises :class:`Undecodable` naming it; with
        ``on_undecodable`` it is left out and the callback gets that error instead."""
        kinds = list(kinds)
        pipe = self._client.pipeline(transaction=True)
        for kind in kinds:
            pipe.hgetall(self._keys.objects(kind))
            if kind == "Pod":
                pipe.hgetall(self._keys.store_meta(kind))
        pipe.get(self._keys.resource_version)
        pipe.get(self._keys.store_epoch)
        replies = iter(pipe.execute())
        objects: dict[str, dict[str, Obj]] = {}
        for kind in kinds:
            blobs: dict[bytes, bytes] = next(replies)
            metas: dict[bytes, bytes] = next(replies) if kind == "Pod" else {}
            objects[kind] = decoded = {}
            for k, v in blobs.items():
                try:
                    decoded[k.decode()] = _whole(stored_object(v, _bound_meta(metas.get(k))))
                except Exception as exc:  # msgpack, UTF-8 or shape: whatever it holds
                    error = Undecodable(kind, k.decode(errors="replace"), _reason(exc))
                    if on_undecodable is None:
                        raise error from exc
                    on_undecodable(error)
        rv, epoch = next(replies), next(replies)
        return StoreListing(objects, int(rv or 0), epoch.decode() if epoch else "")

    # --- create -----------------------------------------------------------------------
    def create(self, obj: Obj) -> Obj:
        """Store a new object; :class:`AlreadyExists` if its key is taken. Assigns
        metadata.uid (a given one is ignored), creationTimestamp and resourceVersion."""
        return self.create_many([obj])[0]

    @acknowledged("create")
    def create_many(self, objs: Sequence[Obj]) -> builtins.list[Obj]:
        """Create objects of any kinds in one script call, all or nothing: if one exists
        (or a key repeats in the batch) :class:`AlreadyExists` and nothing is written."""
        if not objs:
            return []
        keys, argv, prepared = self.create_call(objs)
        custom = {kind for kind, _, _ in prepared if "." in kind}
        if custom:  # for readers that resolve kubectl's names (a superset is harmless)
            self._client.hset(self._keys.store_kinds, mapping=dict.fromkeys(custom, 1))
        status, value = self._scripts.get("store_create")(keys=keys, args=argv)
        if status != b"ok":
            kind, key, _ = prepared[int(value) - 1]
            raise AlreadyExists(kind, key)
        first = int(value)
        return [with_rv(new, first + i) for i, (_, _, new) in enumerate(prepared)]

    def create_call(
        self, objs: Sequence[Obj], *, mirrored: bool = False
    ) -> tuple[builtins.list[str], builtins.list[Any], builtins.list[tuple[str, str, Obj]]]:
        """KEYS and ARGV of a store_create call for ``objs``, and (kind, key, object) of
        each as it will be stored. ``mirrored``: the objects come from a real API server
        and keep their uid and creationTimestamp (see :mod:`distsched.store.mirror`)."""
        now_ms = self._clock.now_ms()
        now = rfc3339(now_ms)
        slots: dict[str, int] = {}
        k = self._keys
        keys = self._write_keys()
        keys += [k.profiles, k.info, k.active, k.gated, k.wake]
        keys += [k.backoff, k.unschedulable, k.inflight, k.dead, k.added]
        argv: builtins.list[Any] = [
            self._max_events,
            secrets.token_hex(8),
            len(objs),
            now_ms,
            WAKE_CAP,
        ]
        prepared: builtins.list[tuple[str, str, Obj]] = []
        for obj in objs:
            kind, key = object_key(obj)
            new = self._new_object(obj, kind, now, mirrored=mirrored)
            slot = slots.get(kind)
            if slot is None:
                slot = slots[kind] = len(slots) + 1
                keys += [self._keys.objects(kind), self._keys.store_meta(kind)]
            prefix, suffix = pack_with_rv_slot(new)
            node = node_name_of(new)
            check_node_name(node, f"{kind} {key}")
            argv += [slot, kind, key, uid_of(new), node, nominated_of(new), prefix, suffix]
            argv += queue_fields(new) if kind == "Pod" else ["", "", 0]
            prepared.append((kind, key, new))
        return keys, argv, prepared

    @staticmethod
    def _new_object(obj: Obj, kind: str, now: str, *, mirrored: bool = False) -> Obj:
        # The store assigns every uid, as kube's API server does (a given one is ignored):
        # a uid is unique, and the meta record never holds a user's '|' or newline. A
        # mirrored object is the API server's: its uid and creation time are the truth.
        if mirrored:
            meta = dict(obj["metadata"])
        else:
            meta = {**obj["metadata"], "creationTimestamp": now, "uid": str(uuid.uuid4())}
        meta.pop("resourceVersion", None)
        if is_cluster_scoped(kind, meta.get("namespace")):
            meta.pop("namespace", None)
        else:
            meta["namespace"] = meta.get("namespace") or DEFAULT_NAMESPACE
        return {
            **obj,
            "apiVersion": api_version(kind, obj),
            "kind": object_kind(kind),
            "metadata": meta,
        }

    # --- update / apply ---------------------------------------------------------------
    @acknowledged("update")
    def update(self, obj: Obj) -> Obj:
        """Replace an existing object. A non-empty metadata.resourceVersion must equal the
        stored one (else :class:`Conflict`); an empty one replaces unconditionally.
        uid and creationTimestamp are kept; a given uid must match (:class:`UidMismatch`).
        status is kept when ``obj`` has none; a bound pod keeps its spec.nodeName and
        moving it elsewhere raises :class:`BindConflict`. No change -> no write."""
        kind, key = object_key(obj)
        wanted_rv = rv_of(obj)
        for _ in self._attempts():
            current = self.get(kind, key)
            if current is None:
                raise NotFound(kind, key)
            if wanted_rv and wanted_rv != rv_of(current):
                raise Conflict(kind, key, wanted_rv, rv_of(current))
            new = self._merge_update(current, obj, kind, key)
            if new == current:
                return current
            stored = self._replace(kind, key, current, new)
            if stored is not None:
                return stored
        raise Conflict(kind, key, wanted_rv, "(changed on every retry)")

    @acknowledged("apply")
    def apply(self, obj: Obj) -> tuple[Obj, ApplyAction]:
        """Create the object, or replace it unconditionally (its resourceVersion is ignored)."""
        kind, key = object_key(obj)
        unconditional = with_rv(obj, "")
        for _ in self._attempts():
            current = self.get(kind, key)
            if current is None:
                try:
                    return self.create(obj), "created"
                except AlreadyExists:
                    continue
            new = self._merge_update(current, unconditional, kind, key)
            if new == current:
                return current, "unchanged"
            try:
                stored = self._replace(kind, key, current, new)
            except NotFound:
                continue  # deleted since our read: create it
            if stored is not None:
                return stored, "configured"
        raise Conflict(kind, key, "", "(changed on every retry)")

    @acknowledged("apply")
    def apply_many(
        self,
        objs: Sequence[Obj],
        *,
        applied: Callable[[int, ApplyAction], None] | None = None,
    ) -> builtins.list[ApplyAction]:
        """:meth:`apply` for a batch (one action per object, in order): the objects that do
        not exist yet are created with one :meth:`create_many` call, the others applied
        one by one (and everything one by one if the batch create lost a race).

        ``applied(i, action)`` is called as soon as object ``i`` is written (or found
        unchanged), so that a caller interrupted by an error (an update refused, Redis out
        of memory) knows what was written before it."""
        report = applied or (lambda _i, _action: None)
        located = [object_key(obj) for obj in objs]
        pipe = self._client.pipeline(transaction=False)
        for kind, key in located:
            pipe.hexists(self._keys.store_meta(kind), key)
        exists = pipe.execute()
        actions: builtins.list[ApplyAction | None] = [None] * len(objs)
        new = [i for i, there in enumerate(exists) if not there]
        if new and len({located[i] for i in new}) == len(new):
            try:
                self.create_many([objs[i] for i in new])
                for i in new:
                    actions[i] = "created"
                    report(i, "created")
            except AlreadyExists:
                pass
        for i, obj in enumerate(objs):
            if actions[i] is None:
                action = actions[i] = self.apply(obj)[1]
                report(i, action)
        return [a for a in actions if a is not None]

    @staticmethod
    def _merge_update(current: Obj, obj: Obj, kind: str, key: str) -> Obj:
        return merge_update(current, obj, kind, key)

    def _replace(self, kind: str, key: str, current: Obj, new: Obj) -> Obj | None:
        """Write ``new`` if ``current`` is still stored; None when it moved (retry)."""
        keys, args = self.update_call(kind, key, rv_of(current), new)
        reply = self._scripts.get("store_update")(keys=keys, args=args)
        if reply[0] == b"ok":
            return with_rv(new, reply[1])
        if reply[0] == b"notfound":
            raise NotFound(kind, key)
        return None

    def update_call(
        self, kind: str, key: str, current_rv: str, new: Obj
    ) -> tuple[builtins.list[str], builtins.list[Any]]:
        """KEYS and ARGV of a store_update call writing ``new`` over the object stored at
        resourceVersion ``current_rv``."""
        node = node_name_of(new)
        check_node_name(node, f"{kind} {key}")
        prefix, suffix = pack_with_rv_slot(new)
        keys = [*self._write_keys(), self._keys.objects(kind), self._keys.store_meta(kind)]
        args = [
            self._max_events,
            secrets.token_hex(8),
            kind,
            key,
            current_rv,
            uid_of(new),
            node,
            nominated_of(new),
            "1" if kind in EVENTS_WITH_OLD else "",
            prefix,
            suffix,
        ]
        return keys, args

    def update_pod_status(
        self,
        pod_key: str,
        *,
        nominated_node_name: str | None = None,
        conditions: Sequence[Mapping[str, Any]] = (),
        uid: str | None = None,
        pending_only: bool = False,
        seen: Obj | None = None,
    ) -> Obj:
        """Set status.nominatedNodeName (None: leave, "": clear) and status conditions (by
        type, e.g. ``{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "message": ...}``) without touching spec. No change -> no write. With
        ``pending_only``, a pod bound meanwhile is left as it is (returned unchanged): a
        failed attempt's PodScheduled=False must not land on a pod another attempt bound.
        ``seen``: the pod as the caller last read it (with its resourceVersion); the first
        try starts from it instead of reading the pod, and a newer one is read then."""
        for cond in conditions:
            if not cond.get("type") or not cond.get("status"):
                raise InvalidObject(f"pod {pod_key}: a condition needs a type and a status")
        for attempt in self._attempts():
            current = seen if attempt == 0 and seen is not None else self.get("Pod", pod_key)
            if current is None:
                raise NotFound("Pod", pod_key)
            if uid and uid_of(current) != uid:
                raise UidMismatch("Pod", pod_key, uid, uid_of(current))
            if pending_only and node_name_of(current):
                return current
            status = dict(current.get("status") or {})
            if nominated_node_name == "":
                status.pop("nominatedNodeName", None)
            elif nominated_node_name is not None:
                status["nominatedNodeName"] = nominated_node_name
            if conditions:
                now = rfc3339(self._clock.now_ms())
                merged = list(status.get("conditions") or [])
                for cond in conditions:
                    merged = set_condition(merged, cond, now)
                status["conditions"] = merged
            if status == (current.get("status") or {}):
                return current
            stored = self._replace("Pod", pod_key, current, {**current, "status": status})
            if stored is not None:
                return stored
        raise Conflict("Pod", pod_key, "", "(changed on every retry)")

    # --- delete -----------------------------------------------------------------------
    @acknowledged("delete")
    def delete(self, kind: str, key: str, *, uid: str | None = None) -> Obj:
        """Delete an object (:class:`NotFound` if absent; with ``uid``, :class:`UidMismatch`
        if the stored object is another incarnation). Returns its last state. A pod's own
        records outside the store (its explain record, its Permit verdicts) go with it."""
        keys, args = self.delete_call(kind, key, uid)
        reply = self._scripts.get("store_delete")(keys=keys, args=args)
        if reply[0] == b"notfound":
            raise NotFound(kind, key)
        if reply[0] == b"uid-mismatch":
            raise UidMismatch(kind, key, uid or "", reply[1].decode())
        return with_rv(stored_object(reply[2], _bound_meta(reply[3])), reply[1])

    @acknowledged("delete")
    def delete_pods(
        self, pods: Sequence[tuple[str, str | None]]
    ) -> builtins.list[NotFound | UidMismatch | None]:
        """:meth:`delete` of each (pod key, uid or None), in order, in one round trip:
        per pod None (deleted) or the refusal :meth:`delete` would raise."""
        calls = [self.delete_call("Pod", key, uid) for key, uid in pods]
        replies = self._scripts.run_many("store_delete", calls)
        answers: builtins.list[NotFound | UidMismatch | None] = []
        for (key, uid), reply in zip(pods, replies, strict=True):
            if reply[0] == b"notfound":
                answers.append(NotFound("Pod", key))
            elif reply[0] == b"uid-mismatch":
                answers.append(UidMismatch("Pod", key, uid or "", reply[1].decode()))
            else:
                answers.append(None)
        return answers

    def delete_call(
        self, kind: str, key: str, uid: str | None
    ) -> tuple[builtins.list[str], builtins.list[Any]]:
        """KEYS and ARGV of a store_delete call (a pod's own records go with it)."""
        reason = store_kind_syntax(kind)
        if reason is not None:
            raise InvalidObject(f"kind {reason}, got {kind!r}")
        own_records = [self._keys.explain, self._keys.permit(key)] if kind == "Pod" else []
        keys = [
            *self._write_keys(),
            self._keys.objects(kind),
            self._keys.store_meta(kind),
            *own_records,
        ]
        return keys, [self._max_events, secrets.token_hex(8), kind, key, uid or ""]

    @property
    def scripts(self) -> ScriptSet:
        """The store's registered scripts (for callers that batch its calls in a
        transaction, such as :mod:`distsched.store.mirror`)."""
        return self._scripts

    # --- bind -------------------------------------------------------------------------
    def bind(
        self, pod_key: str, uid: str | None, node_name: str
    ) -> Literal["bound", "already-bound"]:
        """Set the pod's spec.nodeName (and condition PodScheduled=True). Binding to the node
        it is already on is a no-op ("already-bound", no event). Raises :class:`BindConflict`
        (bound elsewhere), :class:`NotFound`, :class:`UidMismatch`."""
        result = self.bind_many([BindRequest(pod_key, uid, node_name)])[0]
        error = result.error(node_name, uid)
        if error is not None:
            raise error
        return "bound" if result.status == "bound" else "already-bound"

    @acknowledged("bind")
    def bind_many(
        self,
        bindings: Sequence[BindRequest | tuple[str, str | None, str]],
        *,
        reservations: Mapping[str, str] | None = None,
        scheduled_by: Mapping[str, str] | None = None,
    ) -> builtins.list[BindResult]:
        """Bind a batch in one script call; one :class:`BindResult` per binding, in order.
        The script checks each pod's uid and node against its meta and writes the meta
        alone (see the module docstring): no read, no rebuilt object, no retry.

        ``reservations`` (pod key -> token) is the binder's mode: a pod is bound only while
        the ledger still holds that reservation on that node ("unreserved" otherwise), and
        the reservation is confirmed in the same script (also for a pod already bound
        there: a killed job's leftover). :class:`InvalidObject` (nothing written) for an
        empty node name or one holding ``|``.

        ``scheduled_by`` (pod key -> its scheduler name): each pod bound gets kube's
        Scheduled event in the scheduler's event log, in the same script."""
        items = [BindRequest(*b) for b in bindings]
        if not items:
            return []
        argv: builtins.list[Any] = [
            self._max_events,
            secrets.token_hex(8),
            rfc3339(self._clock.now_ms()),
            len(items),
        ]
        for b in items:
            if not b.node_name:
                raise InvalidObject(f"binding of pod {b.pod_key}: empty node name")
            check_node_name(b.node_name, f"binding of pod {b.pod_key}")
            argv += [b.pod_key, b.uid or "", b.node_name]
            if reservations is not None:
                argv.append(reservations.get(b.pod_key, ""))
            if scheduled_by is not None:
                argv.append(scheduled_by.get(b.pod_key) or event_log.DEFAULT_SOURCE)
        k = self._keys
        keys = [*self._write_keys(), k.store_meta("Pod")]
        if reservations is not None:
            keys += [k.ledger_pods, k.ledger_assumed, k.info, k.cycle, k.move_cycle]
            keys.append(k.unschedulable)
        if scheduled_by is not None:
            keys.append(k.recorded_bindings)
            argv.append(event_log.BINDING_HISTORY)
        reply = self._scripts.get("store_bind")(keys=keys, args=argv)
        results: builtins.list[BindResult] = []
        for n, b in enumerate(items):
            status, detail = reply[2 * n].decode(), reply[2 * n + 1].decode()
            if status == "bound":
                results.append(BindResult(b.pod_key, "bound", b.node_name, int(detail)))
            elif status == "already-bound":
                results.append(BindResult(b.pod_key, "already-bound", b.node_name))
            elif status == "conflict":
                results.append(BindResult(b.pod_key, "conflict", detail))
            elif status == "uid-mismatch":
                results.append(BindResult(b.pod_key, "uid-mismatch", "", None, detail))
            elif status == "unreserved":
                results.append(BindResult(b.pod_key, "unreserved"))
            else:
                results.append(BindResult(b.pod_key, "not-found"))
        return results
