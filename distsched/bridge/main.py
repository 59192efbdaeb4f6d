"""`distsched kube-bridge`: mirror a real API server into the store, until SIGTERM/SIGINT.

One reflector per mirrored kind (:mod:`distsched.bridge.reflector`) lists and watches the
API server; one writer applies their changes to the store in batches
(:class:`~distsched.store.mirror.StoreMirror`), so the queue, the workers, the ledger and
the binder work exactly as in standalone mode. Several bridges may run: they elect one
leader through a lease in Redis (``T:lock:kube-bridge``) and only the leader mirrors; its
writes are fenced by the lease, so one that stalled past it and wakes up writes nothing.

The API server is the truth: when the store lost its data (a Redis restarted empty, a
FLUSHALL), the writer sees the store's epoch change, and when it may have lost its last
writes (the client reaches another server: a failover), the server change; either way
every reflector lists again.
Unchanged objects (a MODIFIED event that changed only what the store does not keep) are
not written again: the writer remembers a digest of what it last wrote per object.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

import msgspec
import redis

from distsched import metrics
from distsched.bridge.convert import MIRRORED, Obj
from distsched.bridge.reflector import Reflector
from distsched.cache.ledger import Ledger
from distsched.clock import SYSTEM_CLOCK
from distsched.connection import Backoff, RedisOptions, infrastructure_error, server_changes
from distsched.keys import Keys
from distsched.kube.client import KubeClient
from distsched.lease import Lease
from distsched.model import Pod
from distsched.redis_text import as_text
from distsched.role_start import start_role
from distsched.store import Store
from distsched.store.codec import node_name_of, object_key, parse_meta, uid_of
from distsched.store.mirror import Change, Fence, Fenced, MirrorStats, StoreMirror
from distsched.workers.eventhandlers import record_bound_pod

log = logging.getLogger(__name__)

LEASE_NAME = "kube-bridge"
BATCH = 1000
EPOCH_CHECK_S = 2.0

_pack = msgspec.msgpack.Encoder().encode


def digest(obj: Obj) -> bytes:
    return hashlib.blake2b(_pack(obj), digest_size=16).digest()


def _unbound_digest(pod: Obj) -> bytes:
    """The digest of a pod as it was before its binding: without spec.nodeName."""
    spec = {k: v for k, v in (pod.get("spec") or {}).items() if k != "nodeName"}
    return digest({**pod, "spec": spec})


@dataclass
class _Message:
    kind: str
    changes: list[Change] = field(default_factory=list)
    replace: list[Obj] | None = None


class MirrorWriter:
    """The one writer of the store: applies the reflectors' messages in order.

    Watch events come one at a time, as the API server's clients create and bind pods;
    each store write costs its round trips whatever its size, so after the first change
    the writer lets more gather for ``linger_s`` (a full list is written at once)."""

    def __init__(
        self,
        store: Store,
        fence: Fence | None,
        *,
        linger_s: float = 0.0,
        ledger: Ledger | None = None,
    ) -> None:
        self.store = store
        self.ledger = ledger
        self.linger_s = linger_s
        self.sleep: Callable[[float], None] = time.sleep
        self.mirror = StoreMirror(store, fence=fence)
        self.inbox: queue.Queue[_Message] = queue.Queue()
        self._digests: dict[tuple[str, str], bytes] = {}
        # Pending pods: the digest of what was written, for telling a binding's echo.
        self._unbound: dict[tuple[str, str], bytes] = {}
        self.epoch = ""
        # Kinds whose (re)list is not written yet: the pods' messages wait for them.
        self._lists_awaited: set[str] = set()
        self._held: list[_Message] = []
        self._held_since = 0.0
        self._held_warned = False
        # server_changes(client) seen (distsched.connection): another server may lack the
        # last writes, which the digests would keep from being written again.
        self._server_changes = server_changes(store.client)

    # --- the reflectors' sink -----------------------------------------------------------
    def replace(self, kind: str, objs: list[Obj]) -> None:
        self.inbox.put(_Message(kind, replace=objs))

    def changes(self, kind: str, changes: list[Change]) -> None:
        self.inbox.put(_Message(kind, changes=changes))

    def pods_wait_for_lists(self, kinds: Collection[str]) -> None:
        """Write no pod until the next list of each of ``kinds`` is written (a start, a
        relist): the store queues a pending pod as it writes it and a worker may decide it
        at once, on a view that must hold the nodes and the objects the pod uses, as
        kube-scheduler schedules only once its informers' caches have synced. The pods'
        messages are kept in order meanwhile."""
        self._lists_awaited = set(kinds) - {"Pod"}

    @property
    def holding_pods(self) -> bool:
        return bool(self._held)

    # --- writing -------------------------------------------------------------------------
    def drain(self, timeout_s: float) -> int:
        """Apply what is queued (waiting up to ``timeout_s`` for the first message);
        returns the number of objects written. Raises Fenced when the lease is lost."""
        self._warn_if_held_long()
        try:
            first = self.inbox.get(timeout=timeout_s)
        except queue.Empty:
            return 0
        if self.linger_s > 0 and first.replace is None:
            self.sleep(self.linger_s)
        batch: list[Change] = []
        written = 0
        released: deque[_Message] = deque()
        message: _Message | None = first
        while message is not None:
            if message.kind == "Pod" and self._lists_awaited:
                self._hold(message)
            elif message.replace is not None:
                self._lists_awaited.discard(message.kind)
                if not self._lists_awaited and self._held:
                    released, self._held = deque(self._held), []
                    log.info("bridge: the lists the pods waited for are written; writing them")
                written += self._apply(batch)
                batch = []
                written += self._replace(message.kind, message.replace)
            else:
                batch += message.changes
                if len(batch) >= BATCH:
                    written += self._apply(batch)
                    batch = []
            if released:
                message = released.popleft()
                continue
            try:
                message = self.inbox.get_nowait()
            except queue.Empty:
                message = None
        return written + self._apply(batch)

    def _hold(self, message: _Message) -> None:
        if not self._held:
            self._held_since = time.monotonic()
            self._held_warned = False
            awaited = ", ".join(sorted(self._lists_awaited))
            log.info("bridge: the pods wait for the lists of %s", awaited)
        self._held.append(message)

    def _warn_if_held_long(self) -> None:
        if self._held and not self._held_warned and time.monotonic() - self._held_since > 30:
            self._held_warned = True
            log.warning(
                "bridge: no pod written for 30s: still no list of %s from the API server "
                "(can this client list them?)",
                ", ".join(sorted(self._lists_awaited)),
            )

    def _apply(self, changes: list[Change]) -> int:
        todo = []
        echoes: list[tuple[Change, bytes]] = []
        for change in changes:
            where = (change.kind, change.key)
            if change.obj is None:
                self._digests.pop(where, None)
                self._unbound.pop(where, None)
                todo.append(change)
                continue
            d = digest(change.obj)
            if self._digests.get(where) == d:
                continue
            node = node_name_of(change.obj)
            if (
                change.kind == "Pod"
                and node
                and self._unbound.get(where) == _unbound_digest(change.obj)
            ):
                echoes.append((change, d))  # only the binding changed: the binder's?
                continue
            self._remember(change, d)
            todo.append(change)
        if echoes:
            # A binding our binder made is in the store already (it writes it right after
            # the API server accepted it): its echo from the watch changes nothing.
            keys = [change.key for change, _ in echoes]
            metas = self.store.client.hmget(self.store.keys.store_meta("Pod"), keys)
            for (change, d), meta in zip(echoes, metas, strict=True):
                self._remember(change, d)
                if meta is None or parse_meta(meta).node != node_name_of(change.obj or {}):
                    todo.append(change)
        if not todo:
            return 0
        written = self._write(todo)
        for change in todo:
            op = "delete" if change.obj is None else "upsert"
            metrics.bridge_mirrored.labels(change.kind, op).inc()
        return written

    def _write(self, changes: list[Change]) -> int:
        """Write ``changes``. Pods bound by someone else (another scheduler, created bound)
        whose room the ledger does not hold yet are written first and recorded in the
        ledger before any pending pod of the batch is written: the store queues a pending
        pod as it writes it, and a worker still behind on the store's events would
        otherwise reserve that room for it (kube-scheduler's cache holds every bound pod
        it has seen before it schedules the next one)."""
        latest = {(c.kind, c.key): c for c in changes}  # as the mirror: the last one wins
        foreign = self._not_in_ledger(
            [c for c in latest.values() if c.kind == "Pod" and c.obj and node_name_of(c.obj)]
        )
        if not foreign:
            stats = self.mirror.apply(changes)
            return stats.created + stats.updated + stats.deleted
        stats = self.mirror.apply(foreign)
        self._hold_room(foreign)
        first = {id(c) for c in foreign}
        rest = [c for c in latest.values() if id(c) not in first]
        more = self.mirror.apply(rest) if rest else MirrorStats()
        return sum(x.created + x.updated + x.deleted for x in (stats, more))

    def _not_in_ledger(self, bound: list[Change]) -> list[Change]:
        """The bound pods the ledger holds on no node or on another one (ours are
        reserved where they are bound)."""
        if self.ledger is None or not bound:
            return []
        nodes = self.ledger.pod_nodes([c.key for c in bound])
        return [c for c in bound if nodes.get(c.key) != node_name_of(c.obj or {})]

    def _hold_room(self, bound: list[Change]) -> None:
        """Record bound pods in the ledger (what the workers' handler of their bind event
        does, done before the workers read it)."""
        assert self.ledger is not None
        for change in bound:
            try:
                record_bound_pod(self.ledger, Pod.from_dict(change.obj or {}))
            except ValueError as exc:  # the workers' handler reports it too
                log.warning("bridge: bound pod %s left out of the ledger: %s", change.key, exc)

    def _replace(self, kind: str, objs: list[Obj]) -> int:
        """A full list of ``kind``: what the store has and the list has not is deleted;
        the rest is written where it differs from what was last written (or stored)."""
        meta_key = self.store.keys.store_meta(kind)
        stored = {
            as_text(k): parse_meta(v).uid for k, v in self.store.client.hgetall(meta_key).items()
        }
        listed = {object_key(obj)[1]: obj for obj in objs}
        if not any(k == kind for k, _ in self._digests):
            self._seed_digests(kind)
        changes = [
            Change.delete(kind, key, uid) for key, uid in stored.items() if key not in listed
        ]
        upserts = [
            Change.upsert(obj)
            for key, obj in listed.items()
            if stored.get(key) != uid_of(obj) or self._digests.get((kind, key)) != digest(obj)
        ]
        # Pods bound by anyone before the pending ones: the store queues a pending pod as
        # it writes it, and a worker may decide it at once; the room other schedulers'
        # pods take must be in the ledger by then (kube-scheduler syncs its cache first).
        if kind == "Pod":
            upserts.sort(key=lambda change: not node_name_of(change.obj or {}))
        changes += upserts
        for key in [k for k in stored if k not in listed]:
            self._digests.pop((kind, key), None)
        log.info(
            "bridge: %s listed: %d objects, %d to write (%d deletions)",
            kind,
            len(objs),
            len(changes),
            sum(1 for c in changes if c.obj is None),
        )
        return self._apply_all(changes)

    def _remember(self, change: Change, d: bytes) -> None:
        where = (change.kind, change.key)
        self._digests[where] = d
        if change.kind == "Pod" and change.obj is not None and not node_name_of(change.obj):
            self._unbound[where] = _unbound_digest(change.obj)
        else:
            self._unbound.pop(where, None)

    def _apply_all(self, changes: list[Change]) -> int:
        written = 0
        for i in range(0, len(changes), BATCH):
            chunk = changes[i : i + BATCH]
            for change in chunk:
                if change.obj is not None:
                    self._remember(change, digest(change.obj))
            written += self._write(chunk)
        return written

    def _seed_digests(self, kind: str) -> None:
        """After a (re)start, what the store already holds as the bridge wrote it: objects
        still equal to the API server's are not written again."""
        listing = self.store.snapshot([kind])
        for key, obj in listing.objects[kind].items():
            meta = {k: v for k, v in obj.get("metadata", {}).items() if k != "resourceVersion"}
            self._digests[(kind, key)] = digest({**obj, "metadata": meta})

    def store_was_reset(self) -> bool:
        """Whether the store lost its data since the last call (a new epoch), or may have
        lost its last writes: the client's connections reach another server now (a
        failover keeps the epoch, and what had not replicated is gone)."""
        changes = server_changes(self.store.client)
        epoch = self.store.client.get(self.store.keys.store_epoch)
        current = as_text(epoch) if epoch is not None else ""
        # A new epoch, or none at all although objects were written (their first write
        # set one; the writer may not have read it yet).
        reset = (
            (bool(self.epoch) and current != self.epoch)
            or (not current and bool(self._digests))
            or changes != self._server_changes
        )
        self.epoch = current
        self._server_changes = changes
        if reset:
            self._digests.clear()
            self._unbound.clear()
        return reset


