"""The scheduling worker: kube-scheduler's scheduleOne, for a batch of pods at a time.

One thread, one loop (:meth:`SchedulingWorker.run_once`):

1. the informer applies new store events to the local view (:mod:`distsched.workers.local_cache`:
   snapshot, parsed pods);
2. the event consumer turns its share of the events into queue moves (once per event
   across all workers, see :mod:`distsched.workers.eventhandlers`);
3. the ledger's change feed refreshes the usage of the nodes that changed, with absolute
   values (other workers' assumed pods included); pod lists follow lazily;
4. periodic maintenance runs if this worker wins its lock;
5. a batch of pods is popped and scheduled on the snapshot in pop order, each pod seeing
   the earlier ones; the decisions are reserved against the ledger in one script call;
   rejected ones are retried on the refreshed snapshot a bounded number of times;
   reserved ones pass Permit and go to the binder pool as one rq job.

Pods with inter-pod constraints (required affinity, anti-affinity, hard topology spread)
are decided in the same batch, on a snapshot whose pod lists were synced with the ledger
(other workers' assumed pods) after the generations they send were read; each decision
expects the generations its data reflects plus the bumps that the batch's earlier
decisions make (:meth:`SchedulingWorker._decisions`). Batches constrained over the same
multi-node topology key (a zone) take turns across workers
(:mod:`distsched.workers.topology_lock`); other pods schedule in parallel.

Every failure goes through :meth:`SchedulingWorker._fail`, into the failure handler the
binding cycle shares (:mod:`distsched.framework.failure`). The worker's writes to the
cluster (preemption's deletes and nominations, a failed pod's condition) go through a
:class:`~distsched.framework.cluster_writer.ClusterWriter`.
"""

from __future__ import annotations

import logging
import time
import uuid
import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import redis

from distsched import metrics
from distsched.binder.jobs import Binding, bind_queue, enqueue_bindings
from distsched.cache.ledger import MAX_BATCH, Ledger, LedgerConfig
from distsched.cache.ledger_types import Decision, Invalid, Rejected, Reserved, Stale
from distsched.clock import SYSTEM_CLOCK, Clock
from distsched.connection import infrastructure_error, server_changes
from distsched.faults import pause_at  # crash tests only; a no-op unless env set
from distsched.framework.batching import schedule_pod_batched
from distsched.framework.cluster_writer import ClusterWriter
from distsched.framework.cycle_state import CycleState
from distsched.framework.diagnosis import FitError, SchedulingError
from distsched.framework.events import ClusterEvent
from distsched.framework.failure import Failure, FailureHandler
from distsched.framework.podinfo import PodInfo
from distsched.framework.profile import Profiles, SchedulerConfig
from distsched.framework.registry import IN_TREE_REGISTRY
from distsched.framework.runtime import Framework
from distsched.framework.snapshot import PODS_COL
from distsched.keys import Keys
from distsched.model import HostPort, ManifestError, Node, Pod, PodRef
from distsched.model.objects import DEFAULT_SCHEDULER_NAME, LABEL_HOSTNAME
from distsched.model.podgroups import PodGroup, group_of
from distsched.model.volumes import READ_WRITE_ONCE_POD
from distsched.queue_redis import RedisQueue
from distsched.queue_types import QueueConfig, QueuedPod, backoff_config
from distsched.redis_text import as_text
from distsched.store import Store, object_key
from distsched.store.codec import node_name_of, rv_of, uid_of
from distsched.store.errors import Undecodable
from distsched.store.writer import StoreWriter
from distsched.workers.eventhandlers import (
    GROUP,
    EventConsumer,
    NodeOccupancy,
    QueueEventHandlers,
    pod_entry,
    record_bound_pod,
)
from distsched.workers.gang import (
    GangPlan,
    Outcome,
    gang_message,
    never_fits,
    plan_gang_preemption,
)
from distsched.workers.local_cache import ClusterView
from distsched.workers.maintenance import ConsistencySweep, Periodic, trim_event_streams
from distsched.workers.phases import (
    BIND,
    DECIDE,
    FEED,
    FOLLOW,
    HOUSEKEEPING,
    POP,
    PREPARE,
    QUEUE_EVENTS,
    RESERVE,
    PhaseClock,
)
from distsched.workers.preemption import apply_post_filter, carry_out
from distsched.workers.topology_lock import TopologyLocks

log = logging.getLogger(__name__)

Obj = dict


@dataclass
class WorkerConfig:
    batch: int = 256
    # Pods popped together are decided one after another before any goes to binding: a
    # batch whose pods were slow (preemption's dry runs take ~60 ms a pod) makes the next
    # pop smaller, so that a batch takes about this long; it grows back at most twofold.
    batch_budget_s: float = 0.25
    max_reserve_attempts: int = 3
    idle_wait_s: float = 0.2
    event_batches_per_loop: int = 4
    # Reserved pods wait up to this long for more before they go to the binder pool as
    # one rq job (or until bind_batch are pending): at a trickle of pods every pop batch
    # is small, and an rq job costs its binder and Redis ~50 commands whatever its size.
    bind_linger_s: float = 0.0
    bind_batch: int = 256
    # QueueingHints (kube's SchedulerQueueingHints, GA in 1.34): the rejecting plugins'
    # hints decide which events move a parked pod; False keeps the seed's rules only.
    queueing_hints: bool = True
    # Bound pods are parsed only when a decision reads pod lists (local_cache); False
    # parses each one when its event arrives (same decisions: the tests' reference).
    lazy_pods: bool = True
    # How often one of the workers runs the consistency sweep (maintenance.ConsistencySweep).
    sweep_interval_s: float = 60.0
    # With several workers, each prefers its own share of the nodes among equally scored
    # ones, and, while other workers have pods popped and not reserved (its view of their
    # shares lags), among those one pod's score below the best, so that they
    # rarely pick the same node (schedule.select_position): the live workers (consumers of
    # q:events active within share_idle_ms), re-read every share_refresh_s (a worker
    # that joins is counted by all within it). False: ties are broken uniformly at
    # random, as kube does.
    share_ties: bool = True
    share_refresh_s: float = 0.5
    share_idle_ms: int = 15_000
    # With several live workers: refuse a reservation on a node another worker put pods
    # on since this worker's view (Decision.seen_pods), and decide the pod again: several
    # workers then spread pods as evenly as one does. With the shares of the nodes above
    # such collisions are rare, so the refusals cost little (BENCHMARKS.md, issue 23).
    even_placement: bool = True
    # After a pop that found fewer pods than it asked for (the queue drained), the next
    # turn starts this long after the last one began: at a trickle of pods (a real
    # cluster's creations) each turn then decides several pods instead of one or two, and
    # a turn's fixed cost (its Redis round trips, the binding job) is shared. A pod waits
    # at most this long more; full pops (a backlog) never wait.
    pop_linger_s: float = 0.0
    # Leave other workers' plain pods out of this worker's view (ClusterView: pending pods
    # without pod affinity, anti-affinity or claims, and their bindings): a decision that
    # reads no other pod needs nothing of them but their usage, which the ledger's feed
    # gives. The first pod that may read other pods (or preempt) makes the worker follow
    # every pod from then on. Each worker then follows the cluster's pods once, not once
    # per worker (BENCHMARKS.md, issue 23).
    leave_others_pods: bool = True


# The least a pop may be held to by the share of the nodes (see _refresh_share).
MIN_SHARE_POP = 64

# How often an idle worker looks whether its held preemptors' victims are gone.
HELD_POLL_S = 0.02

# Even placement's check runs for batches decided while the other workers' undecided
# pods come to at least this many per node of their shares (see _set_tie_slack).
EVEN_CHECK_LAG = 0.5


def next_pop_size(config: WorkerConfig, popped: int, current: int, elapsed_s: float) -> int:
    """How many pods the next pop takes: as many as fit ``batch_budget_s`` at the last
    batch's pace, between 1 and ``batch``, at most twice the current size (a batch
    smaller than the pop size says nothing about the pace, the queue was short)."""
    if popped < current and elapsed_s <= config.batch_budget_s:
        return current
    per_pod = elapsed_s / max(popped, 1)
    fitting = config.batch if per_pod <= 0 else int(config.batch_budget_s / per_pod)
    return max(1, min(config.batch, 2 * current, fitting))


