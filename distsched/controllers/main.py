"""`distsched controller`: the workload controllers as a role, until SIGTERM/SIGINT.

Several instances may run (compose scales them like the other roles): they elect one
leader through a lease in Redis (``T:lock:controller``, taken or renewed by
``controller_lease.lua`` every loop turn), as kube-controller-manager's instances do.
Only the leader reconciles; the others wait for the lease to expire. A leader that
stalls past its lease and wakes up is still harmless: every create uses a deterministic
name (a second one is refused as AlreadyExists) and every delete carries the uid it saw.
A new leader starts from a fresh list of the store, then collects the objects whose
owner was deleted while no leader was watching.
"""

from __future__ import annotations

import contextlib
import logging
import threading

import redis

from distsched import gc_tuning, metrics
from distsched.connection import Backoff, RedisOptions, infrastructure_error
from distsched.controllers.workload import WorkloadController
from distsched.keys import Keys
from distsched.lease import DEFAULT_LEASE_MS, Lease
from distsched.role_start import start_role

log = logging.getLogger(__name__)


def run_controller(
    options: RedisOptions,
    keys: Keys,
    *,
    lease_ms: int = DEFAULT_LEASE_MS,
    stop: threading.Event | None = None,
) -> None:
    stop, client = start_role(options, stop)
    lease = Lease(client, keys, "controller", lease_ms=lease_ms)
    block_ms = max(1, min(1000, lease_ms // 3))
    controller: WorkloadController | None = None
    backoff = Backoff()
    outage = False
    log.info("controller %s started", lease.identity)
    while not stop.is_set():
        try:
            held = lease.hold()
            if outage:
                log.warning("controller %s: Redis is back", lease.identity)
                outage = False
            if not held:
                if controller is not None:
                    log.warning("controller %s lost the lease", lease.identity)
                controller = None
                backoff.reset()
                stop.wait(block_ms / 1000)
                continue
            if controller is None:
                log.info("controller %s is the leader", lease.identity)
                gc_tuning.unfreeze()  # a previous leadership's state may be garbage now
                controller = WorkloadController(client, keys)
                controller.catch_up()
                gc_tuning.freeze_initial_state()
                controller.collect_orphans()
            controller.sync(block_ms=block_ms)
            backoff.reset()
        except Exception as exc:
            controller = None  # relist after the outage
            delay = backoff.next_delay()
            if infrastructure_error(exc):
                outage = True
                metrics.redis_retries.labels("controller").inc()
                log.warning("controller: Redis unavailable (%s); retrying in %.1fs", exc, delay)
            else:
                log.exception("controller: unexpected error; going on in %.1fs", delay)
            stop.wait(delay)
    with contextlib.suppress(redis.RedisError):
        lease.release()
    log.info("controller %s stopped", lease.identity)