class Bridge:
    """The leader's work: reflectors and the writer, until the lease is lost or stop."""

    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        kube: KubeClient,
        *,
        profiles: Collection[str],
        fence: Fence | None,
        watch_timeout_s: int = 300,
        write_linger_s: float = 0.0,
    ) -> None:
        self.store = Store(client, keys)
        self.writer = MirrorWriter(
            self.store, fence, linger_s=write_linger_s, ledger=Ledger(client, keys, SYSTEM_CLOCK)
        )
        self.stop = threading.Event()
        self._next_epoch_check = 0.0
        self.reflectors = [
            Reflector(
                kube,
                mirrored,
                self.writer,
                profiles=profiles,
                stop=self.stop,
                watch_timeout_s=watch_timeout_s,
            )
            for mirrored in MIRRORED
        ]

    def start(self) -> Bridge:
        self.writer.store_was_reset()
        self._next_epoch_check = time.monotonic() + EPOCH_CHECK_S
        self.writer.pods_wait_for_lists([r.kind for r in self.reflectors])
        for reflector in self.reflectors:
            reflector.start()
        return self

    def synced(self) -> bool:
        return (
            all(r.synced.is_set() for r in self.reflectors)
            and self.writer.inbox.empty()
            and not self.writer.holding_pods
        )

    def turn(self, timeout_s: float = 0.2) -> int:
        """Write what the reflectors sent; relist everything after a store reset, looked
        for every EPOCH_CHECK_S rather than with a GET per turn (a leader's write into a
        reset store is refused by its fence anyway: the lease went with the data)."""
        now = time.monotonic()
        if now >= self._next_epoch_check:
            self._next_epoch_check = now + EPOCH_CHECK_S
            if self.writer.store_was_reset():
                log.warning(
                    "bridge: the store lost its data, or some of it (another Redis server "
                    "now); listing everything again"
                )
                self.writer.pods_wait_for_lists([r.kind for r in self.reflectors])
                for reflector in self.reflectors:
                    reflector.relist()
        return self.writer.drain(timeout_s)

    def close(self) -> None:
        self.stop.set()
        for reflector in self.reflectors:
            reflector.close()