@dataclass
class Attempt:
    """One pod's scheduling attempt within a batch."""

    queued: QueuedPod
    pod: Pod
    framework: Framework
    # When the worker took the pod up, just after its pop: its lease runs from about then.
    prepared_ms: int
    state: CycleState = field(default_factory=CycleState)
    started: float = field(default_factory=time.perf_counter)
    node: str = ""
    info: PodInfo | None = None
    tries: int = 0
    reserved: bool = False
    gang: str = ""  # the pod group ("ns/name") whose gang this member is decided with
    # The PodScheduled=False (reason, message) its preemption wrote with its nomination.
    said: tuple[str, str] | None = None
    obj: Obj | None = None  # the pod's object as popped (a status write may start from it)


# The lock batches with ReadWriteOncePod claims hold (see _uses_rwop_claim). Unlike the
# topology locks it is what keeps two workers from placing two users of one such claim:
# the ledger does not check claims, so a holder stalled past the lock's TTL could.
RWOP_LOCK = "distsched.io/readwriteoncepod-claims"


def uses_node_volumes(pod: Pod) -> bool:
    """Whether the volume plugins read other pods for the pod: the disks and claims of
    the pods on each node (VolumeRestrictions, NodeVolumeLimits) and the users of its
    claims (ReadWriteOncePod)."""
    return any(v.has_disk or v.claim_name or v.ephemeral for v in pod.spec.volumes)


def constrained(pod: Pod) -> bool:
    """Whether the pod's decision depends on other pods' placement (inter-pod rules, and
    the volume plugins' per-node counts: checked by the node's hostname domain)."""
    if pod.spec.volumes and uses_node_volumes(pod):
        return True
    affinity = pod.spec.affinity
    if affinity is not None:
        if affinity.pod_affinity is not None and affinity.pod_affinity.required:
            return True
        if affinity.pod_anti_affinity is not None and affinity.pod_anti_affinity.required:
            return True
    spread = pod.spec.topology_spread_constraints
    return any(c.when_unsatisfiable == "DoNotSchedule" for c in spread)


def reads_pod_lists(pod: Pod) -> bool:
    """Whether deciding the pod reads other pods' labels (its own pod affinity or
    anti-affinity, required or preferred, or topology spread constraints): then the
    snapshot's deferred pods get parsed (PodIndex queries)."""
    affinity = pod.spec.affinity
    if affinity is not None and (
        affinity.pod_affinity is not None or affinity.pod_anti_affinity is not None
    ):
        return True
    return bool(pod.spec.topology_spread_constraints)


IN_TREE_PLUGINS = "distsched.framework.plugins."


def profile_reads_other_pods(fw: Framework) -> str:
    """Why the profile's decisions may read pods a worker that leaves other workers'
    plain pods out does not hold ("" when they read none): a plugin that is not one of
    distsched's in-tree plugins. Those read, for a pod without pod affinity,
    anti-affinity, spread constraints, disks, claims or a pod group, no other pod but
    the ones a worker always holds (with pod affinity or anti-affinity, nominated) and the
    ledger's usage."""
    for name, plugin in fw.plugins.items():
        if name not in IN_TREE_REGISTRY or not type(plugin).__module__.startswith(IN_TREE_PLUGINS):
            return f"profile {fw.profile_name!r} runs {name}, not an in-tree plugin"
    return ""


def reads_other_pods(pod: Pod) -> str:
    """Why deciding ``pod`` (under a profile that reads no other pods by itself) may read
    pods a worker that leaves other workers' plain pods out does not hold ("" when it
    reads none): see WorkerConfig.leave_others_pods."""
    spec = pod.spec
    affinity = spec.affinity
    if affinity is not None and (
        affinity.pod_affinity is not None or affinity.pod_anti_affinity is not None
    ):
        return f"pod {pod.key} has pod affinity or anti-affinity"
    if spec.topology_spread_constraints:
        return f"pod {pod.key} has topology spread constraints"
    if spec.resource_claims or (spec.volumes and uses_node_volumes(pod)):
        return f"pod {pod.key} has disks or claims"
    if pod.status.nominated_node_name:
        return f"pod {pod.key} is nominated"
    if group_of(pod):
        return f"pod {pod.key} belongs to a pod group"
    return ""


def _skip_undecodable_pod(error: Undecodable) -> None:
    log.warning("resync: pod left out: %s", error)


def constraint_topology_keys(pod: Pod) -> set[str]:
    keys = {c.topology_key for c in pod.spec.topology_spread_constraints}
    if pod.spec.volumes and uses_node_volumes(pod):
        keys.add(LABEL_HOSTNAME)
    affinity = pod.spec.affinity
    if affinity is not None:
        for group in (affinity.pod_affinity, affinity.pod_anti_affinity):
            if group is not None:
                keys.update(t.topology_key for t in group.required)
                keys.update(w.term.topology_key for w in group.preferred)
    return keys


def _chunks_of_decisions(
    placed: list[tuple[GangPlan, list[Outcome], list[Attempt]]], limit: int
) -> list[list[tuple[GangPlan, list[Outcome], list[Attempt]]]]:
    """Placed gangs in runs whose minimums add up to at most ``limit`` decisions (one
    ledger call each; a gang's minimum is at most the limit)."""
    chunks: list[list[tuple[GangPlan, list[Outcome], list[Attempt]]]] = []
    size = limit
    for item in placed:
        need = item[0].need
        if size + need > limit:
            chunks.append([])
            size = 0
        chunks[-1].append(item)
        size += need
    return chunks


