"""Informer: a local, event-driven copy of the store (client-go's SharedInformer, reduced).

It lists the watched kinds together with the store's resourceVersion and epoch (one MULTI),
then tails the event stream from entry ``<rv>-0`` with ``XREAD BLOCK``. It keeps an
indexer (kind -> key -> object) and calls each kind's handlers (:class:`EventHandler`).

Relist. Event ids are ``<rv>-0`` and every rv has an event, so the next entry must be
``position + 1`` (a batch entry, the events of a create or a bind of many pods: its
``first``); anything else means entries were trimmed past us. An event or store whose
epoch differs means Redis lost its data and rvs restarted. An idle read also checks the
store's rv: lower than our position means a reset, higher with no entry to read means
the stream was trimmed empty. In all these cases, after a Redis connection error (a
restart may have dropped the last writes) and when the client's connections reach another
server (:func:`distsched.connection.server_changes`: a promoted replica keeps the epoch and
may lack the last entries read, while its own next entries carry on their numbers, so no
gap shows), the informer relists and reconciles: deletes
for vanished objects (``final_state_unknown=True``, like ``DeletedFinalStateUnknown``),
updates for changed ones, adds for new ones; an object re-created under the same key (new
uid) is a delete then an add. A relist that finds the store reset (its rv below ours, or
another epoch) counts in :attr:`Informer.resets`: a role that set things up in Redis
once compares it to notice that they are gone.

Handlers run in the informer's thread (or the caller's, with :meth:`Informer.poll_once`;
never both), under the informer's lock; an exception in a handler is logged and does not
stop delivery. Objects are shared between the indexer and handlers: never mutate them.

Lazy decoding. The indexer holds :class:`~distsched.store.codec.ObjectRef` values: an
object is decoded when someone first asks for it (:meth:`Informer.get`, :meth:`Informer.list`,
a handler), not when its event arrives. A handler registered with ``lazy=True`` gets the
refs themselves, with the key and, for pods, node and nominated node at hand, and decodes
only what it needs (a worker's cache ignores pending pods, most of the stream); while every
handler of pods is lazy, a pod entry goes straight to refs and handlers, without an
:class:`Event` (a worker follows every pod: this is its hot path). A binding
event carries no object: the informer rebuilds the bound pod from its own previous copy
(old = that copy, new = it with spec.nodeName, PodScheduled and the rv set, the same pair
as if the whole object had been shipped); without a copy it reads the store.

Pods left out. Given ``leave_pending`` (a predicate on a pod's msgpack blob), the informer
of a scheduling worker holds only part of the pods while its pod handlers are all lazy:
an unbound pod created without a nominated node whose blob the predicate passes is not
delivered, only its blob set aside (undecoded, no ref), and the binding of a pod it does
not hold (another worker's pod, bound without this reader ever asking for it) is
dropped with that blob. ``get`` and ``list`` take a pod set aside into the indexer (a
worker asks for the pods it pops: held from then on); any other event of a pod left
out (an update, a delete) is delivered and holds it; :meth:`Informer.hold` holds one
read from the store; a relist holds every pod; :meth:`Informer.hold_all` relists and
stops leaving pods out for good.

Position. The informer reports how far it has read (``store:readers``, at most every
5 s and on every relist) so that the stream is trimmed only below what every live reader
has read (:mod:`distsched.store.trim`); :meth:`Informer.stop` withdraws the report.

Client: ``block_ms`` must stay below its socket timeout (redis-py's default is 5 s).
redis-py's default retries (10, backoff capped at 1 s) hide outages shorter than ~3 s from
the informer: reads just stall, and the epoch and rv checks still catch lost data. Give it
a client with ``retry=Retry(NoBackoff(), 0)`` to have its own capped backoff take over.
"""

from __future__ import annotations

import builtins
import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import redis

from distsched.clock import SYSTEM_CLOCK, Clock
from distsched.connection import server_changes
from distsched.keys import Keys
from distsched.model.kinds import SCHEDULED_KINDS
from distsched.store import trim
from distsched.store.codec import (
    DELETED,
    STREAM_PAGE,
    Event,
    Obj,
    ObjectRef,
    batch_items,
    blob_ref,
    bound_ref,
    decode_event,
    entry_events,
    event_fields,
    uid_of,
)
from distsched.store.errors import Undecodable
from distsched.store.redis_store import Store

