"""`distsched binder --processes M`: a pool of rq SimpleWorkers that respawns the dead.

Each child runs an rq SimpleWorker (no fork per job) on the binding queue with the
msgpack serializer and a job class that runs only :data:`~distsched.binder.cycle.
JOB_FUNCTIONS`. The parent checks its children every :data:`CHECK_S` and starts a new
one in the slot of any that died (SIGKILL, OOM), backing off when a slot keeps dying
right after its start.

A child killed mid-job leaves its rq job in rq's StartedJobRegistry; rq would only notice
it at its next maintenance (10 minutes) and then fail it, since binding jobs carry no
retries. Nothing waits for that: the job's pods stay assumed in the ledger with the
deadline the claim renewed, and the assumed-pod reaper of the scheduling workers releases
and requeues them once it passes. Pods the job had already written to the store are
confirmed by the workers' handler of the bind event. Should rq ever run such a job again,
its claim finds the reservations gone or bound and it binds nothing.

Redis outages: a child waits for Redis like every role (:class:`BindingWorker`), from its
start on (rq's constructor talks to Redis, so it is made inside the retry), says so, and
stops at once on SIGTERM while Redis is unreachable.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import signal
import threading
import time
from multiprocessing.process import BaseProcess
from typing import Any

import redis
from rq import SimpleWorker

from distsched import gc_tuning, metrics
from distsched.binder.cycle import JOB_FUNCTIONS, BinderSettings, configure
from distsched.binder.jobs import bind_queue
from distsched.binder.safety import MsgpackSerializer, allow_list_job_class
from distsched.cache.ledger import LedgerConfig
from distsched.connection import RedisOptions, connect, infrastructure_error, retry_redis
from distsched.framework.profile import load_config
from distsched.keys import Keys
from distsched.kube.mode import KubeMode

log = logging.getLogger(__name__)

SHUTDOWN_GRACE_S = 5.0

CHECK_S = 0.2
QUICK_DEATH_S = 5.0
MAX_RESPAWN_DELAY_S = 10.0


class BindingWorker(SimpleWorker):
    """rq's SimpleWorker, with the outage handling every distsched role has.

    rq waits out a lost connection in its dequeue loop with messages of its own and a
    wait growing to 60 s; the first step of that loop is a heartbeat, so the heartbeat
    waits for Redis instead, as the other roles do: it says "Redis unavailable (...);
    retrying in Xs" and then "Redis is back", and counts
    ``redis_retries_total{role="binder"}``. A Redis back without its data has lost rq's
    registration of this worker: the heartbeat finds it gone and registers again."""

    # rq's own wait after a failed dequeue, before its loop reaches the heartbeat.
    max_connection_wait_time = 1.0

    def __init__(self, *args: Any, what: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.what = what
        self.stopping = False

    def request_stop(self, signum: Any, frame: Any) -> None:
        # rq sets _stop_requested only during a job; an idle worker just leaves its loop.
        self.stopping = True
        super().request_stop(signum, frame)

    def heartbeat(self, timeout: int | None = None, pipeline: Any = None) -> None:
        if pipeline is not None:  # part of rq's job bookkeeping: rq handles its errors
            super().heartbeat(timeout, pipeline)
            return
        registered = retry_redis(
            lambda: self._beat(timeout),
            what=self.what,
            role="binder",
            stop=lambda: self.stopping,
        )
        if registered is False:
            log.warning(
                "%s: Redis lost its data (rq's registration of this worker is gone); "
                "registering again",
                self.what,
            )
            self.connection.delete(self.key)  # the beat made a partial one
            self.register_birth()

    def _beat(self, timeout: int | None) -> bool:
        """rq's heartbeat in one round trip; whether the worker was still registered."""
        with self.connection.pipeline(transaction=False) as pipe:
            pipe.exists(self.key)
            super().heartbeat(timeout, pipeline=pipe)
            return bool(pipe.execute()[0])