class SchedulingWorker:
    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        *,
        profiles: Profiles,
        clock: Clock = SYSTEM_CLOCK,
        name: str | None = None,
        config: WorkerConfig | None = None,
        queue_config: QueueConfig | None = None,
        ledger_config: LedgerConfig | None = None,
        informer_client: redis.Redis | None = None,
        scheduler_config: SchedulerConfig | None = None,
        writer: ClusterWriter | None = None,
    ) -> None:
        self.client = client
        self.keys = keys
        self.profiles = profiles
        self._profiles_reading_other_pods = {
            fw.profile_name: profile_reads_other_pods(fw) for fw in profiles.values()
        }
        self.clock = clock
        self.name = name or f"worker-{uuid.uuid4().hex[:8]}"
        self.config = config or WorkerConfig()
        self.sleep: Callable[[float], None] = time.sleep  # the pop linger's wait
        self.store = Store(client, keys, clock=clock)
        # Standalone, the store is the cluster; a bridge to an API server brings its own.
        self.writer: ClusterWriter = writer if writer is not None else StoreWriter(self.store)
        profiles.handle.listers.deleting = self.writer.deleting
        profiles.handle.listers.clock = clock
        queue_config = backoff_config(scheduler_config, queue_config)
        self.queue = RedisQueue(client, keys, config=queue_config)
        self.ledger = Ledger(client, keys, clock, ledger_config, queue_config=queue_config)
        ledger = self.ledger
        profiles.handle.listers.releasing = lambda node: bool(ledger.deleted_pods_on(node))
        # The worker's local picture: snapshot, parsed pods, the ledger's mirror, and the
        # listers its profiles' plugins read (their Handle's).
        self.view = ClusterView(
            client,
            keys,
            store=self.store,
            ledger=self.ledger,
            listers=profiles.handle.listers,
            informer_client=informer_client,
            lazy_pods=self.config.lazy_pods,
            reader=self.name,
            leave_others_pods=self.config.leave_others_pods,
        )
        self.snapshot = self.view.snapshot
        self.informer = self.view.informer
        self.nominator = self.view.nominator
        self._pending_bindings: list[Binding] = []
        self._pending_since = 0.0
        # Leases (key, epoch) of popped pods an infrastructure error kept from being
        # attempted, to hand back uncounted as soon as Redis answers (queue.hand_back).
        self._unattempted: list[tuple[str, int]] = []
        self.handlers = QueueEventHandlers(
            queue=self.queue,
            ledger=self.ledger,
            clock=clock,
            namespaces=self.view.listers.namespaces,
            scheduler=self,
        )
        self.failures = FailureHandler(
            client, keys, self.queue, self.ledger, self.writer, profiles, clock
        )
        # q:profiles before the consumer group: once a worker is seen consuming events,
        # the store's create script already queues the pods of its profiles itself.
        self._write_profiles()
        self.consumer = EventConsumer(
            client, keys.queue_events, self.name, self.handlers, store=self.store
        )
        self.bind_queue = bind_queue(client, keys)
        self.periodic = Periodic(client, keys)
        self.phases = PhaseClock()  # the CPU of each turn's phases, as a metric
        self.sweep = ConsistencySweep(
            client, keys, ledger=self.ledger, queue=self.queue, clock=clock
        )
        self.topology_locks = TopologyLocks(client, keys)
        # Topology keys this worker registered with the ledger (cache:topokeys).
        self._watched: set[str] = set()
        # Pods that do not parse, by the resourceVersion last logged.
        self._unparsed: dict[str, str] = {}
        self._setup_periodic()
        # (informer, consumer) resets seen: a change means Redis lost its data.
        self._resets = (0, 0)
        # server_changes(client) seen: a change means another server (a failover).
        self._server_changes = 0
        self.scheduled = 0
        self.conflicts = 0
        self.pop_size = self.config.batch
        # This worker's share of the nodes among ties: (its index, live workers, node
        # count) it was computed for, and when to look at the live workers again.
        self._share: tuple[int, int, int] = (0, 1, 0)
        self._share_due = 0.0
        self._share_size = self.config.batch  # pods a pop may take (see _refresh_share)
        self._lag_per_node = 0.0  # see _set_tie_slack
        # (attempt, its failure, victim keys, deadline ms): see _hold_preemptor
        self._held_preemptors: list[tuple[Attempt, FitError, tuple[str, ...], int]] = []

    # ------------------------------------------------------------------ start-up
    def _setup_periodic(self) -> None:
        q, now = self.queue, self.clock.now_ms
        self.periodic.every("flush-backoff", 1.0, lambda: q.flush_backoff_completed(now_ms=now()))
        self.periodic.every(
            "flush-leftover", 30.0, lambda: q.flush_unschedulable_leftover(now_ms=now())
        )
        self.periodic.every("reclaim-leases", 1.0, self._reclaim_leases)
        self.periodic.every("reap-assumed", 1.0, self._reap_assumed)
        self.periodic.every("claim-events", 10.0, self.consumer.claim_abandoned)
        self.periodic.every("resync", 300.0, self.resync)
        self.periodic.every("sweep", self.config.sweep_interval_s, self.sweep.run)
        self.periodic.every(
            "trim-events", 10.0, lambda: trim_event_streams(self.client, self.keys, now())
        )

    def _refresh_share(self) -> None:
        """How many workers are live, and which nodes this worker prefers among equally
        scored ones: those whose name hashes to its index among the live workers (every
        worker computes the same split; one that joins or leaves changes it within
        share_refresh_s). Even placement checks only when several are live."""
        if not (self.config.share_ties or self.config.even_placement):
            return
        now = time.monotonic()
        nodes = self.snapshot.num_nodes
        if now < self._share_due and nodes == self._share[2]:
            return
        if now >= self._share_due:
            self._share_due = now + self.config.share_refresh_s
            consumers = self.client.xinfo_consumers(self.keys.queue_events, GROUP)
            live = {
                as_text(c["name"]) for c in consumers if int(c["idle"]) < self.config.share_idle_ms
            }
            ordered = sorted(live | {self.name})
            index, count = ordered.index(self.name), len(ordered)
        else:
            index, count = self._share[0], self._share[1]
        if (index, count, nodes) == self._share and self.snapshot.tie_preference is not None:
            return
        self._share = (index, count, nodes)
        if count <= 1 or not self.config.share_ties:
            self.snapshot.tie_preference = None
            self._share_size = self.config.batch
            return
        slots = self.snapshot.node_indices()
        mask = np.zeros(int(slots.max()) + 1 if slots.size else 0, dtype=bool)
        for slot in slots.tolist():
            mask[slot] = zlib.crc32(self.snapshot.node_name(slot).encode()) % count == index
        self.snapshot.tie_preference = mask
        # A batch bigger than the share would leave the others' view of it more than a
        # pod per node behind: pops are held to the share's size (small clusters only;
        # never below MIN_SHARE_POP, where evenness matters less than round trips).
        self._share_size = max(MIN_SHARE_POP, int(np.count_nonzero(mask)))

    def _set_tie_slack(self, batch_size: int) -> None:
        """Right after a pop (the view refreshed just before it): what the other workers
        have popped and not reserved yet (the leases besides this batch's; what they
        reserved is in this worker's view), per node of their shares: the lag of this
        worker's view of them, which decides where even placement checks. While there is
        any, a node of this worker's share may be a pod fuller than the best and still be
        preferred; when nobody else is deciding, exact ties only (a worker that popped
        more than the others then evens out onto their nodes)."""
        prefer = self.snapshot.tie_preference
        self.snapshot.tie_slack_pods = 0
        self._lag_per_node = 0.0
        workers = self._share[1]
        if workers <= 1:
            return
        pipe = self.client.pipeline(transaction=False)
        pipe.zcard(self.keys.inflight)
        pipe.zcard(self.keys.active)
        inflight, queued = pipe.execute()
        unseen = max(0, int(inflight) - batch_size)
        nodes = self.snapshot.num_nodes
        mine = int(np.count_nonzero(prefer)) if prefer is not None else nodes // workers
        others = max(1, nodes - mine)
        self._lag_per_node = unseen / others
        if prefer is not None and unseen and (int(queued) >= nodes or not self._even_checks()):
            # One pod at most: a wider slack would let the shares drift apart by as much
            # (on a small cluster the lag is several pods per node; the ledger's
            # refusals, on there, catch what one pod does not cover). Where the ledger
            # refuses, only while a level of the cluster's pods is still queued: a
            # share that a slower worker left a level behind is filled up from the
            # rest, and the last pods go where the cluster is emptiest, whoever's
            # share that is (the refusals keep the workers off each other's picks).
            self.snapshot.tie_slack_pods = 1

    def _even_checks(self) -> bool:
        """Whether decisions carry the node's pod count for the ledger to check
        (Decision.seen_pods): only where the others' lag can move a node's level, on a
        cluster small for its workers (a share smaller than a batch) or while the
        others' undecided pods come to half a pod per node; on a large cluster they are
        a fraction of a pod per node and the shares suffice."""
        return (
            self.config.even_placement
            and self._share[1] > 1
            and (self._share_size < self.config.batch or self._lag_per_node >= EVEN_CHECK_LAG)
        )

    def _reclaim_leases(self) -> int:
        keys = self.queue.reclaim_expired_leases(now_ms=self.clock.now_ms())
        if keys:
            metrics.lease_reclaims.labels("inflight").inc(len(keys))
            log.warning("reclaimed %d expired leases: %s", len(keys), keys[:5])
        return len(keys)

    def _reap_assumed(self) -> int:
        keys = self.ledger.reap_expired_assumed(self.clock.now_ms())
        if keys:
            metrics.lease_reclaims.labels("assumed").inc(len(keys))
            log.warning("requeued %d expired assumed pods: %s", len(keys), keys[:5])
        return len(keys)

    def start(self) -> None:
        """Initial list into the snapshot, then one resync of ledger and queue."""
        self._server_changes = server_changes(self.client)
        while not self.informer.has_synced:
            self.informer.poll_once(0)
        self.consumer.ensure_group()
        self._set_up_shared_state()
        self._resets = (self.informer.resets, self.consumer.resets)

    def _set_up_shared_state(self) -> None:
        """What every worker writes at start: its profiles' modes (q:profiles), and one
        resync of ledger and queue with the store (whichever worker takes the lock)."""
        self._write_profiles()
        if self.client.set(self.keys.lock("resync"), self.name, nx=True, px=60_000):
            self.resync()
        self.view.refresh_from_ledger()

    def _notice_reset(self) -> None:
        """Set up again what start() did once, when Redis lost its data (a restart without
        persistence, FLUSHALL, a failover to a replica that had none of it: the informer
        found the store reset or the event consumer found its group gone) or when the
        client's connections reach another server (a failover: a promoted replica has
        only what had replicated, and its next rvs and ledger versions take up the
        numbers of what it lacks, so neither the informer nor the ledger feed sees a
        gap). After a loss, the consumer group and this consumer first (from the
        stream's first entry: everything in it was written after the loss); after a
        failover, the queue events delivered but not acknowledged are handled again.
        Then a fresh list of the store, q:profiles, the ledger mirror and the topology
        keys this worker registered, and a resync of ledger and queue from the list."""
        changes = server_changes(self.client)
        lost = (self.informer.resets, self.consumer.resets) != self._resets
        if not lost and changes == self._server_changes:
            return
        if lost:
            log.warning("%s: Redis lost its data; setting the worker up again", self.name)
            self.consumer.ensure_group(from_start=True)
        else:
            log.warning(
                "%s: Redis is another server now (a failover or a restart); reading the "
                "store and the ledger again",
                self.name,
            )
            self.consumer.reread_pending()
        self._server_changes = changes
        if lost:
            self.informer.relist()
        else:  # unless the informer relisted on its own since the change
            self.informer.follow_server()
        self.view.forget_ledger()
        self._watched.clear()
        self._set_up_shared_state()
        self._resets = (self.informer.resets, self.consumer.resets)

    def _write_profiles(self) -> None:
        for name, mode in self.profile_modes().items():
            self.client.hset(self.keys.profiles, name, mode)

    def profile_modes(self) -> dict[str, str]:
        """How the store's create script may enqueue a pending pod of each profile
        (``q:profiles``): "n" when the profile has no PreEnqueue plugin, "g" when its only
        one is SchedulingGates (the script enqueues a pod without gates; one with gates
        goes to the handlers, whose typed PreEnqueue also validates the gates), else "p":
        the event handlers run the profile's PreEnqueue plugins."""
        modes = {}
        for name, fw in self.profiles.items():
            plugins = [p.name for p in fw.pre_enqueue_plugins]
            modes[name] = "n" if not plugins else "g" if plugins == ["SchedulingGates"] else "p"
        return modes

    def resync(self) -> int:
        """Make the ledger and the queue agree with the store (events before the consumer
        group existed, or lost with a Redis that restarted without its data). Idempotent."""
        now = self.clock.now_ms()
        for obj in self.informer.list("Node"):
            try:
                self.ledger.set_node_from(Node.from_dict(obj))
            except ValueError as exc:  # unusable (the view logs it too): not a start-up loop
                log.warning("resync: node %s left out: %s", object_key(obj)[1], exc)
        minimums: dict[str, int | None] = {}
        for obj in self.informer.list("PodGroup"):
            try:
                group = PodGroup.from_dict(obj)
            except ValueError as exc:
                log.warning("resync: PodGroup %s left out: %s", object_key(obj)[1], exc)
                continue
            minimums[group.key] = group.min_member
        self.queue.set_gang_minimums(minimums)
        entries = []
        # Every pod: the informer's when it holds them all (it does after the relist that
        # precedes a resync at start or after a reset), else the store's.
        pods = (
            self.informer.list("Pod")
            if self.view.holds_every_pod
            else self.store.list("Pod", on_undecodable=_skip_undecodable_pod)[0]
        )
        for obj in pods:
            if (obj.get("spec") or {}).get("nodeName"):
                try:
                    record_bound_pod(self.ledger, self.view.pod_from(obj))
                except ValueError as exc:
                    log.warning("resync: bound pod %s left out: %s", object_key(obj)[1], exc)
            elif self.handlers.responsible_for(obj):
                entries.append(
                    pod_entry(object_key(obj)[1], obj, gated=self.pre_enqueue_rejects(obj))
                )
        added = 0
        for i in range(0, len(entries), 1000):
            added += self.queue.add(entries[i : i + 1000], now_ms=now)
        return added

    # ------------------------------------------------------------------ for the handlers
    # (eventhandlers.Scheduler: what the queue's event handlers need from the worker)
    def profile_names(self) -> list[str]:
        return list(self.profiles)

    def uses_queueing_hints(self) -> bool:
        return self.config.queueing_hints

    def pod(self, key: str) -> Pod | None:
        """A pod the queue holds, for the event handlers' move decisions; None when it is
        gone or does not parse (then it is moved, and its next attempt says why)."""
        try:
            return self.view.pod(key)
        except ValueError:
            return None

    def parse(self, obj: dict[str, Any]) -> Pod:
        return self.view.pod_from(obj)

    def pre_enqueue_rejects(self, obj: dict[str, Any]) -> bool:
        """Whether the PreEnqueue plugins of the pod's profile keep it gated (kube's
        runPreEnqueuePlugins: any status but success gates it). A pod that does not parse
        is not gated here: its scheduling attempt reports why it cannot be scheduled.
        Plugins that can tell from the raw object (SchedulingGates: no gates) spare the
        parse; the pod is then parsed only by the worker that pops it."""
        name = (obj.get("spec") or {}).get("schedulerName") or DEFAULT_SCHEDULER_NAME
        fw = self.profiles.get(name)
        if fw is None or fw.pre_enqueue_admits_object(obj):
            return False
        try:
            pod = self.view.pod_from(obj)
        except Exception:  # any parse failure: the attempt that pops the pod says what
            log.debug("no PreEnqueue for %s: it does not parse", object_key(obj)[1], exc_info=True)
            return False
        return not fw.run_pre_enqueue_plugins(pod).is_success()

    def interested(self, event: ClusterEvent) -> frozenset[str] | None:
        names: set[str] = set()
        for fw in self.profiles.values():
            names |= fw.plugins_interested_in(event)
        return frozenset(names)

    def queueing_hint(
        self, pod: Pod, plugin: str, event: ClusterEvent, old: object, new: object
    ) -> bool | None:
        fw = self.profiles.for_pod(pod)
        return None if fw is None else fw.queueing_hint(plugin, event, pod, old, new)

    def node_usage(self, name: str) -> NodeOccupancy:
        state = self.ledger.node_state([name]).get(name)
        if state is None:
            return NodeOccupancy({}, 0, [])
        return NodeOccupancy(
            dict(state.requested),
            state.requested.get("pods", len(state.pods)),
            [HostPort(*port) for port in state.ports],
        )

    # ------------------------------------------------------------------ the loop
    def run_once(self) -> int:
        """One turn of the loop; returns the number of pods popped."""
        phases = self.phases
        phases.start()
        try:
            return self._turn(phases)
        finally:
            phases.lap(HOUSEKEEPING)
            phases.publish()

    def _turn(self, phases: PhaseClock) -> int:
        self._notice_reset()  # before the informer reads on from another server
        self._hand_back_unattempted()
        self._release_held_preemptors()
        phases.lap(HOUSEKEEPING)
        for _ in range(self.config.event_batches_per_loop):
            if not self.informer.poll_once(0):
                break
        phases.lap(FOLLOW)
        for _ in range(self.config.event_batches_per_loop):
            if not self.consumer.poll(None):
                break
        phases.lap(QUEUE_EVENTS)
        self._informer_past_handled_events()
        self._notice_reset()
        phases.lap(FOLLOW)
        self.view.refresh_from_ledger()
        phases.lap(FEED)
        self.periodic.tick()
        self._refresh_share()
        phases.lap(HOUSEKEEPING)
        popped = self.queue.pop(
            min(self.pop_size, self._share_size),
            now_ms=self.clock.now_ms(),
            unacknowledged=self._not_attempted,
        )
        phases.lap(POP)
        if not popped:
            linger = self._linger_left()
            wait = min(linger, self.config.idle_wait_s) if self._pending_bindings else None
            if self._held_preemptors:
                wait = min(wait or HELD_POLL_S, HELD_POLL_S)
            if wait is None or wait > 0:
                self.client.blpop([self.keys.wake], timeout=wait or self.config.idle_wait_s)
            phases.lap(HOUSEKEEPING)
            self._flush_bindings()
            phases.lap(BIND)
            return 0
        pause_at("pop", [p.key for p in popped])
        self._set_tie_slack(len(popped))
        phases.lap(HOUSEKEEPING)
        started = time.monotonic()
        try:
            self.schedule_one_batch(popped)
        except Exception as exc:
            if infrastructure_error(exc):
                self._not_attempted(popped)
            raise
        asked = self.pop_size
        self.pop_size = next_pop_size(
            self.config, len(popped), self.pop_size, time.monotonic() - started
        )
        if len(popped) < asked and self.config.pop_linger_s > 0:
            rest = started + self.config.pop_linger_s - time.monotonic()
            if rest > 0:
                self.sleep(rest)
        return len(popped)

    def _informer_past_handled_events(self) -> None:
        """Read the store's stream until the informer has every event of other kinds
        than Pod the queue's handlers have used (kube's informer and queue share one
        event handler, so the queue never moves on an event its scheduler has not seen)."""
        self._informer_reach(self.consumer.handled_rv)

    def _informer_past_popped(self, objs: dict[str, Obj | None]) -> None:
        """Read the store's stream past the popped pods the informer has not seen yet
        (read from the store: it queues a pod as it writes it). Whatever was written
        before a pod (the node it can go to: the kube bridge writes a first listing's
        nodes before its pods) is then in the view that decides it, as kube-scheduler's
        cache holds what its informers listed before it schedules."""
        newest = max(
            (int(rv_of(obj) or 0) for obj in objs.values() if obj),
            default=0,
        )
        if newest > self.informer.resource_version:
            self._informer_reach(newest)

    def _informer_reach(self, rv: int) -> None:
        """Read the store's stream until the informer is at ``rv`` or has nothing more
        to read. Bounded: a store reset restarts rvs, and the informer's relist takes
        over then."""
        for _ in range(100):
            if self.informer.resource_version >= rv or not self.informer.poll_once(0):
                return

    def schedule_one_batch(self, popped: Sequence[QueuedPod]) -> None:
        """The worker's scheduling cycle for popped pods (kube's scheduleOne, batched):
        decide each on the snapshot in pop order, reserve them against the ledger, hand
        reserved ones to the binder pool."""
        attempts: list[Attempt] = []
        self._notice_reset()  # the pop reached another server
        objs = self.view.pod_objects([queued.key for queued in popped])
        self._informer_past_popped(objs)
        self._check_view(popped, objs)
        for queued in popped:
            obj, pod = objs[queued.key], None
            if obj is not None:
                try:
                    pod = self.view.pod_from(obj)
                except ValueError as exc:  # a pod that does not parse fails alone
                    self._fail_unparsed(queued, obj, exc)
                    continue
            attempt = self._prepare(queued, pod)
            if attempt is not None:
                attempt.obj = obj
                attempts.append(attempt)
        if not self.view.holds_every_pod:
            by_profile = self._profiles_reading_other_pods
            for attempt in attempts:
                why = by_profile[attempt.framework.profile_name] or reads_other_pods(attempt.pod)
                if why:
                    self.view.hold_every_pod(why)
                    break
        topology_keys: set[str] = set()
        for attempt in attempts:
            if constrained(attempt.pod):
                topology_keys |= constraint_topology_keys(attempt.pod)
        depends = bool(topology_keys) or self.view.anti_affinity_in_multi_node_domains()
        if self.snapshot.has_deferred and any(reads_pod_lists(a.pod) for a in attempts):
            # The inter-pod plugins would parse the pods held unparsed while deciding
            # (Snapshot.defer_pod): parse them now, before this batch takes its turn
            # on a topology lock other workers may be waiting for.
            self.snapshot.materialize()
        singles, gangs = self._gangs(attempts)
        locks = self._shared_keys(topology_keys)
        if any(self._uses_rwop_claim(a.pod) for a in attempts):
            locks.append(RWOP_LOCK)
        phases = self.phases
        phases.lap(PREPARE)
        try:
            with self.topology_locks.hold(locks):
                if depends:
                    self._sync_for_constraints(topology_keys)
                batch = [a for a in singles if self._decide(a)]
                phases.lap(DECIDE)
                self._reserve(batch, depends=depends)
                phases.lap(RESERVE)
                if gangs:
                    self._schedule_gangs(gangs, depends=depends)
                    phases.lap(DECIDE)
        except BaseException:
            # The pods go back to the queue (handed back, or when their lease expires);
            # the snapshot must not keep charging their nodes for reservations the ledger
            # never made (the change feed only corrects nodes whose ledger usage changes).
            for attempt in attempts:
                if not attempt.reserved:
                    self._undo_reserve(attempt)
            raise
        finally:
            # One rq job for the whole pop batch, constrained pods included: rq's per-job
            # round trips would otherwise dominate Redis CPU for those workloads.
            self._flush_bindings()
            phases.lap(BIND)

    def _flush_bindings(self, *, force: bool = False) -> None:
        """Hand the pending bindings to the binder pool as one rq job, once they waited
        ``bind_linger_s`` or ``bind_batch`` are pending (or when ``force``)."""
        if not self._pending_bindings:
            return
        short = len(self._pending_bindings) < self.config.bind_batch
        if not force and short and self._linger_left() > 0:
            return
        enqueue_bindings(self.bind_queue, self.keys, self._pending_bindings)
        self.scheduled += len(self._pending_bindings)
        self._pending_bindings = []

    def _linger_left(self) -> float:
        """Seconds the pending bindings may still wait (0: hand them over now)."""
        if not self._pending_bindings:
            return 0.0
        return max(0.0, self._pending_since + self.config.bind_linger_s - time.monotonic())

    def stop(self) -> None:
        """Hand over what is pending (a worker stopped with reserved pods in hand would
        leave them to the reaper, after their assume deadline); the informer no longer
        holds the event stream back."""
        self._flush_bindings(force=True)
        self._hand_back_unattempted()
        for attempt, failure, _victims, _deadline in self._held_preemptors:
            self._fail_member(attempt, failure)
        self._held_preemptors = []
        self.informer.forget_position()

    def _not_attempted(self, popped: Sequence[QueuedPod]) -> None:
        """An infrastructure error (Redis unreachable, a pop or a reservation no replica
        acknowledged) stopped the batch: its pods go back with their pop uncounted, so
        that the infrastructure's failures never dead-letter a healthy pod. Pods the
        batch did finish (reserved, failed, bound, deleted) are left alone by the queue;
        a worker that dies instead hands nothing back, and its pods count (that is how
        a pod that kills workers is found). Now if Redis answers, else at the next turn
        that reaches it (the queue then uncounts the delivery the reaper requeued)."""
        self._unattempted += [(p.key, p.epoch) for p in popped]
        try:
            self._hand_back_unattempted()
        except redis.RedisError as exc:
            log.info("%d unattempted pods wait to be handed back: %s", len(self._unattempted), exc)

    def _hand_back_unattempted(self) -> None:
        if not self._unattempted:
            return
        where = self.queue.hand_back(self._unattempted)
        log.info(
            "%s: handed back %d of %d popped pods an infrastructure error kept from being "
            "scheduled, uncounted (the others were finished or gone)",
            self.name,
            sum(1 for w in where if w),
            len(self._unattempted),
        )
        self._unattempted = []

    def _shared_keys(self, topology_keys: set[str]) -> list[str]:
        """The keys among ``topology_keys`` whose domains span several nodes (zones, not
        hostnames): batches depending on them take turns (see topology_lock)."""
        shared = []
        for key in topology_keys:
            values = self.snapshot.label_values(key)
            if any(len(slots) > 1 for slots in values.values()):
                shared.append(key)
        return shared

    def _uses_rwop_claim(self, pod: Pod) -> bool:
        """Whether the pod uses a ReadWriteOncePod claim: whether any pod on any node
        uses it is cluster-wide, so such batches of all workers take turns (RWOP_LOCK),
        each deciding on pod lists synced after the previous one reserved."""
        if not pod.spec.volumes:
            return False
        volumes = self.view.listers.volumes
        for volume in pod.spec.volumes:
            claim = (
                volumes.claim(pod.metadata.namespace, volume.claim_name)
                if volume.claim_name
                else None
            )
            if claim is not None and READ_WRITE_ONCE_POD in claim.access_modes:
                return True
        return False

    def _sync_for_constraints(self, topology_keys: set[str]) -> None:
        """Make the view fit for decisions that depend on other pods: register the
        topology keys they check, then read generations (refresh) and then the pod lists
        (sync) — in that order, see :mod:`distsched.cache.ledger`."""
        new = topology_keys - self._watched
        if new:
            self.ledger.watch_topology_keys(new)
            self._watched |= new
        self.view.refresh_from_ledger()
        self.view.sync_pod_lists()

    def _check_view(self, popped: Sequence[QueuedPod], objs: dict[str, Obj | None]) -> None:
        """Popped pods are decided on the view's copies, and one the view has bound leaves
        the queue (:meth:`_prepare`). A copy bound or of another uid than the queue's
        may be behind the store (a pod deleted and created again under its name, popped
        before this informer read that): read such pods from the store, and have the
        informer catch up with what it read. A binding is final, so a pod the view still
        has bound then while the store has it pending means the view holds a binding
        Redis no longer has (read from a primary lost in a failover this client could
        not see): relist. Either way the pods are decided as the store has them."""
        suspect = [
            q.key
            for q in popped
            if (obj := objs[q.key]) is not None
            and (node_name_of(obj) or (q.uid and uid_of(obj) != q.uid))
        ]
        if not suspect:
            return
        stored = dict(zip(suspect, self.store.get_many("Pod", suspect), strict=True))
        differ = {
            key: obj
            for key, obj in stored.items()
            if obj is None or uid_of(obj) != uid_of(objs[key] or {}) or not node_name_of(obj)
        }
        if not differ:
            return
        rvs = [int(obj["metadata"].get("resourceVersion") or 0) for obj in differ.values() if obj]
        self._informer_reach(max(rvs, default=0))
        lost = [
            key
            for key, obj in differ.items()
            if obj is not None
            and not node_name_of(obj)
            and node_name_of(self.informer.get("Pod", key) or {})
        ]
        if lost:
            log.warning(
                "%s: %d popped pods bound in this worker's view are pending in the store "
                "(e.g. %s): the view holds bindings Redis lost; relisting",
                self.name,
                len(lost),
                lost[0],
            )
            self.informer.relist()
        objs.update(differ)

    def _prepare(self, queued: QueuedPod, pod: Pod | None) -> Attempt | None:
        now = self.clock.now_ms()
        if pod is None:
            self.queue.delete([queued.key], now_ms=now, uids=[queued.uid])
            return None
        if pod.spec.node_name:
            self.queue.done(queued.key, epoch=queued.epoch)
            self.queue.forget([queued.key])
            return None
        fw = self.profiles.for_pod(pod)
        if fw is None:
            self.queue.delete([queued.key], now_ms=now, uids=[queued.uid])
            return None
        return Attempt(queued, pod, fw, now)

    def _decide(self, attempt: Attempt) -> bool:
        """Run the scheduling algorithm and assume the result locally; a pod that does
        not fit gets PostFilter (preemption) and goes back to the queue."""
        failure = self._place_safely(attempt)
        if failure is None:
            return True
        if isinstance(failure, FitError):
            if attempt.framework.post_filter_plugins and not self.view.holds_every_pod:
                self.view.hold_every_pod(f"pod {attempt.pod.key} may preempt")
            victims = self._post_filter(attempt, failure)
            if victims and self.writer.deleting(victims):
                self._hold_preemptor(attempt, failure, victims)
                return False
        self._fail_member(attempt, failure)
        return False

    def _hold_preemptor(self, attempt: Attempt, failure: FitError, victims: Sequence[str]) -> None:
        """kube's async preemption keeps a preemptor out of activeQ (DefaultPreemption's
        PreEnqueue) while its victims' deletions are under way: tried again before they
        are done, it finds its node still full and preempts elsewhere. Here the worker
        keeps the pod leased (no other worker can pop it) and hands it back with its
        failure once the writer's deletions are answered and the ledger has released the
        victims (their deletions, handled meanwhile, made it a move request: it goes to
        backoffQ or activeQ, not the unschedulable set), or at half its lease at the
        latest: half the lease from when it was taken up, not from now (a slow batch
        must not hold it past its lease: the reclaim would requeue it meanwhile)."""
        deadline = attempt.prepared_ms + self.queue.config.lease_ms // 2
        self._held_preemptors.append((attempt, failure, tuple(victims), deadline))

    def _release_held_preemptors(self) -> None:
        if not self._held_preemptors:
            return
        now = self.clock.now_ms()
        asked = [v for _, _, victims, deadline in self._held_preemptors if now < deadline
                 for v in victims]  # fmt: skip
        in_ledger = self.ledger.pod_nodes(asked) if asked else {}
        still = []
        for held in self._held_preemptors:
            attempt, failure, victims, deadline = held
            waiting = self.writer.deleting(victims) or any(v in in_ledger for v in victims)
            if now < deadline and waiting:
                still.append(held)
                continue
            if waiting:
                log.info(
                    "preemptor %s back to the queue at half its lease, its victims' "
                    "deletions not done",
                    attempt.queued.key,
                )
            self._fail_member(attempt, failure)
        self._held_preemptors = still

    def _place(self, attempt: Attempt) -> Outcome:
        """Run the scheduling algorithm and the Reserve plugins, and assume the result
        locally: None, or why not (a FitError, or an error's message and the node its
        Reserve plugins ran for). The caller handles the failure."""
        attempt.tries += 1
        attempt.state = CycleState()
        fw, pod = attempt.framework, attempt.pod
        try:
            # schedule_pod, reusing equal pods' filter/score answers (same result).
            result = schedule_pod_batched(fw, attempt.state, pod, self.snapshot)
        except FitError as err:
            return err
        except SchedulingError as err:
            return (str(err), "")
        status = fw.run_reserve_plugins_reserve(attempt.state, pod, result.suggested_host)
        if not status.is_success():
            return (status.message(), result.suggested_host)
        attempt.node = result.suggested_host
        attempt.info = PodInfo.of(pod)
        self.snapshot.add_pod(pod, attempt.node, info=attempt.info)
        self.snapshot.add_usage(result.node_index, attempt.info)
        return None

    # ------------------------------------------------------------------ gangs
    def _gangs(self, attempts: list[Attempt]) -> tuple[list[Attempt], list[GangPlan]]:
        """Split a pop batch into pods decided alone and gangs decided whole. A member of a
        group with no PodGroup (deleted since its members were released) or whose group
        already has its minimum placed (an admitted gang's extra or replacement) is
        decided alone."""
        by_group: dict[str, list[Attempt]] = {}
        singles: list[Attempt] = []
        for attempt in attempts:
            name = group_of(attempt.pod)
            if name:
                by_group.setdefault(name, []).append(attempt)
            else:
                singles.append(attempt)
        plans: list[GangPlan] = []
        if not by_group:
            return singles, plans
        # The queue's minimums, not this worker's PodGroup lister: the handlers (maybe
        # another worker's) released the gang by them, and this informer may lag.
        minimums, member_lists = self.queue.gang_state(list(by_group))
        others = {
            key: [k for k in member_lists[key] if k not in {a.pod.key for a in members}]
            for key, members in by_group.items()
        }
        held = self.ledger.pod_nodes([k for keys in others.values() for k in keys])
        for key, members in by_group.items():
            minimum = minimums.get(key)
            if minimum is None:  # its PodGroup is gone: the members are decided alone
                singles += members
                continue
            placed = sum(1 for k in others[key] if k in held)
            plan = GangPlan(key, minimum, members, placed)
            if plan.need == 0:
                singles += members
            else:
                plans.append(plan)
        return singles, plans

    def _place_safely(self, attempt: Attempt) -> Outcome:
        """A plugin that raises fails this pod's attempt (backoff), not the worker."""
        try:
            return self._place(attempt)
        except redis.RedisError:
            raise
        except Exception as exc:
            log.exception("scheduling %s raised", attempt.pod.key)
            return (f"internal error: {exc}", "")

    def _schedule_gangs(self, plans: list[GangPlan], *, depends: bool) -> None:
        """One scheduling cycle per gang: every member placed on the snapshot in order
        (each sees its siblings' assumptions, and the earlier gangs'), then the minimum of
        each gang that fits reserved all-or-nothing, several gangs in one ledger call
        (each one a group: a refused gang leaves no trace for the next). A gang that does
        not fit, or is refused too often, fails as a unit with nothing held. Members
        beyond the minimum are reserved like single pods once their gang is admitted."""
        # Seconds each gang's cycle took so far: its own placements and its share of the
        # reservation calls (the podgroup attempt duration, per gang as upstream's).
        spent = {plan.key: 0.0 for plan in plans}
        for plan in plans:
            for attempt in plan.members:
                attempt.gang = plan.key
        pending = plans
        for _ in range(self.config.max_reserve_attempts):
            placed: list[tuple[GangPlan, list[Outcome], list[Attempt]]] = []
            for plan in pending:
                began = time.perf_counter()
                outcomes = [self._place_safely(a) for a in plan.members]
                fit = [a for a, o in zip(plan.members, outcomes, strict=True) if o is None]
                if len(fit) < plan.need:
                    for attempt in fit:
                        self._undo_reserve(attempt)
                    self._fail_gang(plan, outcomes, began - spent[plan.key])
                else:
                    spent[plan.key] += time.perf_counter() - began
                    placed.append((plan, outcomes, fit))
            refused: list[tuple[GangPlan, list[Outcome], list[Attempt]]] = []
            for chunk in _chunks_of_decisions(placed, MAX_BATCH):
                refused += self._reserve_gangs(chunk, spent, depends=depends)
            if not refused:
                return
            pending = [plan for plan, _, _ in refused]
            self.view.refresh_from_ledger()
            if depends:
                self.view.sync_pod_lists()
        for plan in pending:
            message = f"gang {plan.key}: reservation conflicts"
            for attempt in plan.members:
                self._fail(attempt, message=message, error=True)
            self._gang_outcome("error", time.perf_counter() - spent[plan.key])

    def _reserve_gangs(
        self,
        placed: list[tuple[GangPlan, list[Outcome], list[Attempt]]],
        spent: dict[str, float],
        *,
        depends: bool,
    ) -> list[tuple[GangPlan, list[Outcome], list[Attempt]]]:
        """Reserve the minimum of each placed gang, in one call; returns the gangs the
        ledger refused (to be placed again), having undone them."""
        began = time.perf_counter()
        required = [fit[: plan.need] for plan, _, fit in placed]
        batch = [a for part in required for a in part]
        results = self.ledger.reserve_batch(
            self._decisions(batch), groups=[len(part) for part in required]
        )
        pause_at("reserve", [a.pod.key for a in batch])
        share = (time.perf_counter() - began) / len(placed)
        for plan, _, _ in placed:
            spent[plan.key] += share
        refused = []
        at = 0
        for (plan, outcomes, fit), part in zip(placed, required, strict=True):
            mine = results[at : at + len(part)]
            at += len(part)
            if all(isinstance(r, Reserved) for r in mine):
                for attempt in part:
                    attempt.reserved = True
                for attempt, outcome in zip(plan.members, outcomes, strict=True):
                    if outcome is not None:  # an extra that does not fit
                        self._fail_member(attempt, outcome)
                self._gang_outcome("scheduled", time.perf_counter() - spent[plan.key])
                self._bind(part)
                if len(fit) > len(part):
                    self._reserve(fit[len(part) :], depends=depends)
                continue
            for attempt in fit:
                self._undo_reserve(attempt)
            for attempt, outcome in zip(plan.members, outcomes, strict=True):
                if isinstance(outcome, tuple) and outcome[1]:
                    fw = attempt.framework
                    fw.run_reserve_plugins_unreserve(attempt.state, attempt.pod, outcome[1])
            final = next((r for r in mine if isinstance(r, Stale | Invalid)), None)
            if final is not None:
                # A member's lease is gone or its object cannot be reserved: retrying the
                # reservation cannot help; the gang goes back to the queue as a unit.
                message = f"gang {plan.key}: a member cannot be reserved: {final.reason}"
                stale = {a.pod.key for a, r in zip(part, mine, strict=True) if isinstance(r, Stale)}
                for attempt in plan.members:
                    if attempt.pod.key in stale:
                        log.info("stale decision for %s", attempt.pod.key)
                    else:
                        self._fail(attempt, message=message, error=True)
                self._gang_outcome("error", time.perf_counter() - spent[plan.key])
                continue
            # One refused gang is one conflict; every refusal brings its node's state.
            states = [r for r in mine if isinstance(r, Rejected) and r.node_state]
            for i, result in enumerate(states):
                self._note_conflict(result, count=i == 0)
            refused.append((plan, outcomes, fit))
        return refused

    def _fail_member(self, attempt: Attempt, outcome: FitError | tuple[str, str]) -> None:
        if isinstance(outcome, FitError):
            plugins = sorted(outcome.diagnosis.unschedulable_plugins)
            self._fail(attempt, plugins=plugins, message=str(outcome), error=False)
        else:
            self._fail(attempt, message=outcome[0], error=True, reserved_on=outcome[1])

    @staticmethod
    def _gang_outcome(result: str, started: float) -> None:
        metrics.podgroup_attempts.labels(result).inc()
        metrics.podgroup_attempt_duration.labels(result).observe(time.perf_counter() - started)

    def _fail_gang(
        self,
        plan: GangPlan,
        outcomes: Sequence[Outcome],
        started: float,
    ) -> None:
        """The gang does not fit: every member back to the queue together, with one
        message, the rejecting plugins of all members (an event that may help one moves
        it, and the next pop takes its siblings too). Preemption first, for the whole gang
        or not at all."""
        members: list[Attempt] = plan.members
        unfit = [(a, o) for a, o in zip(members, outcomes, strict=True) if isinstance(o, FitError)]
        plugins = sorted({p for _, o in unfit for p in o.diagnosis.unschedulable_plugins})
        never = never_fits(self.snapshot, [a.pod for a in members], plan.need)
        if unfit and not never:
            self._preempt_gang(plan, unfit)
        message = gang_message(plan, outcomes, never)
        error = not unfit
        for attempt, outcome in zip(members, outcomes, strict=True):
            reserved_on = outcome[1] if isinstance(outcome, tuple) else ""
            self._fail(
                attempt, message=message, plugins=plugins, error=error, reserved_on=reserved_on
            )
        self._gang_outcome("unschedulable" if unfit else "error", started)

    def _preempt_gang(self, plan: GangPlan, unfit: list[tuple[Attempt, FitError]]) -> None:
        """kube's PostFilter for a gang: one dry run for every member that does not fit;
        victims are deleted and members nominated only if the whole gang then fits."""
        evictions = plan_gang_preemption(
            self.snapshot, [(a.framework, a.state, a.pod, err) for a, err in unfit]
        )
        metrics.preemption_attempts.inc()
        if not evictions:
            log.debug("no preemption for gang %s", plan.key)
            return
        for e in evictions:
            if carry_out(self.writer, e.pod, e.node, e.victims, e.clear):
                self.view.nominate(e.pod, e.node)
        log.info(
            "preempting %d pod(s) for gang %s",
            sum(len(e.victims) for e in evictions),
            plan.key,
        )

    def _post_filter(self, attempt: Attempt, err: FitError) -> tuple[str, ...]:
        """PostFilter (preemption); the pod itself still goes back to the queue (a plugin
        that raises is logged: the pod fails as it would without preemption). Returns
        the keys of the victims preempted for it."""
        fw = attempt.framework
        if not fw.post_filter_plugins:
            return ()
        metrics.preemption_attempts.inc()
        try:
            node, victims, attempt.said = apply_post_filter(
                fw,
                attempt.state,
                attempt.pod,
                err,
                snapshot=self.snapshot,
                writer=self.writer,
                seen=attempt.obj,
            )
        except redis.RedisError:
            raise
        except Exception:
            log.exception("preemption for %s raised", attempt.pod.key)
            return ()
        if node:
            # kube's AddNominatedPod after a PostFilter: the rest of this batch must see
            # the nomination (and not pick the same node and victims) before the status
            # update's event comes back through the informer.
            self.view.nominate(attempt.pod, node)
        return victims

    def _undo_reserve(self, attempt: Attempt) -> None:
        """The ledger refused (or the view moved under) a decision whose Reserve plugins
        ran: Unreserve them (kube runs Unreserve on every failure after Reserve), then
        forget the local assumption."""
        if attempt.node:
            fw = attempt.framework
            fw.run_reserve_plugins_unreserve(attempt.state, attempt.pod, attempt.node)
        self._unassume(attempt)

    def _unassume(self, attempt: Attempt) -> None:
        if not attempt.node or attempt.info is None:
            return
        index = self.snapshot.get_index(attempt.node)
        self.snapshot.remove_pod(attempt.pod.key)
        if index is not None:
            self.snapshot.add_usage(index, attempt.info, -1)
        attempt.node = ""

    def _decisions(self, batch: Sequence[Attempt]) -> list[Decision]:
        """The batch's decisions, in order. Each expects the generations its data reflects
        (:meth:`ClusterView.seen_generation`) plus the bumps the earlier decisions of the
        batch make when reserved: +1 per watched domain of their node, +1 anti-affinity
        per own anti-affinity key of theirs. Should an earlier one be refused, the later
        ones that counted it are refused too and decided again."""
        bumps: Counter[str] = Counter()
        anti_bumps: Counter[str] = Counter()
        decisions = []
        # even_placement: the view's pod count of each node without this batch's own
        # decisions (they are assumed in the snapshot already), which the ledger has
        # unless another worker put pods there since. Left out on a pod's last try, so
        # that evenness never fails a pod.
        even = self._even_checks()
        batch_on_node = Counter(a.node for a in batch) if even else Counter()
        pods_col = self.snapshot.table.requested[:, PODS_COL]
        for attempt in batch:
            assert attempt.info is not None
            node = attempt.node
            seen_pods = -1
            index = self.snapshot.get_index(node) if even else None
            if index is not None and attempt.tries < self.config.max_reserve_attempts:
                seen_pods = max(0, int(pods_col[index]) - batch_on_node[node])
            domains, by_key = self.view.node_topology(node)
            checks: dict[str, int] = {}
            if constrained(attempt.pod):
                for key in constraint_topology_keys(attempt.pod):
                    if key in by_key:
                        domain = f"{key}={by_key[key]}"
                        checks[domain] = self.view.seen_generation(node, domain) + bumps[domain]
            anti_keys = sorted({t.topology_key for t in attempt.info.required_anti_affinity_terms})
            decisions.append(
                Decision(
                    pod_key=attempt.pod.key,
                    uid=attempt.pod.metadata.uid,
                    epoch=attempt.queued.epoch,
                    node=node,
                    requests=attempt.info.requests,
                    host_ports=list(attempt.info.host_ports),
                    domain_checks=checks,
                    anti_affinity_gen=self.view.seen_anti_affinity_gen(node)
                    + (sum(anti_bumps[d] for d in domains) if anti_bumps else 0),
                    anti_affinity_keys=anti_keys,
                    nonzero=(attempt.info.nonzero_cpu, attempt.info.nonzero_memory),
                    seen_pods=seen_pods,
                )
            )
            if self._watched:
                for key, value in by_key.items():
                    if key in self._watched:
                        bumps[f"{key}={value}"] += 1
            for key in anti_keys:
                if key in by_key:
                    anti_bumps[f"{key}={by_key[key]}"] += 1
        return decisions

    def _reserve(self, batch: list[Attempt], *, depends: bool = False) -> None:
        """Reserve the batch's decisions in one call; refused ones are decided again on a
        refreshed view (synced pod lists too when ``depends``) a bounded number of times."""
        while batch:
            results = self.ledger.reserve_batch(self._decisions(batch))
            pause_at("reserve", [a.pod.key for a in batch])
            reserved: list[Attempt] = []
            retry: list[Attempt] = []
            for attempt, result in zip(batch, results, strict=True):
                if isinstance(result, Reserved):
                    attempt.reserved = True
                    reserved.append(attempt)
                elif isinstance(result, Invalid):
                    self._fail(
                        attempt, message=result.reason, error=False, reserved_on=attempt.node
                    )
                elif not isinstance(result, Rejected):
                    # Stale: the lease expired and the pod belongs to someone else now.
                    self._undo_reserve(attempt)
                    log.info("stale decision for %s: %s", attempt.pod.key, result)
                else:
                    if attempt.tries < self.config.max_reserve_attempts:
                        self._undo_reserve(attempt)
                        retry.append(attempt)
                    else:
                        self._fail(
                            attempt,
                            message=f"reservation conflicts: {result.reason}",
                            error=True,
                            reserved_on=attempt.node,
                        )
                    # After the pod left the view: the node's state is the ledger's.
                    self._note_conflict(result)
            self._bind(reserved)
            batch = []
            if retry:
                self.view.refresh_from_ledger()
                if depends:
                    self.view.sync_pod_lists()
                batch = [a for a in retry if self._decide(a)]

    def _note_conflict(self, result: Rejected, *, count: bool = True) -> None:
        """Count a refused reservation and take the node's current state from it."""
        if count:
            self.conflicts += 1
            reason = metrics.conflict_reason(result.reason)
            metrics.series(metrics.reserve_conflicts, reason).inc()
        if result.node_state is not None:
            self.view.apply_states({result.node_state.name: result.node_state})

    def _bind(self, reserved: list[Attempt]) -> None:
        if not reserved:
            return
        bindings: list[Binding] = []
        scheduled: Counter[str] = Counter()  # per profile: one counter update per batch
        for attempt in reserved:
            fw = attempt.framework
            status, waits = fw.run_permit_plugins(attempt.state, attempt.pod, attempt.node)
            if not status.is_success() and not status.is_wait():
                self._fail(
                    attempt,
                    message=status.message(),
                    error=False,
                    reserved_on=attempt.node,
                    reserved_in_ledger=True,
                )
                continue
            now = self.clock.now_ms()
            deadlines = {p: now + int(timeout * 1000) for p, timeout in waits.items()}
            bindings.append(
                Binding(
                    pod_key=attempt.pod.key,
                    uid=attempt.pod.metadata.uid,
                    node=attempt.node,
                    profile=fw.profile_name,
                    cycle=attempt.queued.cycle,
                    epoch=attempt.queued.epoch,
                    token=str(attempt.queued.epoch),
                    initial_attempt_ms=attempt.queued.initial_attempt_ms,
                    attempts=attempt.queued.attempts,
                    # Wait: the binder holds the pod until the plugins allow it (WaitOnPermit),
                    # each plugin until its own deadline.
                    permit_plugins=tuple(sorted(waits)),
                    permit_deadline_ms=max(deadlines.values(), default=0),
                    permit_deadlines_ms=tuple(deadlines[p] for p in sorted(waits)),
                    # The binding cycle goes on with this cycle's state (kube passes it on);
                    # a profile bound by one store call has no plugin to read it.
                    state={} if fw.batch_bindable(attempt.state) else attempt.state.to_wire(),
                )
            )
            _, duration = metrics.attempt_series("scheduled", fw.profile_name)
            duration.observe(time.perf_counter() - attempt.started)
            scheduled[fw.profile_name] += 1
        for profile, count in scheduled.items():
            metrics.attempt_series("scheduled", profile)[0].inc(count)
        if bindings and not self._pending_bindings:
            self._pending_since = time.monotonic()
        self._pending_bindings.extend(bindings)

    # ------------------------------------------------------------------ the one failure path
    def _fail(
        self,
        attempt: Attempt,
        *,
        message: str,
        error: bool,
        plugins: Sequence[str] = (),
        reserved_on: str = "",
        reserved_in_ledger: bool = False,
    ) -> None:
        """kube's FailureHandler (:mod:`distsched.framework.failure`, which the binding
        cycle shares): Unreserve the Reserve plugins that ran for ``reserved_on``, forget
        the ledger's reservation (``reserved_in_ledger``), back to the queue, the explain
        record and the pod's condition. The worker first forgets the pod in its view."""
        self._unassume(attempt)
        queued = attempt.queued
        failure = Failure(
            attempt.pod.ref(),
            queued.epoch,
            attempt.framework.profile_name,
            message,
            plugins=tuple(plugins),
            error=error,
            started=attempt.started,
            reserved_on=reserved_on,
            token=str(queued.epoch) if reserved_in_ledger else "",
            parsed=attempt.pod,
            state=attempt.state,
            said=attempt.said,
        )
        self.failures.handle([failure])

    def _fail_unparsed(self, queued: QueuedPod, obj: Obj, exc: ValueError) -> None:
        """A popped pod that does not parse (e.g. requests beyond what the ledger can
        account, in an object that reached the store without ``apply``): unschedulable
        with the reason, until an update of the pod (or a move request) retries it."""
        reason = f"{exc.field}: {exc.reason}" if isinstance(exc, ManifestError) else str(exc)
        version = str((obj.get("metadata") or {}).get("resourceVersion", ""))
        if self._unparsed.get(queued.key) != version:  # once per version, not per attempt
            if len(self._unparsed) >= 10_000:
                self._unparsed.clear()
            self._unparsed[queued.key] = version
            log.warning("pod %s cannot be scheduled: %s", queued.key, reason)
        profile = (obj.get("spec") or {}).get("schedulerName") or DEFAULT_SCHEDULER_NAME
        failure = Failure(
            PodRef(queued.key, queued.uid),
            queued.epoch,
            str(profile),
            f"invalid pod: {reason}",
            error=False,
            started=time.perf_counter(),
        )
        self.failures.handle([failure])