log = logging.getLogger(__name__)


class EventHandler(Protocol):
    """Per-kind callbacks, like client-go's ResourceEventHandler. Registered with
    ``lazy=True``, the same methods get :class:`ObjectRef` values instead of objects."""

    def on_add(self, obj: Any, initial_list: bool) -> None: ...

    def on_update(self, old: Any, new: Any) -> None: ...

    def on_delete(self, obj: Any, final_state_unknown: bool) -> None: ...


T = TypeVar("T")


@dataclass
class FuncHandler(Generic[T]):
    """An :class:`EventHandler` from optional functions (of objects, or of
    :class:`ObjectRef` values for a handler registered with ``lazy=True``)."""

    add: Callable[[T, bool], None] | None = None
    update: Callable[[T, T], None] | None = None
    delete: Callable[[T, bool], None] | None = None

    def on_add(self, obj: T, initial_list: bool) -> None:
        if self.add is not None:
            self.add(obj, initial_list)

    def on_update(self, old: T, new: T) -> None:
        if self.update is not None:
            self.update(old, new)

    def on_delete(self, obj: T, final_state_unknown: bool) -> None:
        if self.delete is not None:
            self.delete(obj, final_state_unknown)


PodPairs = builtins.list[tuple[ObjectRef | None, ObjectRef]]
"""(previous ref or None, new ref) of each pod of a batch entry: an add or an update."""


class MethodHandler:
    """An :class:`EventHandler` of three callables, called directly (no method of its own
    in between): for the handlers of the informer's hot path. ``many``, for a lazy pod
    handler: takes the pods of a batch entry the informer made into refs, all in one call,
    instead of ``add``/``update`` for each (it catches its own exceptions)."""

    __slots__ = ("on_add", "on_delete", "on_many", "on_update")

    def __init__(
        self,
        add: Callable[[Any, bool], None],
        update: Callable[[Any, Any], None],
        delete: Callable[[Any, bool], None],
        many: Callable[[PodPairs], None] | None = None,
    ) -> None:
        self.on_add = add
        self.on_update = update
        self.on_delete = delete
        self.on_many = many


def _entries(reply: Any) -> list[tuple[bytes, dict[bytes, bytes]]]:
    """Entries of a single-stream XREAD reply, RESP2 (list) or RESP3 (dict)."""
    if not reply:
        return []
    if isinstance(reply, dict):
        return [(e[0], e[1]) for e in next(iter(reply.values()))]
    return [(e[0], e[1]) for e in reply[0][1]]