def run_one_binder(
    options: RedisOptions,
    scheduler: str,
    metrics_port: int,
    addr: str,
    config_path: str | None,
    assume_ttl_ms: int,
    log_level: int,
    kube: KubeMode | None = None,
) -> None:
    """Body of one binder process."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent owns Ctrl-C
    logging.basicConfig(
        level=log_level,
        format="%(asctime)s %(levelname)s %(processName)s %(name)s: %(message)s",
    )
    keys = Keys(scheduler)
    configure(
        BinderSettings(
            config=load_config(config_path),
            ledger_config=LedgerConfig(assume_ttl_ms=assume_ttl_ms),
            kube=kube,
        )
    )
    if metrics_port:
        metrics.serve(metrics_port, addr=addr)
    client = connect(options)
    job_class = allow_list_job_class(JOB_FUNCTIONS)
    queue = bind_queue(client, keys, job_class=job_class)
    if metrics_port:
        metrics.register_queue_collector(client, keys)
    # A binder has no initial list: what it froze is its modules, config and profiles.
    gc_tuning.tune()
    gc_tuning.freeze_initial_state()
    what = f"binder {mp.current_process().name}"

    def new_worker() -> BindingWorker:  # rq's constructor talks to Redis
        return BindingWorker(
            [queue], connection=client, serializer=MsgpackSerializer, job_class=job_class, what=what
        )

    # Between rq's runs (rq installs its own handlers in work()), a stop request ends the
    # wait for Redis instead of killing the process mid-retry without a word.
    stop_requested = threading.Event()

    def on_sigterm(_signum: int, _frame: object) -> None:
        stop_requested.set()

    # Started while Redis is down, or rq's loop ended on an outage (it raises from its
    # teardown): wait for Redis, saying so, and go on with a new rq worker.
    while True:
        signal.signal(signal.SIGTERM, on_sigterm)
        worker = retry_redis(new_worker, what=what, role="binder", stop=stop_requested.is_set)
        if worker is None:
            log.warning("%s: Redis unavailable at stop; exiting", what)
            return
        if stop_requested.is_set():
            return
        log.info("%s ready (rq worker %s)", mp.current_process().name, worker.name)
        started = time.monotonic()
        try:
            worker.work(with_scheduler=False, logging_level="WARNING")
        except redis.RedisError as exc:
            if worker.stopping:  # its pods are still assumed: the reaper requeues them
                log.warning("%s: Redis unavailable at stop (%s)", what, exc)
                return
            if not infrastructure_error(exc):
                raise
            metrics.redis_retries.labels("binder").inc()
            log.warning("%s: Redis unavailable (%s); starting over once it answers", what, exc)
            continue
        if worker.stopping:
            return
        ran_s = time.monotonic() - started
        if ran_s < QUICK_DEATH_S:
            # rq quit on something else at once (it logged what): exit, and the pool
            # respawns this slot with its backoff rather than a loop here.
            log.warning("%s: rq's worker quit after %.1fs; exiting", what, ran_s)
            return


def run_binder_pool(
    options: RedisOptions,
    keys: Keys,
    *,
    processes: int = 1,
    metrics_port: int = 0,
    metrics_addr: str = "127.0.0.1",
    config_path: str | None = None,
    assume_ttl_ms: int = LedgerConfig().assume_ttl_ms,
    kube: KubeMode | None = None,
) -> None:
    load_config(config_path)  # a bad file fails here (ConfigError), not in every child
    ctx = mp.get_context("spawn")
    children: dict[int, BaseProcess] = {}
    started_at: dict[int, float] = {}
    quick_deaths: dict[int, int] = dict.fromkeys(range(processes), 0)
    not_before: dict[int, float] = {}
    stopping = False

    def start(slot: int) -> None:
        port = metrics_port + slot if metrics_port else 0
        child = ctx.Process(
            target=run_one_binder,
            args=(
                options,
                keys.scheduler,
                port,
                metrics_addr,
                config_path,
                assume_ttl_ms,
                logging.getLogger().getEffectiveLevel(),
                kube,
            ),
            name=f"binder-{slot}",
            daemon=False,
        )
        child.start()
        children[slot] = child
        started_at[slot] = time.monotonic()
        log.info("binder-%d started (pid %s)", slot, child.pid)

    def request_stop(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    for slot in range(processes):
        start(slot)
    while not stopping:
        time.sleep(CHECK_S)
        now = time.monotonic()
        for slot, child in list(children.items()):
            if stopping or child.is_alive():
                continue
            if slot not in not_before:
                quick = now - started_at[slot] < QUICK_DEATH_S
                quick_deaths[slot] = quick_deaths[slot] + 1 if quick else 0
                delay = min(MAX_RESPAWN_DELAY_S, 0.5 * (2 ** quick_deaths[slot] - 1))
                not_before[slot] = now + delay
                log.warning(
                    "binder-%d (pid %s) died with exit code %s; respawning in %.1fs",
                    slot,
                    child.pid,
                    child.exitcode,
                    delay,
                )
            if now >= not_before[slot]:
                del not_before[slot]
                start(slot)
    for child in children.values():
        if child.is_alive() and child.pid:
            child.terminate()  # rq's warm shutdown: finish the current job, then exit
    # A bind job takes milliseconds; a child still alive after the grace period is stuck
    # on an unreachable Redis. Killing it loses nothing: its pods are still assumed and
    # the reaper requeues them.
    grace_until = time.monotonic() + SHUTDOWN_GRACE_S
    for child in children.values():
        child.join(timeout=max(0.0, grace_until - time.monotonic()))
        if child.is_alive():
            child.kill()