def profile_names(config_path: str | None) -> list[str]:
    from distsched.framework.profile import load_config

    return [p.scheduler_name for p in load_config(config_path).profiles]


def run_bridge(
    options: RedisOptions,
    keys: Keys,
    kube: KubeClient,
    *,
    profiles: Collection[str],
    lease_ms: int = 15_000,
    stop: threading.Event | None = None,
    write_linger_s: float = 0.0,
) -> None:
    stop, client = start_role(options, stop)
    lease = Lease(client, keys, LEASE_NAME, lease_ms=lease_ms)
    renew_every = lease_ms / 3000
    bridge: Bridge | None = None
    backoff = Backoff()
    outage = False
    log.info(
        "kube-bridge %s for %s, profiles %s",
        lease.identity,
        kube.config.server,
        ", ".join(profiles),
    )
    next_renew = 0.0
    while not stop.is_set():
        try:
            now = time.monotonic()
            if now >= next_renew:
                held = lease.hold()
                next_renew = now + renew_every
                if outage:
                    log.warning("kube-bridge: Redis is back")
                    outage = False
                if not held:
                    if bridge is not None:
                        log.warning("kube-bridge %s lost the lease", lease.identity)
                        bridge.close()
                        bridge = None
                    stop.wait(renew_every)
                    continue
                if bridge is None:
                    log.info("kube-bridge %s is the leader", lease.identity)
                    bridge = Bridge(
                        client,
                        keys,
                        kube,
                        profiles=profiles,
                        fence=Fence(lease.key, lease.identity),
                        write_linger_s=write_linger_s,
                    ).start()
            assert bridge is not None
            bridge.turn(timeout_s=min(0.2, max(0.01, next_renew - time.monotonic())))
            backoff.reset()
        except Fenced as exc:
            log.warning("kube-bridge %s: %s; not the leader any more", lease.identity, exc)
            if bridge is not None:
                bridge.close()
            bridge = None
            next_renew = 0.0
        except Exception as exc:
            delay = backoff.next_delay()
            if infrastructure_error(exc):
                outage = True
                metrics.redis_retries.labels("kube-bridge").inc()
                log.warning("kube-bridge: Redis unavailable (%s); retrying in %.1fs", exc, delay)
            else:
                log.exception("kube-bridge: unexpected error; starting again in %.1fs", delay)
            if bridge is not None:
                bridge.close()  # a new leadership turn lists everything again
            bridge = None
            next_renew = 0.0
            stop.wait(delay)
    if bridge is not None:
        bridge.close()
    with contextlib.suppress(redis.RedisError):
        lease.release()
    log.info("kube-bridge %s stopped", lease.identity)
