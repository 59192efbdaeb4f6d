"""Every Prometheus metric of distsched, in one place (like kube-scheduler's metrics.go).

Names follow kube-scheduler's where one applies, under the single prefix ``distsched_``
(never doubled). Counters end in ``_total``, durations in ``_seconds``. Gauges that
describe shared state (pending pods per sub-queue, unschedulable pods per plugin,
dead-lettered pods) are read from Redis at scrape time by :class:`QueueCollector`, so
every replica reports the same cluster-wide figure (aggregate them with ``max``, not
``sum``). docs/operating.md lists every series with its labels.
"""

from __future__ import annotations

import functools
import logging
from collections import Counter as Tally
from collections.abc import Iterable

import redis
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    start_http_server,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from distsched.explain_record import decode_explanations, queue_read_explanations
from distsched.keys import Keys
from distsched.queue_types import DEAD, SUB_QUEUES, decode_info, split_plugins
from distsched.redis_text import as_text

log = logging.getLogger(__name__)

# No <name>_created series: kube-scheduler has none, and they double the exposition.
disable_created_metrics()

PREFIX = "distsched"
REGISTRY = CollectorRegistry(auto_describe=True)

# Scheduling attempts take 0.1 ms (batch of simple pods) to seconds (preemption on 5k
# nodes), so buckets start at 100 µs and grow by 2x up to ~3 s.
ATTEMPT_BUCKETS = tuple(0.0001 * 2**i for i in range(16))
# Created → bound spans milliseconds (idle cluster) to minutes (unschedulable for a while).
SLI_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900)
# Extension points are short: 10 µs .. 0.3 s.
EXTENSION_BUCKETS = tuple(0.00001 * 2**i for i in range(16))

schedule_attempts = Counter(
    "schedule_attempts",
    "Scheduling attempts by result (scheduled, unschedulable, error).",
    ["result", "profile"],
    namespace=PREFIX,
    registry=REGISTRY,
)
scheduling_attempt_duration = Histogram(
    "scheduling_attempt_duration_seconds",
    "Scheduling attempt latency (algorithm + reserve), by result.",
    ["result", "profile"],
    namespace=PREFIX,
    buckets=ATTEMPT_BUCKETS,
    registry=REGISTRY,
)
# queue is active, backoff, gated, unschedulable, or active_or_backoff for a move request
# (one script moves each pod to whichever its backoff allows and returns only the total).
# The queue implementations count it themselves, on every move they make (count_incoming).
queue_incoming_pods = Counter(
    "queue_incoming_pods",
    "Pods added to a scheduling sub-queue, by sub-queue and the event that moved them.",
    ["queue", "event"],
    namespace=PREFIX,
    registry=REGISTRY,
)
pod_scheduling_sli_duration = Histogram(
    "pod_scheduling_sli_duration_seconds",
    "From the pod's first entry into the queue to its binding, by attempts.",
    ["attempts"],
    namespace=PREFIX,
    buckets=SLI_BUCKETS,
    registry=REGISTRY,
)
framework_extension_point_duration = Histogram(
    "framework_extension_point_duration_seconds",
    "Latency of running all plugins of one extension point.",
    ["extension_point", "status", "profile"],
    namespace=PREFIX,
    buckets=EXTENSION_BUCKETS,
    registry=REGISTRY,
)
preemption_attempts = Counter(
    "preemption_attempts",
    "Preemption attempts (PostFilter runs).",
    namespace=PREFIX,
    registry=REGISTRY,
)
preemption_victims = Histogram(
    "preemption_victims",
    "Number of victims chosen by one successful preemption.",
    namespace=PREFIX,
    buckets=(1, 2, 4, 8, 16, 32, 64),
    registry=REGISTRY,
)
podgroup_attempts = Counter(
    "podgroup_scheduling_attempts",
    "Gang scheduling cycles, by result (scheduled, unschedulable, error).",
    ["result"],
    namespace=PREFIX,
    registry=REGISTRY,
)
podgroup_attempt_duration = Histogram(
    "podgroup_scheduling_attempt_duration_seconds",
    "Latency of one gang's scheduling cycle (all members placed and reserved, or failed).",
    ["result"],
    namespace=PREFIX,
    buckets=SLI_BUCKETS,
    registry=REGISTRY,
)
CONFLICT_REASONS = (
    "resources",
    "ports",
    "topology",
    "anti-affinity",
    "usage",
    "node-gone",
    "holder",
    "gang",
)