class Informer:
    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        kinds: Iterable[str] = SCHEDULED_KINDS,
        *,
        block_ms: int = 1000,
        batch: int = STREAM_PAGE,
        backoff_initial_s: float = 0.1,
        backoff_max_s: float = 5.0,
        reader: str | None = None,
        clock: Clock = SYSTEM_CLOCK,
        leave_pending: Callable[[bytes], bool] | None = None,
    ) -> None:
        self._client = client
        self._keys = keys
        self._store = Store(client, keys)
        self._kinds = tuple(kinds)
        self._block_ms = block_ms
        self._batch = batch
        self._backoff_initial_s = backoff_initial_s
        self._backoff_max_s = backoff_max_s
        self._handlers: dict[str, builtins.list[tuple[EventHandler, bool]]] = {
            k: [] for k in self._kinds
        }
        self._indexer: dict[str, dict[str, ObjectRef]] = {k: {} for k in self._kinds}
        self._lock = threading.RLock()
        self._rv = 0
        self._epoch_raw = b""
        self._need_relist = True
        # server_changes(client) as of the last relist: another server may lack what the
        # indexer read from the one before (see distsched.connection).
        self._server_changes = 0
        self._synced = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.relists = 0
        # Relists because the store was reset (Redis lost its data: the rv went back or
        # the epoch changed): a role compares it to notice and set itself up again.
        self.resets = 0
        # The name this informer reports its stream position under (store:readers).
        self.reader = reader or f"informer-{uuid.uuid4().hex[:12]}"
        self._clock = clock
        self._next_report_ms = 0
        # Pending pods whose blob this says to leave are not held (see the docstring):
        # their blobs wait here (key -> blob) until they are bound, changed or asked for.
        self._leave_pending = leave_pending
        self._aside: dict[bytes, bytes] = {}

    @property
    def _epoch(self) -> str:
        """The store's epoch the indexer reflects ("" before the first list or event)."""
        return self._epoch_raw.decode()

    @_epoch.setter
    def _epoch(self, epoch: str) -> None:
        self._epoch_raw = epoch.encode()  # compared with each entry's bytes as they come

    # --- handlers and the indexer -----------------------------------------------------
    def add_handler(self, kind: str, handler: EventHandler, *, lazy: bool = False) -> None:
        """Register ``handler`` for ``kind``; if already synced it first gets an add for
        every object in the indexer (``initial_list=True``), as client-go does. ``lazy``:
        the handler gets :class:`ObjectRef` values and decodes what it needs."""
        with self._lock:
            self._handlers[kind].append((handler, lazy))
            if self._synced.is_set():
                for ref in list(self._indexer[kind].values()):
                    self._call(handler.on_add, lazy, ref, True)

    # --- pods this reader leaves to others ------------------------------------------
    @property
    def holds_every_pod(self) -> bool:
        """False while pending pods the ``leave_pending`` predicate passes are left out."""
        return self._leave_pending is None

    def hold(self, key: str, obj: Obj) -> None:
        """Hold a pod read from the store (one this informer left out) so that its next
        events are followed; nothing is delivered. A copy already held is kept."""
        with self._lock:
            self._aside.pop(key.encode(), None)
            self._indexer["Pod"].setdefault(key, ObjectRef(key, obj))

    def hold_all(self) -> int:
        """Stop leaving pods out: relist now, so that every pod is held and delivered
        (adds for those left out), and follow every pod from then on. Returns the
        deliveries made."""
        if self._leave_pending is None:
            return 0
        self._leave_pending = None
        return self._relist()

    def get(self, kind: str, key: str) -> Obj | None:
        with self._lock:
            ref = self._indexer[kind].get(key)
            if ref is None and kind == "Pod" and self._aside:
                ref = self._take_aside(key.encode())
            return None if ref is None else ref.get()

    def list(self, kind: str) -> builtins.list[Obj]:
        with self._lock:
            if kind == "Pod":
                for raw_key in builtins.list(self._aside):
                    self._take_aside(raw_key)
            return [ref.get() for ref in self._indexer[kind].values()]

    def _take_aside(self, raw_key: bytes) -> ObjectRef | None:
        """Hold a pending pod whose blob was set aside (it is asked for: it is held and
        followed from now on); None when there is none."""
        blob = self._aside.pop(raw_key, None)
        if blob is None:
            return None
        key = raw_key.decode()
        ref = self._indexer["Pod"][key] = blob_ref(key, blob, None, None, "", "")
        return ref

    @property
    def resource_version(self) -> int:
        """The rv of the last event (or list) the indexer reflects."""
        return self._rv

    @property
    def has_synced(self) -> bool:
        return self._synced.is_set()

    def wait_synced(self, timeout: float | None = None) -> bool:
        return self._synced.wait(timeout)

    # --- running ----------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("informer already started")
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="distsched-informer", daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = 10.0) -> None:
        """Stop the thread; returns after its current read (at most ``block_ms``). The
        informer no longer holds the event stream back."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        self.forget_position()

    def forget_position(self) -> None:
        """Withdraw this informer's stream position (it stops reading)."""
        try:
            trim.forget_reader(self._client, self._keys, self.reader)
        except redis.RedisError:
            log.info("informer: could not withdraw %s's position; it expires", self.reader)

    def _report_position(self, *, now: bool = False) -> None:
        at = self._clock.now_ms()
        if now or at >= self._next_report_ms:
            trim.report_position(self._client, self._keys, self.reader, self._rv, at)
            self._next_report_ms = at + trim.REPORT_INTERVAL_MS

    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                self.poll_once(self._block_ms)
                failures = 0
            except Exception as exc:
                delay = min(self._backoff_max_s, self._backoff_initial_s * 2**failures)
                failures += 1
                if isinstance(exc, redis.ConnectionError | redis.TimeoutError):
                    log.warning("informer: Redis unavailable (%s); retry in %.2fs", exc, delay)
                else:
                    log.exception("informer: unexpected error; relisting in %.2fs", delay)
                self._need_relist = True
                self._stop.wait(delay)

    def poll_once(self, block_ms: int = 0) -> int:
        """Do one step synchronously: relist if needed, else read one batch of events
        (waiting up to ``block_ms``; 0 = do not wait). Returns the number of handler
        deliveries made (per object, not per handler)."""
        if self._need_relist or self._server_changed():
            return self._relist()
        self._report_position()
        reply = self._client.xread(
            {self._keys.events: f"{self._rv}-0"},
            count=self._batch,
            block=block_ms if block_ms > 0 else None,
        )
        if self._server_changed():  # the read reconnected: its entries follow no position
            return self._relist()
        entries = _entries(reply)
        if not entries:
            return self._check_idle()
        delivered = 0
        pods = self._indexer.get("Pod", {})
        lean_pods = "Pod" in self._indexer and all(lazy for _, lazy in self._handlers["Pod"])
        gap = False
        with self._lock:  # once per batch; a relist reads the store outside it
            for entry_id, fields in entries:
                rv = int(entry_id.split(b"-", 1)[0])
                raw_epoch = fields[b"epoch"]
                if raw_epoch != self._epoch_raw:
                    if self._rv != 0 or self._epoch_raw:
                        log.info("informer: the stream's epoch changed at rv %d; relisting", rv)
                        gap = True
                        break
                    self._epoch = raw_epoch.decode()
                first = fields.get(b"first")  # a batch entry: its events' rvs end at rv
                if (rv if first is None else int(first)) != self._rv + 1:
                    log.info(
                        "informer: stream gap at rv %d (next entry %d); relisting", self._rv, rv
                    )
                    gap = True
                    break
                if first is None:
                    delivered += self._apply(fields, rv, lean_pods, pods)
                elif lean_pods and fields[b"kind"] == b"Pod":
                    delivered += self._deliver_pod_batch(fields, pods)
                else:
                    for event_rv, event in entry_events(fields):
                        delivered += self._apply(event, event_rv, lean_pods, pods)
                self._rv = rv
        if gap:
            return delivered + self._relist()
        return delivered

    def _apply(
        self,
        fields: Mapping[bytes, bytes],
        rv: int,
        lean_pods: bool,
        pods: dict[str, ObjectRef],
    ) -> int:
        """Deliver one event (the fields of its entry); 1 if it was delivered."""
        raw_kind = fields[b"kind"]
        if raw_kind == b"Pod" and lean_pods and self._deliver_pod(fields, rv, pods):
            return 1
        kind = raw_kind.decode()
        if kind not in self._indexer:
            return 0
        if self._aside and raw_kind == b"Pod":
            self._aside.pop(fields[b"key"], None)  # what follows supersedes the blob
        key = fields[b"key"].decode()
        previous = self._indexer[kind].get(key)
        self._deliver(decode_event(fields, previous), previous)
        return 1

    def _deliver_pod(
        self, fields: Mapping[bytes, bytes], rv: int, pods: dict[str, ObjectRef]
    ) -> bool:
        """The two events of almost every pod, a pending pod added and its binding, made
        into refs and handed to lazy handlers without an :class:`Event` in between: a
        worker follows every pod of the cluster, so this is its informer's hot path.
        False: not one of those (the general path delivers it)."""
        get = fields.get
        raw_node = get(b"node")
        if raw_node is None or fields[b"type"] == b"DELETED" or b"objmeta" in fields:
            return False
        bound_at = get(b"bound")
        if bound_at is None and b"old" in fields:
            return False
        leave = self._leave_pending
        if leave is not None:
            raw_key = fields[b"key"]
            if bound_at is None:
                blob = get(b"obj")
                if not raw_node and b"nom" not in fields and blob is not None and leave(blob):
                    self._aside[raw_key] = blob  # left out: set aside, not delivered
                    return True
            elif raw_key.decode() not in pods:
                self._aside.pop(raw_key, None)  # the binding of a pod left out
                return True
        pair = self._pod_ref(fields[b"key"], rv, raw_node, get(b"obj"), get(b"nom"), bound_at, pods)
        if pair is None:
            return False
        self._deliver_pairs([pair])
        return True

    def _deliver_pod_batch(self, fields: Mapping[bytes, bytes], pods: dict[str, ObjectRef]) -> int:
        """The events of a batch entry of pods (lua/lib/storeevent.lua) by position: the
        writers' two shapes, a pending pod added ``[key, "obj", blob, "node", node(,
        "nom", nominated)]`` and a binding ``[key, "node", node, "bound", time]``, go
        straight to :meth:`_pod_ref`; anything else through the fields its own
        entry would have had."""
        items = batch_items(fields)
        assert items is not None
        first, etype = int(fields[b"first"]), fields[b"type"]
        added, bound = etype == b"ADDED", etype == b"MODIFIED"
        pairs: PodPairs = []
        delivered = 0
        leave, aside = self._leave_pending, self._aside
        for offset, item in enumerate(items):
            rv, n = first + offset, len(item)
            pair = None
            if leave is not None and n == 5:
                if added:
                    if not item[4] and item[1] == b"obj" and item[3] == b"node" and leave(item[2]):
                        aside[item[0]] = item[2]  # a pending pod left out: set aside
                        continue
                elif (
                    bound
                    and item[1] == b"node"
                    and item[3] == b"bound"
                    and item[0].decode() not in pods
                ):
                    aside.pop(item[0], None)  # the binding of a pod left out
                    continue
            if added and (n == 5 or (n == 7 and item[5] == b"nom")):
                if item[1] == b"obj" and item[3] == b"node":
                    nom = item[6] if n == 7 else None
                    pair = self._pod_ref(item[0], rv, item[4], item[2], nom, None, pods)
            elif bound and n == 5 and item[1] == b"node" and item[3] == b"bound":
                pair = self._pod_ref(item[0], rv, item[2], None, None, item[4], pods)
            if pair is not None:
                pairs.append(pair)
                continue
            if pairs:  # in order: this event may be about one of them
                delivered += self._deliver_pairs(pairs)
                pairs = []
            delivered += self._apply(event_fields(fields, rv, item), rv, True, pods)
        if pairs:
            delivered += self._deliver_pairs(pairs)
        return delivered

    def _deliver_pairs(self, pairs: PodPairs) -> int:
        """Hand pods made into refs (already in the indexer) to the lazy pod handlers:
        in one call to those that take many, one by one to the others."""
        for handler, _lazy in self._handlers["Pod"]:
            many = getattr(handler, "on_many", None)
            if many is not None:
                try:
                    many(pairs)
                except Exception:
                    log.exception("informer: event handler %r failed", handler)
                continue
            for previous, new in pairs:
                try:
                    if previous is None:
                        handler.on_add(new, False)
                    else:
                        handler.on_update(previous, new)
                except Exception:
                    log.exception("informer: event handler %r failed", handler)
        return len(pairs)

    def _pod_ref(
        self,
        raw_key: bytes,
        rv: int,
        raw_node: bytes,
        blob: bytes | None,
        raw_nom: bytes | None,
        bound_at: bytes | None,
        pods: dict[str, ObjectRef],
    ) -> tuple[ObjectRef | None, ObjectRef] | None:
        """A pending pod added (its blob) or its binding (its time) made into a ref and
        put in the indexer: (the previous ref, the new one); None when it cannot be made
        here (a binding of a pod without a copy, a blob missing)."""
        key = raw_key.decode()
        previous = pods.get(key)
        node = raw_node.decode()
        if bound_at is not None:
            if previous is None:
                return None
            new = bound_ref(previous, node, rv, bound_at.decode())
        elif blob is None:
            return None
        else:
            new = blob_ref(key, blob, None, None, node, "" if raw_nom is None else raw_nom.decode())
        pods[key] = new
        return previous, new

    def follow_server(self) -> int:
        """Relist if the client's connections reached another server since the last
        relist; returns the deliveries made (0: nothing to do)."""
        return self._relist() if self._server_changed() else 0

    def _server_changed(self) -> bool:
        if server_changes(self._client) == self._server_changes:
            return False
        log.info("informer: its connection reached another Redis server; relisting")
        return True

    def _check_idle(self) -> int:
        """Nothing to read: make sure that is because nothing happened."""
        pipe = self._client.pipeline(transaction=True)
        pipe.get(self._keys.resource_version)
        pipe.get(self._keys.store_epoch)
        raw_rv, raw_epoch = pipe.execute()
        rv, epoch = int(raw_rv or 0), raw_epoch.decode() if raw_epoch else ""
        if rv < self._rv or (epoch and self._epoch and epoch != self._epoch):
            log.info("informer: store was reset (rv %d < %d or new epoch); relisting", rv, self._rv)
            return self._relist()
        if rv > self._rv:
            nxt = self._client.xrange(self._keys.events, min=f"{self._rv + 1}-0", count=1)
            if not nxt:
                log.info("informer: events after rv %d were trimmed; relisting", self._rv)
                return self._relist()
        return 0

    # --- delivery ---------------------------------------------------------------------
    def _deliver(self, event: Event, previous: ObjectRef | None) -> None:
        with self._lock:
            index = self._indexer[event.kind]
            handlers = self._handlers[event.kind]
            if event.type == DELETED:
                index.pop(event.key, None)
                for h, lazy in handlers:
                    self._call(h.on_delete, lazy, event.new, False)
                return
            new = event.new
            if event.binding and previous is None:
                # No copy of the pod before its binding (the stream is contiguous, so this
                # is not expected): the store has it, or a later event says it is gone.
                wanted = (event.key, event.rv, event.node)
                ((old_obj, new_obj),) = self._store.binding_states([wanted])
                if new_obj is None:
                    log.info("informer: %s %s gone since its binding", event.kind, event.key)
                    return
                new = ObjectRef(event.key, new_obj)
                previous = None if old_obj is None else ObjectRef(event.key, old_obj)
            index[event.key] = new
            for h, lazy in handlers:
                if previous is None:
                    self._call(h.on_add, lazy, new, False)
                else:
                    self._call(h.on_update, lazy, previous, new)

    def relist(self) -> int:
        """List the store again now and reconcile the indexer with it (deletes, updates,
        adds to the handlers, as after a gap); returns the deliveries made."""
        return self._relist()

    def _relist(self) -> int:
        # Taken before the list: a change during it makes the next poll relist again.
        self._server_changes = server_changes(self._client)
        # One damaged record must not stop every relist: it is left out, with a warning.
        snap = self._store.snapshot(self._kinds, on_undecodable=_skip_undecodable)
        with self._lock:
            self._aside.clear()  # every pod of the list is held: those set aside get adds
            reset = snap.rv < self._rv or bool(self._epoch and snap.epoch != self._epoch)
            initial = not self._synced.is_set()
            delivered = 0
            for kind in self._kinds:
                index, fresh = self._indexer[kind], snap.objects[kind]
                for key, old in list(index.items()):
                    current = fresh.get(key)
                    if current is None or uid_of(current) != uid_of(self._value(old)):
                        del index[key]
                        delivered += 1
                        for h, lazy in self._handlers[kind]:
                            self._call(h.on_delete, lazy, old, True)
            for kind in self._kinds:
                index, fresh = self._indexer[kind], snap.objects[kind]
                for key, obj in fresh.items():
                    known = index.get(key)
                    if known is not None and self._value(known) == obj:
                        continue
                    new = index[key] = ObjectRef(key, obj)
                    delivered += 1
                    for h, lazy in self._handlers[kind]:
                        if known is None:
                            self._call(h.on_add, lazy, new, initial)
                        else:
                            self._call(h.on_update, lazy, known, new)
            self._rv, self._epoch = snap.rv, snap.epoch
            self._need_relist = False
            self.relists += 1
            self.resets += int(reset)
        self._report_position(now=True)
        self._synced.set()
        return delivered

    @staticmethod
    def _value(ref: ObjectRef) -> Obj:
        """The object of an indexer entry; {} if it cannot be decoded (a relist replaces
        it)."""
        try:
            return ref.get()
        except Exception:
            log.exception("informer: cannot decode %s", ref.key)
            return {}

    @staticmethod
    def _call(fn: Callable[..., None], lazy: bool, first: ObjectRef, second: Any) -> None:
        """Call a handler with (ref, flag) or (old ref, new ref): refs as they are for a
        lazy one, else decoded (a failure to decode counts as the handler's)."""
        try:
            if lazy:
                fn(first, second)
            elif isinstance(second, ObjectRef):
                fn(first.get(), second.get())
            else:
                fn(first.get(), second)
        except Exception:
            log.exception("informer: event handler %r failed", fn)


def _skip_undecodable(error: Undecodable) -> None:
    log.warning("informer: skipping %s", error)
