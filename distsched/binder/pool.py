"""`distsched binder --processes M`: a pool of rq SimpleWorkers that respawns the dead.

Each child runs an rq SimpleWorker (no fork per job) on the binding queue with the
msgpack serializer and the allow-listing job class. The parent restarts a child that
died (SIGKILL, OOM) within a second. A binder killed mid-job loses nothing: its pods stay
assumed until the ledger's reaper releases and requeues them, or a retried job binds
them (binding is idempotent).
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import signal
import time
from multiprocessing.process import BaseProcess

from rq import SimpleWorker

from distsched import metrics
from distsched.binder import cycle  # noqa: F401  (registers the allow-listed job function)
from distsched.binder.jobs import bind_queue
from distsched.binder.safety import AllowListJob, MsgpackSerializer
from distsched.connection import RedisOptions, connect, retry_redis
from distsched.keys import Keys

log = logging.getLogger(__name__)


def run_one_binder(options: RedisOptions, scheduler: str, metrics_port: int, addr: str) -> None:
    """Body of one binder process."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent owns Ctrl-C
    keys = Keys(scheduler)
    if metrics_port:
        metrics.serve(metrics_port, addr=addr)
    client = connect(options)
    queue = bind_queue(client, keys)
    if metrics_port:
        metrics.register_queue_collector(client, keys)
    worker = SimpleWorker(
        [queue], connection=client, serializer=MsgpackSerializer, job_class=AllowListJob
    )
    retry_redis(
        lambda: worker.work(with_scheduler=False, logging_level="WARNING"),
        what=f"binder {mp.current_process().name}",
    )


def run_binder_pool(
    options: RedisOptions,
    keys: Keys,
    *,
    processes: int = 1,
    metrics_port: int = 0,
    metrics_addr: str = "127.0.0.1",
) -> None:
    ctx = mp.get_context("spawn")
    children: dict[int, BaseProcess] = {}
    stopping = False

    def start(slot: int) -> None:
        port = metrics_port + slot if metrics_port else 0
        child = ctx.Process(
            target=run_one_binder,
            args=(options, keys.scheduler, port, metrics_addr),
            name=f"binder-{slot}",
            daemon=False,
        )
        child.start()
        children[slot] = child
        log.info("binder-%d started (pid %s)", slot, child.pid)

    def request_stop(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    for slot in range(processes):
        start(slot)
    while not stopping:
        time.sleep(0.5)
        for slot, child in list(children.items()):
            if not child.is_alive() and not stopping:
                log.warning(
                    "binder-%d (pid %s) died with %s; respawning", slot, child.pid, child.exitcode
                )
                start(slot)
    for child in children.values():
        if child.is_alive() and child.pid:
            child.terminate()  # rq's warm shutdown: finish the current job, then exit
    for child in children.values():
        child.join(timeout=20)
        if child.is_alive():
            child.kill()