def conflict_reason(reason: str) -> str:
    """The bounded ``reason`` label of reserve_conflicts for a ledger rejection message."""
    if reason.startswith("Insufficient"):
        return "resources"
    if "free ports" in reason:
        return "ports"
    if reason.startswith("topology domain"):
        return "topology"
    if reason.startswith("anti-affinity"):
        return "anti-affinity"
    if reason.startswith("node usage changed"):
        return "usage"
    if reason.startswith("gang member"):
        return "gang"
    if reason.startswith("node(s) not found"):
        return "node-gone"
    return "holder"  # a previous pod of that name still holds a reservation


reserve_conflicts = Counter(
    "reserve_conflicts",
    "Optimistic reservations refused by the ledger (another worker won the node).",
    ["reason"],
    namespace=PREFIX,
    registry=REGISTRY,
)
binding_duration = Histogram(
    "binding_duration_seconds",
    "Binding cycle latency (PreBind + Bind + PostBind) per pod.",
    ["result"],
    namespace=PREFIX,
    buckets=ATTEMPT_BUCKETS,
    registry=REGISTRY,
)
bindings = Counter(
    "bindings",
    "Binding results: bound, duplicate (already bound to that node), stale (the reservation "
    "was gone: reaped or released, nothing bound), failed.",
    ["result"],
    namespace=PREFIX,
    registry=REGISTRY,
)
lease_reclaims = Counter(
    "lease_reclaims",
    "Pods returned to the queue by the reaper: expired inflight leases and assumed pods.",
    ["kind"],
    namespace=PREFIX,
    registry=REGISTRY,
)
redis_retries = Counter(
    "redis_retries",
    "Redis connection failures that a process waited out and retried.",
    ["role"],
    namespace=PREFIX,
    registry=REGISTRY,
)
# kind: reservation (a ledger record of a deleted pod), queue-orphan / queue-bound (a queue
# record of a deleted / bound pod), queue-lost (a pod in no sub-queue, put back), explain.
consistency_repairs = Counter(
    "consistency_repairs",
    "Records the consistency sweep found out of step with the store and repaired.",
    ["kind"],
    namespace=PREFIX,
    registry=REGISTRY,
)
bridge_mirrored = Counter(
    "bridge_mirrored_objects",
    "Objects the API bridge wrote into the store (changed ones only), by kind and operation.",
    ["kind", "op"],
    namespace=PREFIX,
    registry=REGISTRY,
)
bridge_lists = Counter(
    "bridge_lists",
    "Full lists of a kind the API bridge made: at its start, after 410 Gone, after a store reset.",
    ["kind"],
    namespace=PREFIX,
    registry=REGISTRY,
)
bridge_watch_errors = Counter(
    "bridge_watch_errors",
    "Watches of the API server that failed (and were retried with backoff), by kind.",
    ["kind"],
    namespace=PREFIX,
    registry=REGISTRY,
)
# generation: "0", "1" or "2" (2: a full collection); distsched.gc_tuning times them.
gc_seconds = Counter(
    "gc_seconds",
    "CPU seconds the process spent in Python's garbage collector, by generation collected.",
    ["generation"],
    namespace=PREFIX,
    registry=REGISTRY,
)
# phase: a part of the scheduling worker's turn (distsched.workers.phases lists them).
worker_phase_cpu = Counter(
    "worker_phase_cpu_seconds",
    "CPU seconds of the scheduling worker's loop (its thread's clock), by phase of a turn.",
    ["phase"],
    namespace=PREFIX,
    registry=REGISTRY,
)
replica_ack_failures = Counter(
    "replica_ack_failures",
    "Acknowledged writes that too few replicas confirmed in time (reported as failures).",
    namespace=PREFIX,
    registry=REGISTRY,
)


@functools.cache
def attempt_series(result: str, profile: str) -> tuple[Counter, Histogram]:
    """schedule_attempts and scheduling_attempt_duration_seconds of one (result, profile),
    bound once: ``labels(...)`` validates the values and takes a lock on every call, and
    the worker records every pod's attempt. Few series: three results per profile."""
    return (
        schedule_attempts.labels(result, profile),
        scheduling_attempt_duration.labels(result, profile),
    )


