"""Cluster events → scheduling-queue moves and ledger updates, once per event.

This is the queue half of kube-scheduler's ``addAllEventHandlers``. Every worker reads
the store's event stream through one Redis consumer group, so each event is handled by
one worker; it is acknowledged after its moves, so a worker that dies mid-batch leaves
its events pending and another worker claims them (XAUTOCLAIM). Every move is
idempotent (adding a known pod, moving a pod that already moved, releasing a released
reservation), which makes redelivery harmless.

Which parked pods an event moves: with QueueingHints (the default) each rejecting
plugin's hint decides, and plugins without one keep the seed's rule (preCheckForNode for
node events, the affinity-term match for assigned-pod adds, interest for deletes);
without hints, the seed's rules only. Every event is a move request, moving anyone or
not (kube's moveRequestCycle). See docs/differences.md for what still differs.

The cache half (each worker's local snapshot) is fed by each worker's own informer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

import redis

from distsched.cache.ledger import Ledger
from distsched.clock import Clock
from distsched.framework import events
from distsched.framework.events import ActionType, ClusterEvent
from distsched.framework.listers import NamespaceLabels
from distsched.framework.podinfo import PodInfo
from distsched.model import HostPort, Node, Pod
from distsched.model.labels import (
    AffinityTerm,
    InvalidSelector,
    compile_terms,
)
from distsched.model.objects import DEFAULT_SCHEDULER_NAME
from distsched.model.podgroups import PodGroup, group_of_object
from distsched.model.volumes import DECODERS as VOLUME_DECODERS
from distsched.queue_types import PodEntry, SchedulingQueue
from distsched.store import (
    ADDED,
    DELETED,
    Event,
    ObjectRef,
    Store,
    Unresolved,
    decode_event,
)
from distsched.store.codec import object_key, uid_of
from distsched.workers import prechecks

log = logging.getLogger(__name__)

GROUP = "queue-handlers"


@dataclass
class NodeOccupancy:
    """What already runs on a node, for pre-checks: requested resources, pods, ports."""

    requested: dict[str, int]
    pod_count: int
    ports: list[HostPort]


class Scheduler(Protocol):
    """What the handlers need from the scheduler (kube's addAllEventHandlers is given the
    Scheduler): its profiles' event interest, QueueingHints and PreEnqueue, and its view
    of the cluster (pods, node usage). The worker implements it."""

    def profile_names(self) -> Collection[str]:
        """The profiles (``spec.schedulerName``) whose pods the handlers queue."""
        ...

    def uses_queueing_hints(self) -> bool:
        """Whether the rejecting plugins' hints decide which events move a parked pod
        (kube's SchedulerQueueingHints); False: the seed's rules only."""
        ...

    def interested(self, event: ClusterEvent) -> frozenset[str] | None:
        """The plugins (of any profile) that registered for ``event``."""
        ...

    def queueing_hint(
        self, pod: Pod, plugin: str, event: ClusterEvent, old: Any, new: Any
    ) -> bool | None:
        """The QueueingHint of ``plugin`` in the pod's profile for (old, new) objects:
        True Queue, False QueueSkip, None no hint (the seed's rule decides)."""
        ...

    def pre_enqueue_rejects(self, obj: dict[str, Any]) -> bool:
        """Whether the PreEnqueue plugins of the pod's profile keep it gated (kube's
        runPreEnqueuePlugins)."""
        ...

    def pod(self, key: str) -> Pod | None:
        """The pod as the scheduler's view has it (None if gone)."""
        ...

    def parse(self, obj: dict[str, Any]) -> Pod:
        """A pod object parsed (the view's parser, which may reuse parsed pods)."""
        ...

    def node_usage(self, name: str) -> NodeOccupancy:
        """What already runs on the node, for the seed's pre-check."""
        ...


def pod_entry(key: str, obj: dict[str, Any], *, gated: bool) -> PodEntry:
    """The queue's view of a pod, straight from its dict (priority None counts as 0);
    ``gated``: the pod's PreEnqueue plugins keep it out of activeQ for now."""
    spec = obj.get("spec") or {}
    return PodEntry(
        key=key,
        uid=str((obj.get("metadata") or {}).get("uid", "")),
        priority=int(spec.get("priority") or 0),
        gated=gated,
        group=group_of_object(obj),
    )


def required_affinity_terms(pod: Pod) -> tuple[AffinityTerm, ...]:
    """The pod's required pod-affinity terms, compiled like the plugin compiles them (kube's
    getUnschedulablePodsWithMatchingAffinityTerm looks at these only); an invalid
    selector matches nothing."""
    affinity = pod.spec.affinity
    if affinity is None or affinity.pod_affinity is None or not affinity.pod_affinity.required:
        return ()
    try:
        return compile_terms(affinity.pod_affinity.required, pod.metadata.namespace)
    except InvalidSelector:
        return ()


def _objects(batch: Iterable[Event]) -> list[dict[str, Any]]:
    """The objects of events, skipping bindings whose pod is gone (a later event, or one
    another worker already handled, says so)."""
    out = []
    for event in batch:
        try:
            out.append(event.obj)
        except Unresolved:
            log.info("%s %s: gone since its binding at rv %d", event.kind, event.key, event.rv)
    return out


def _typed(kind: str, obj: dict[str, Any] | None) -> Any:
    """A storage object typed for the volume plugins' hints (None: absent or bad)."""
    if obj is None:
        return None
    try:
        return VOLUME_DECODERS[kind](obj)
    except ValueError:
        return None


def _labels(obj: dict[str, Any]) -> dict[str, Any]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def record_bound_pod(ledger: Ledger, pod: Pod) -> str:
    """Hold a bound pod in the ledger (idempotent: "added", "confirmed" or "present")."""
    info = PodInfo.of(pod)
    return ledger.add_bound_pod(
        pod.key,
        pod.metadata.uid,
        pod.spec.node_name,
        info.requests,
        list(info.host_ports),
        anti_affinity_keys=sorted({t.topology_key for t in info.required_anti_affinity_terms}),
        nonzero=(info.nonzero_cpu, info.nonzero_memory),
    )


IGNORED_METADATA = frozenset({"resourceVersion", "generation", "managedFields", "finalizers"})
"""Metadata kube's isPodUpdated strips before comparing (with the whole status)."""


def pod_spec_changed(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """kube's isPodUpdated: anything but status, resourceVersion, generation, managedFields
    and finalizers."""

    def strip(obj: dict[str, Any]) -> dict[str, Any]:
        meta = {k: v for k, v in obj.get("metadata", {}).items() if k not in IGNORED_METADATA}
        return {"metadata": meta, "spec": obj.get("spec", {})}

    return strip(old) != strip(new)


class QueueEventHandlers:
    """Applies one batch of store events to the queue (and the shared ledger)."""

    def __init__(
        self,
        *,
        queue: SchedulingQueue,
        ledger: Ledger,
        clock: Clock,
        namespaces: NamespaceLabels,
        scheduler: Scheduler,
    ) -> None:
        self.queue = queue
        self.ledger = ledger
        self.clock = clock
        # kube's queue nsLister: namespaceSelector terms of the seed's AssignedPodAdd rule.
        self.namespaces = namespaces
        self.scheduler = scheduler
        self.profiles = frozenset(scheduler.profile_names())
        # QueueingHints (kube 1.28+, GA in 1.34); False: the seed's rules only.
        self.hints = scheduler.uses_queueing_hints()

    # -- entry point --------------------------------------------------------------------
    def handle(self, batch: Sequence[Event]) -> None:
        """Apply a batch of events in order, with one queue call per kind of move.

        Pending adds are flushed before any delete or update so that the order of events
        on one pod is kept (a pod deleted and created again within one batch stays queued).
        Pods are read from their dicts where a few fields suffice; typed parsing (which
        validates, ~40 us a pod) is left to the worker that schedules the pod. Objects
        are decoded only when needed: a binding (which carries none) needs its pod only
        if the ledger does not hold it there yet or a parked pod's hint asks. An event
        that cannot be handled is logged and skipped, so one bad object cannot block the
        stream for everyone.
        """
        now = self.clock.now_ms()
        adds: list[PodEntry] = []
        newly_bound: list[Event] = []
        relabelled: list[tuple[dict[str, Any], dict[str, Any]]] = []
        deleted: list[Event] = []
        removals: list[Event] = []  # pod deletions in a row, released together
        for event in batch:
            try:
                if event.kind == "Node":
                    self._flush_removals(removals, deleted, now)
                    self._flush_adds(adds, now)
                    self._node_event(event)
                    continue
                if event.kind == "PodGroup":
                    self._flush_removals(removals, deleted, now)
                    self._flush_adds(adds, now)
                    self._pod_group_event(event)
                    continue
                if event.kind in events.STORAGE_RESOURCES:
                    self._flush_removals(removals, deleted, now)
                    self._flush_adds(adds, now)
                    self._storage_event(event, now)
                    continue
                if event.kind != "Pod":
                    continue
                if event.type == DELETED:
                    self._flush_adds(adds, now)
                    # A pod bound and then deleted within this batch must not be recorded
                    # as bound after its release (the ledger would keep it forever).
                    newly_bound = [e for e in newly_bound if e.key != event.key]
                    removals.append(event)
                    continue
                self._flush_removals(removals, deleted, now)
                if event.node:
                    if event.binding:
                        newly_bound.append(event)
                        continue
                    old = event.old
                    if old is None or not (old.get("spec") or {}).get("nodeName"):
                        newly_bound.append(event)
                    elif _labels(old) != _labels(event.obj):
                        relabelled.append((old, event.obj))
                    continue
                obj = event.obj
                if not self.responsible_for(obj):
                    continue
                old = None if event.type == ADDED else event.old
                if old is not None and not pod_spec_changed(old, obj):
                    continue  # a status update (the failure handler's condition): no move
                entry = pod_entry(event.key, obj, gated=self.scheduler.pre_enqueue_rejects(obj))
                if old is None:
                    adds.append(entry)
                else:
                    self._flush_adds(adds, now)
                    self.queue.update(entry, now_ms=now)
            except (redis.ConnectionError, redis.TimeoutError):
                raise
            except Exception:
                log.exception(
                    "skipping %s %s %s: cannot handle it", event.type, event.kind, event.key
                )
        self._flush_removals(removals, deleted, now)
        self._flush_adds(adds, now)
        if newly_bound:
            self._record_bound(newly_bound)
            self._assigned_pods_added(lambda: _objects(newly_bound))
        if relabelled:
            self._assigned_pods_added(
                lambda: [new for _, new in relabelled],
                events.ASSIGNED_POD_LABEL_CHANGE,
                relabelled,
            )
        if deleted:
            self._assigned_pods_deleted(deleted, now)

    def _flush_removals(self, removals: list[Event], deleted: list[Event], now: int) -> None:
        """Release the pods deleted in a row: from the ledger whether assumed (reserved,
        not bound) or bound, and from the queue. An assumed pod's room is free again, so
        its deletion is an AssignedPodDelete as well (kube: RejectWaitingPod, or the
        binding's failure, moves the waiting pods; a binder waiting on Permit for it
        sees the reservation gone and stops). Only the deleted pods' own records: the
        store's create script may have queued (even reserved) a pod re-created under the
        name since."""
        if not removals:
            return
        batch = list(removals)
        removals.clear()
        try:
            self._remove(batch, deleted, now)
        except (redis.ConnectionError, redis.TimeoutError):
            raise
        except Exception:  # one bad record: each alone, so that only it is skipped
            for event in batch:
                try:
                    self._remove([event], deleted, now)
                except (redis.ConnectionError, redis.TimeoutError):
                    raise
                except Exception:
                    log.exception("skipping %s Pod %s: cannot handle it", event.type, event.key)

    def _remove(self, batch: list[Event], deleted: list[Event], now: int) -> None:
        uids = [uid_of(event.obj) for event in batch]
        keys = [event.key for event in batch]
        released = self.ledger.pods_deleted(list(zip(keys, uids, strict=True)))
        self.queue.delete(keys, now_ms=now, uids=uids)
        deleted += [e for e, gone in zip(batch, released, strict=True) if e.node or gone]

    def _pod_group_event(self, event: Event) -> None:
        """A PodGroup's minimum is the queue's (it holds the group's members until that
        many exist); a PodGroup that does not decode counts as absent."""
        minimum: int | None = None
        if event.type != DELETED:
            try:
                minimum = PodGroup.from_dict(event.obj).min_member
            except ValueError as exc:
                log.warning("PodGroup %s is unusable: %s", event.key, exc)
        self.queue.set_gang_minimums({event.key: minimum})

    def _storage_event(self, event: Event, now: int) -> None:
        """A storage object (events.STORAGE_RESOURCES) added or changed: the pods the
        volume plugins rejected move as kube's handlers move them (deletes help no one:
        no plugin registers them). Hints get the typed objects (None when one does not
        decode)."""
        if event.type == DELETED:
            return
        old = None if event.type == ADDED else event.old
        action = ActionType.ADD if old is None else ActionType.UPDATE
        change = events.storage_event(event.kind, action)
        if self.hints:

            def pairs() -> list[tuple[Any, Any]]:
                return [(_typed(event.kind, old), _typed(event.kind, event.obj))]

            keys = self._hinted([change], pairs, lambda _pod: True)
            self._move(change, now, keys, decided=True)
            return
        self._move(change, now, None)

    def responsible_for(self, obj: dict[str, Any]) -> bool:
        """Whether the pod is for one of our profiles (``spec.schedulerName``)."""
        spec = obj.get("spec") or {}
        return (spec.get("schedulerName") or DEFAULT_SCHEDULER_NAME) in self.profiles

    def _flush_adds(self, adds: list[PodEntry], now: int) -> None:
        if adds:
            self.queue.add(adds, now_ms=now)
            adds.clear()

    def _record_bound(self, bound: list[Event]) -> None:
        """Newly bound pods the ledger does not hold on that node yet (bound by someone
        else, or created bound) are added as bound. Pods our binders bound are already
        there: the binder's bind script confirms them in the same call, so their objects
        are never needed here."""
        nodes = self.ledger.pod_nodes([e.key for e in bound])
        recorded = []
        for obj in _objects([e for e in bound if nodes.get(e.key) != e.node]):
            try:
                pod = self.scheduler.parse(obj)
                record_bound_pod(self.ledger, pod)
            except ValueError:  # one bad pod must not stop the stream for all the others
                log.exception("bound pod %s left out of the ledger", object_key(obj)[1])
                continue
            recorded.append(pod.key)
        if recorded:
            self.queue.forget(recorded)

    def _assigned_pods_added(
        self,
        objs: Callable[[], list[dict[str, Any]]],
        event: ClusterEvent = events.ASSIGNED_POD_ADD,
        updates: list[tuple[dict[str, Any], dict[str, Any]]] | None = None,
    ) -> None:
        """AssignedPodAdd (and AssignedPodUpdate, kube's AssignedPodUpdated). The seed's
        rule moves the unschedulable pods whose required affinity terms match one of the
        pods; with QueueingHints each rejecting plugin's hint decides, the seed's rule
        standing in for plugins without one. The move request is recorded even when no
        pod qualifies (kube's movePodsToActiveOrBackoffQueue sets moveRequestCycle
        unconditionally): a pod in flight meanwhile goes to backoffQ. ``objs`` gives the
        new pods' objects, asked for only when some parked pod needs them."""
        now = self.clock.now_ms()
        parsed: list[Pod] | None = None

        def new_pods() -> list[Pod]:
            nonlocal parsed
            if parsed is None:
                parsed = [self.scheduler.parse(obj) for obj in objs()]
            return parsed

        def seed_rule(pod: Pod) -> bool:
            terms = required_affinity_terms(pod)
            return bool(terms) and any(
                term.matches(p.metadata.namespace, p.metadata.labels, self.namespaces.of)
                for term in terms
                for p in new_pods()
            )

        if not self.hints:
            matching = [
                key
                for key in self.queue.unschedulable_keys()
                if (pod := self.scheduler.pod(key)) is not None and seed_rule(pod)
            ]
            self._move(event, now, matching)
            return

        def pairs() -> list[tuple[Any, Any]]:
            if updates:
                return [
                    (self.scheduler.parse(old), self.scheduler.parse(new)) for old, new in updates
                ]
            return [(None, p) for p in new_pods()]

        self._move(event, now, self._hinted([event], pairs, seed_rule), decided=True)

    def _assigned_pods_deleted(self, deleted: list[Event], now: int) -> None:
        """AssignedPodDelete (also for a reserved pod deleted before its binding). The
        seed moves every pod some interested plugin rejected; with QueueingHints the
        rejecting plugins' hints decide, the seed's rule standing in where there is none."""
        event = events.ASSIGNED_POD_DELETE
        if not self.hints:
            self._move(event, now, None)
            return

        def pairs() -> list[tuple[Any, Any]]:
            return [(self.scheduler.parse(obj), None) for obj in _objects(deleted)]

        self._move(event, now, self._hinted([event], pairs, lambda _pod: True), decided=True)

    def _hinted(
        self,
        changes: Sequence[ClusterEvent],
        pairs_of: Callable[[], Sequence[tuple[Any, Any]]],
        seed_rule: Callable[[Pod], bool],
    ) -> list[str]:
        """kube's movePodsToActiveOrBackoffQueue with QueueingHints: the unschedulable
        pods that one of their rejecting plugins, interested in one of ``changes``, says
        to queue for one of the (old, new) object pairs ``pairs_of()`` gives (asked once,
        and only if some parked pod has a hint to ask). A plugin without a hint falls
        back to the seed: ``seed_rule(pod)``. A pod with no recorded plugin takes the
        seed's rule too (the seed moves such pods on every event it pre-checks)."""
        interested = [(change, self.scheduler.interested(change)) for change in changes]
        got: list[Sequence[tuple[Any, Any]]] = []

        def pairs() -> Sequence[tuple[Any, Any]]:
            if not got:
                got.append(pairs_of())
            return got[0]

        keys: list[str] = []
        for key, plugins in self.queue.unschedulable_pods():
            pod = self.scheduler.pod(key)
            if pod is None:
                keys.append(key)  # gone from the store: let the queue sort it out
                continue
            if not plugins:
                if seed_rule(pod):
                    keys.append(key)
                continue
            fallback = False
            queue = False
            for change, names in interested:
                for plugin in sorted(plugins):
                    if names is not None and plugin not in names:
                        continue
                    # The first pair the hint says Queue for decides: a preemptor's
                    # victims come as one batch of deletions, and each parked pod
                    # needs one Queue, not a verdict per victim.
                    for old, new in pairs():
                        verdict = self.scheduler.queueing_hint(pod, plugin, change, old, new)
                        if verdict is True:
                            queue = True
                            break
                        if verdict is None:
                            fallback = True
                    if queue:
                        break
                if queue:
                    break
            if queue or (fallback and seed_rule(pod)):
                keys.append(key)
        return keys

    def _move(
        self, event: ClusterEvent, now: int, keys: list[str] | None, *, decided: bool = False
    ) -> None:
        """One move request; ``decided``: ``keys`` are already the pods to move (hints),
        else the queue keeps those a plugin interested in ``event`` rejected."""
        interested = None if decided else self.scheduler.interested(event)
        self.queue.move_all_to_active_or_backoff(
            event.label, now_ms=now, interested_plugins=interested, keys=keys
        )

    # -- nodes --------------------------------------------------------------------------
    def _node_event(self, event: Event) -> None:
        now = self.clock.now_ms()
        node = Node.from_dict(event.obj)
        if event.type == DELETED:
            self.ledger.remove_node(node.metadata.name)
            return
        self.ledger.set_node_from(node)
        if event.type == ADDED or event.old is None:
            self._move_for_node(events.NODE_ADD, node, now)
            return
        old = Node.from_dict(event.old)
        changes = prechecks.node_change_events(old, node)
        if changes:
            self._move_for_node(changes[0], node, now, old, changes)

    def _move_for_node(
        self,
        event: ClusterEvent,
        node: Node,
        now: int,
        old: Node | None = None,
        changes: Sequence[ClusterEvent] = (),
    ) -> None:
        """One move for a node add/update. The seed (kube's nodeSchedulingPropertiesChange
        and preCheckForNode): the first change only, pods that pass the pre-check. With
        QueueingHints: every change counts for interest, the rejecting plugins' hints
        decide, the pre-check stands in for plugins without a hint."""
        usage = self.scheduler.node_usage(node.metadata.name)

        def pre_check(pod: Pod) -> bool:
            return prechecks.node_admits(
                pod,
                node,
                requested=usage.requested,
                pod_count=usage.pod_count,
                used_ports=usage.ports,
            )

        if self.hints:
            keys = self._hinted(changes or [event], lambda: [(old, node)], pre_check)
            self._move(event, now, keys, decided=True)
            return
        keys = []
        for key in self.queue.unschedulable_keys():
            pod = self.scheduler.pod(key)
            if pod is None or pre_check(pod):
                keys.append(key)
        # Recorded even when nobody qualifies: kube's MoveAllToActiveOrBackoffQueue always
        # sets moveRequestCycle, so a pod in flight during the event goes to backoffQ.
        self._move(event, now, keys)


class EventConsumer:
    """Reads the store's event stream through the consumer group; ack after handling.

    Events are decoded lazily (:class:`~distsched.store.Event`). A binding carries no
    object: it is rebuilt from an earlier entry of the same batch if there is one, else,
    if a handler asks for it, from ``store`` in one read for the whole batch."""

    def __init__(
        self,
        client: redis.Redis,
        stream: str,
        consumer: str,
        handlers: QueueEventHandlers,
        *,
        store: Store | None = None,
        batch: int = 500,
        claim_idle_ms: int = 30_000,
    ) -> None:
        self.client = client
        self.stream = stream
        # The highest store rv among the events handled of other kinds than Pod, and of
        # pod deletions (entry ids are "<rv>-0"): the worker's informer must have read
        # that far before the worker decides a pod, or an event already used for queue
        # moves (a claim or a node created, the room a deleted pod left, which the
        # handlers release in the ledger) would be missing from what the pod is decided
        # on, with what came before it in the stream (a preemptor's nomination to that
        # room), and nothing would move the pod again. (A pod the informer lacks is
        # read from the store.)
        self.handled_rv = 0
        self.consumer = consumer
        self.handlers = handlers
        self.store = store
        self.batch = batch
        self.claim_idle_ms = claim_idle_ms
        self._reread = False
        # Times the group was found gone and made again (Redis lost its data): the worker
        # compares it to notice and set itself up again.
        self.resets = 0
        self.ensure_group()

    def ensure_group(self, *, from_start: bool = False) -> None:
        """Create the consumer group (reading from new entries on, or from the stream's
        first entry with ``from_start``) and this consumer, if missing."""
        try:
            self.client.xgroup_create(
                self.stream, GROUP, id="0" if from_start else "$", mkstream=True
            )
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        # Redis 7.0 adds an XREADGROUP consumer only once it reads an entry (7.2 adds it at
        # once); create it explicitly so XINFO CONSUMERS lists an idle worker on both.
        self.client.xgroup_createconsumer(self.stream, GROUP, self.consumer)

    def reread_pending(self) -> None:
        """Have the next polls first handle the events delivered to this consumer but never
        acknowledged. For after a Redis outage: a failover may keep a delivery and lose
        the queue moves made for it, which would otherwise wait ``claim_idle_ms``."""
        self._reread = True

    def poll(self, block_ms: int | None = None) -> int:
        """Handle up to one batch of new events; returns how many."""
        try:
            return self._poll(block_ms)
        except redis.ResponseError as exc:
            return self._group_lost(exc)

    def _group_lost(self, exc: redis.ResponseError) -> int:
        """The group is gone with the stream: Redis lost its data (a restart without
        persistence, FLUSHALL). Make it again, reading from the stream's first entry:
        whatever the stream holds now was written after the loss."""
        if "NOGROUP" not in str(exc):
            raise exc
        log.warning(
            "consumer group %s of %s is gone (Redis lost its data?); creating it again",
            GROUP,
            self.stream,
        )
        self.ensure_group(from_start=True)
        self.resets += 1
        self.handled_rv = 0  # the store's rvs start over too
        return 0

    def _poll(self, block_ms: int | None) -> int:
        if self._reread:
            own: Any = self.client.xreadgroup(
                GROUP, self.consumer, {self.stream: "0"}, count=self.batch
            )
            entries: list[tuple[bytes, dict[bytes, bytes]]] = own[0][1] if own else []
            if len(entries) < self.batch:
                self._reread = False
            if entries:
                return self._handle(entries)
        reply = self.client.xreadgroup(
            GROUP, self.consumer, {self.stream: ">"}, count=self.batch, block=block_ms
        )
        if not reply:
            return 0
        # RESP2 reply: [[stream, [(id, fields), ...]]]
        streams = cast(list[tuple[bytes, list[tuple[bytes, dict[bytes, bytes]]]]], reply)
        entries = streams[0][1]
        return self._handle(entries)

    def claim_abandoned(self) -> int:
        """Take over events a dead worker read but never acknowledged."""
        try:
            _next, entries, *_ = self.client.xautoclaim(
                self.stream, GROUP, self.consumer, self.claim_idle_ms, "0-0", count=self.batch
            )
        except redis.ResponseError as exc:
            return self._group_lost(exc)
        return self._handle(entries) if entries else 0

    def _handle(self, entries: Iterable[tuple[bytes, dict[bytes, bytes]]]) -> int:
        ids = []
        batch = []
        for entry_id, fields in entries:
            ids.append(entry_id)
            if fields:  # a trimmed entry comes back empty
                batch.append(fields)
                if fields.get(b"kind") != b"Pod" or fields.get(b"type") == b"DELETED":
                    rv = int(entry_id.split(b"-", 1)[0])
                    self.handled_rv = max(self.handled_rv, rv)
        self.handlers.handle(self.decode(batch))
        if ids:
            self.client.xack(self.stream, GROUP, *ids)
        return len(ids)

    def decode(self, batch: Sequence[dict[bytes, bytes]]) -> list[Event]:
        """Events of a batch of entries, nothing decoded yet; bindings without an earlier
        entry in the batch are looked up in the store together, on first use."""
        copies: dict[tuple[str, str], ObjectRef] = {}
        missing: list[tuple[str, int, str]] = []
        found: dict[tuple[str, int], tuple[Any, Any]] = {}

        def fetch(key: str, rv: int) -> tuple[Any, Any]:
            if not found and missing and self.store is not None:
                states = self.store.binding_states(missing)
                found.update(((k, r), s) for (k, r, _), s in zip(missing, states, strict=True))
            return found.get((key, rv), (None, None))

        out = []
        for fields in batch:
            at = (fields[b"kind"].decode(), fields[b"key"].decode())
            event = decode_event(fields, copies.get(at), fetch)
            if event.binding and at not in copies:
                missing.append((event.key, event.rv, event.node))
            if event.type == DELETED:
                copies.pop(at, None)
            else:
                copies[at] = event.new
            out.append(event)
        return out
