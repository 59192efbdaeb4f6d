"""`distsched worker`: one scheduling worker process, until SIGTERM/SIGINT.

Redis outages are waited out with backoff and logged, from the start on: a worker started
while Redis is down waits for it. The worker never exits because Redis went away, and
loses no pod: what it had popped and not attempted it hands back once Redis answers, and
what it had reserved comes back through the assume-deadline reaper. When Redis comes back
without its data, the worker sets itself up again (SchedulingWorker._notice_reset).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import uuid
from dataclasses import replace

import redis

from distsched import gc_tuning, metrics
from distsched.cache.ledger import LedgerConfig
from distsched.connection import Backoff, RedisOptions, infrastructure_error
from distsched.framework.profile import ConfigError, build_profiles, load_config
from distsched.keys import Keys
from distsched.kube.mode import KubeMode
from distsched.queue_types import QueueConfig
from distsched.role_start import start_role
from distsched.store import Store
from distsched.workers.schedule_one import SchedulingWorker, WorkerConfig

log = logging.getLogger(__name__)


KUBE_POP_LINGER_MS = 80


def pop_linger(kube: KubeMode | None) -> int:
    """The default pop linger (ms): against an API server pods arrive as they are created,
    a few at a time, and a turn's fixed costs are shared only if they gather; standalone,
    pods mostly come in bulk (apply, bench) and none is held back."""
    return KUBE_POP_LINGER_MS if kube is not None else 0


def run_worker(
    options: RedisOptions,
    keys: Keys,
    *,
    config_path: str | None = None,
    batch: int = 256,
    batch_budget_ms: int = 250,
    bind_linger_ms: int = 10,
    metrics_port: int = 0,
    metrics_addr: str = "127.0.0.1",
    stop: threading.Event | None = None,
    lease_ms: int | None = None,
    assume_ttl_ms: int | None = None,
    kube: KubeMode | None = None,
    even_placement: bool = True,
    leave_others_pods: bool = True,
    pop_linger_ms: int | None = None,
) -> None:
    try:
        scheduler_config = load_config(config_path)
        profiles = build_profiles(scheduler_config)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    stop, client = start_role(options, stop)
    if metrics_port:
        metrics.serve(metrics_port, addr=metrics_addr)
        metrics.register_queue_collector(client, keys)

    name = f"worker-{uuid.uuid4().hex[:8]}"
    # DISTSCHED_POP_FROM_BACKOFF=0 is kube's SchedulerPopFromBackoffQ=false.
    queue_config = QueueConfig(
        pop_from_backoff=os.environ.get("DISTSCHED_POP_FROM_BACKOFF", "1") != "0"
    )
    if lease_ms:
        queue_config = replace(queue_config, lease_ms=lease_ms)

    def build() -> SchedulingWorker:
        writer = None
        if kube is not None:  # a real cluster: write to its API server
            scheduler_name = next(iter(profiles), "default-scheduler")
            writer = kube.writer(Store(client, keys), scheduler_name=scheduler_name)
        return SchedulingWorker(
            client,
            keys,
            profiles=profiles,
            name=name,
            writer=writer,
            # DISTSCHED_QUEUEING_HINTS=0 is kube's SchedulerQueueingHints=false: seed rules.
            config=WorkerConfig(
                batch=batch,
                batch_budget_s=batch_budget_ms / 1000,
                bind_linger_s=bind_linger_ms / 1000,
                queueing_hints=os.environ.get("DISTSCHED_QUEUEING_HINTS", "1") != "0",
                even_placement=even_placement,
                leave_others_pods=leave_others_pods,
                pop_linger_s=(pop_linger(kube) if pop_linger_ms is None else pop_linger_ms) / 1000,
            ),
            queue_config=queue_config,
            ledger_config=LedgerConfig(assume_ttl_ms=assume_ttl_ms) if assume_ttl_ms else None,
            scheduler_config=scheduler_config,
        )

    backoff = Backoff()
    worker: SchedulingWorker | None = None
    started = False
    settler = gc_tuning.Settler()
    log.info("%s scheduling for %s", name, ", ".join(profiles))
    while not stop.is_set():
        try:
            # Built and started in the loop: a worker started while Redis is down waits
            # for it like one that loses it later.
            if worker is None:
                worker = build()
            if not started:
                worker.start()
                started = True
                log.info("%s started", name)
                gc_tuning.freeze_initial_state()  # the initial list lives as long as we do
            worker.run_once()
            settler.settle()
            if backoff.failures:
                log.warning("%s: Redis is back", name)
                backoff.reset()
                worker.consumer.reread_pending()
        except Exception as exc:
            delay = backoff.next_delay()
            if infrastructure_error(exc):
                metrics.redis_retries.labels("worker").inc()
                log.warning("%s: Redis unavailable (%s); retrying in %.1fs", name, exc, delay)
            else:
                # Not a crash loop: what this turn had popped or reserved comes back
                # through the lease and assume-deadline reapers; wait a little, go on.
                log.exception("%s: unexpected error; going on in %.1fs", name, delay)
            stop.wait(delay)
    if worker is None:
        log.info("%s stopped before Redis answered", name)
        return
    try:
        worker.stop()
    except redis.RedisError:
        log.warning(
            "%s: Redis unavailable at stop; the reaper requeues its reserved pods", worker.name
        )
    log.info("%s stopped after scheduling %d pods", worker.name, worker.scheduled)