@functools.cache
def series(metric: Counter, *labels: str) -> Counter:
    """``metric.labels(*labels)`` bound once, for counters with few label values that are
    updated per pod or per batch on a hot path."""
    return metric.labels(*labels)


ACTIVE_OR_BACKOFF = "active_or_backoff"
"""The ``queue`` label of queue_incoming_pods_total for the pods a move request moved."""


def count_incoming(queue: str, event: str, pods: int = 1) -> None:
    """Count ``pods`` that entered sub-queue ``queue`` because of ``event`` (a label of
    :mod:`distsched.framework.events`): the queue's own account of its moves."""
    if pods:
        series(queue_incoming_pods, queue, event).inc(pods)


# Series that exist from the start, so that rate() and alerts see a 0 before the first event.
for _kind in ("inflight", "assumed"):
    lease_reclaims.labels(_kind)
for _result in ("bound", "duplicate", "stale", "failed"):
    bindings.labels(_result)


class QueueCollector(Collector):
    """Reads cluster-wide queue gauges from Redis when Prometheus scrapes.

    unschedulable_pods costs one HMGET of the unschedulable pods' queue info and
    diagnoses per scrape: O(unschedulable pods).
    """

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self._client = client
        self._keys = keys

    def collect(self) -> Iterable[GaugeMetricFamily | CounterMetricFamily]:
        pending = GaugeMetricFamily(
            f"{PREFIX}_pending_pods", "Pods waiting in each scheduling sub-queue.", labels=["queue"]
        )
        dead = GaugeMetricFamily(f"{PREFIX}_dead_lettered_pods", "Pods in the dead-letter set.")
        unschedulable = GaugeMetricFamily(
            f"{PREFIX}_unschedulable_pods",
            "Pods in the unschedulable set, counted once per plugin that rejected them.",
            labels=["plugin", "profile"],
        )
        added = CounterMetricFamily(
            f"{PREFIX}_queue_store_added_pods",
            "Pods the store's create script put straight into activeQ (cluster-wide): such "
            "a pending pod never reaches the workers' handlers, so "
            "queue_incoming_pods_total{event='PodAdd'} misses it.",
        )
        try:
            counts, per_plugin = self._read()
            raw_added = self._client.hgetall(self._keys.added)
        except redis.RedisError as exc:
            log.warning("metrics: cannot read queue sizes from Redis: %s", exc)
            return
        for name in SUB_QUEUES:
            if name != DEAD:
                pending.add_metric([name], counts[name])
        dead.add_metric([], counts[DEAD])
        for (plugin, profile), count in sorted(per_plugin.items()):
            unschedulable.add_metric([plugin, profile], count)
        added.add_metric([], int(raw_added.get(b"active", raw_added.get("active", 0))))
        yield pending
        yield dead
        yield unschedulable
        yield added

    def _read(self) -> tuple[dict[str, int], Tally[tuple[str, str]]]:
        keys = self._keys
        pipe = self._client.pipeline(transaction=False)
        for name in SUB_QUEUES:
            pipe.zcard(getattr(keys, name))
        pipe.zrange(keys.unschedulable, 0, -1)
        *sizes, members = pipe.execute()
        counts = dict(zip(SUB_QUEUES, sizes, strict=True))
        per_plugin: Tally[tuple[str, str]] = Tally()
        if not members:
            return counts, per_plugin
        pipe = self._client.pipeline(transaction=False)
        pipe.hmget(keys.info, members)
        queue_read_explanations(pipe, keys, members)
        infos, explain_raws = pipe.execute()
        explanations = decode_explanations(explain_raws)
        for member, info_raw, explanation in zip(members, infos, explanations, strict=True):
            if info_raw is None:
                continue  # left the queue since the ZRANGE
            plugins = split_plugins(decode_info(as_text(member), info_raw)["pl"])
            # The worker's record names the profile; a binder's or an older one may not.
            profile = explanation.profile if explanation is not None else ""
            for plugin in plugins:
                per_plugin[(plugin, profile)] += 1
        return counts, per_plugin


def serve(port: int, *, addr: str = "127.0.0.1") -> None:
    """Expose REGISTRY on http://addr:port/metrics (loopback unless told otherwise)."""
    start_http_server(port, addr=addr, registry=REGISTRY)
    log.info("metrics on http://%s:%d/metrics", addr, port)


def register_queue_collector(client: redis.Redis, keys: Keys) -> None:
    REGISTRY.register(QueueCollector(client, keys))
