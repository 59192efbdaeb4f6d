"""Crash safety of the whole pipeline with real worker and binder processes.

Each test stops or kills one process at an exact step (fault injection, see
:mod:`distsched.faults`), lets the others recover, and ends with every pod bound
exactly once, nothing inflight or assumed, the ledger consistent with the bound pods and
no node over its allocatable. Run with ``-s`` to see the recovery times.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import cast

import pytest
import redis
from rq.registry import StartedJobRegistry

from distsched.bench.checker import BindHistory
from distsched.bench.procs import ProcessGroup
from distsched.binder.jobs import queue_name
from distsched.cache.ledger import Ledger
from distsched.clock import SYSTEM_CLOCK
from distsched.embedded import EmbeddedRedis
from distsched.launcher import RoleProcess
from distsched.queue_redis import RedisQueue
from distsched.redis_text import as_text
from distsched.views import queue_status
from distsched.workers.eventhandlers import GROUP
from distsched.workers.schedule_one import WorkerConfig
from tests.crash.harness import (
    ASSUME_TTL_MS,
    KEYS,
    LEASE_MS,
    assert_invariants,
    children_of,
    create_cluster,
    fault,
    log_text,
    read_marker,
    report_recovery,
    spawn,
    wait_marker,
    worker_args,
)
from tests.support.waits import wait_all_bound, wait_for

PODS = 24
BINDER_ARGS = ("--assume-ttl-ms", str(ASSUME_TTL_MS))
# Slack for process start-up, a reaper tick (1 s), scheduling and binding on a busy machine.
SLACK_S = 4.0


def has_started(proc: RoleProcess) -> bool:
    """Whether a role process logged that it is past its start-up (its initial list)."""
    return " started" in log_text(proc)


def is_consumer(client: redis.Redis, proc: RoleProcess) -> bool:
    """Whether the worker ``proc`` reads the queue's events (the others count it live)."""
    started = re.search(r"(worker-[0-9a-f]+) started", log_text(proc))
    if started is None:
        return False
    names = {as_text(c["name"]) for c in client.xinfo_consumers(KEYS.queue_events, GROUP)}
    return started.group(1) in names


def inflight(client: redis.Redis) -> set[str]:
    return {m.decode() for m in cast(list[bytes], client.zrange(KEYS.inflight, 0, -1))}


def assumed(client: redis.Redis) -> set[str]:
    return set(Ledger(client, KEYS, SYSTEM_CLOCK).assumed_pods())


def test_worker_killed_after_pop_loses_no_pod(
    private_client: redis.Redis,
    processes: ProcessGroup,
    tmp_path: Path,
    bind_history: BindHistory,
) -> None:
    pods = create_cluster(private_client, PODS)
    marker = tmp_path / "fault"
    victim = spawn(processes, "worker", *worker_args(), fault=fault("pop", marker))
    held = wait_marker(marker)["pods"]
    assert held and set(held) == inflight(private_client)  # leased to the victim
    spawn(processes, "worker", *worker_args())
    spawn(processes, "binder", *BINDER_ARGS)
    victim.kill()
    killed = time.monotonic()
    seen = wait_all_bound(private_client, pods)
    p99 = report_recovery("(a) worker SIGKILLed after pop", killed, seen, held)
    assert p99 < LEASE_MS / 1000 + SLACK_S
    assert_invariants(private_client, pods, history=bind_history)


def test_worker_killed_after_reserve_loses_no_pod(
    private_client: redis.Redis,
    processes: ProcessGroup,
    tmp_path: Path,
    bind_history: BindHistory,
) -> None:
    pods = create_cluster(private_client, PODS)
    marker = tmp_path / "fault"
    victim = spawn(processes, "worker", *worker_args(), fault=fault("reserve", marker))
    held = wait_marker(marker)["pods"]
    assert held and set(held) == assumed(private_client)  # reserved, no bind job
    spawn(processes, "worker", *worker_args())
    spawn(processes, "binder", *BINDER_ARGS)
    victim.kill()
    killed = time.monotonic()
    seen = wait_all_bound(private_client, pods)
    p99 = report_recovery("(b) worker SIGKILLed after reserve", killed, seen, held)
    # assume deadline, then the backoff of a first attempt (1 s)
    assert p99 < ASSUME_TTL_MS / 1000 + 1 + SLACK_S
    assert_invariants(private_client, pods, history=bind_history)


def test_binder_killed_mid_job_is_recovered_by_the_reaper_not_by_rq(
    private_client: redis.Redis,
    processes: ProcessGroup,
    tmp_path: Path,
    bind_history: BindHistory,
) -> None:
    pods = create_cluster(private_client, PODS)
    marker = tmp_path / "fault"
    pool = spawn(processes, "binder", *BINDER_ARGS, fault=fault("bind-claimed", marker))
    spawn(processes, "worker", *worker_args())
    claimed = wait_marker(marker)
    held, child = claimed["pods"], claimed["pid"]
    assert held and set(held) <= assumed(private_client)
    assert child in children_of(pool.pid)
    started = StartedJobRegistry(queue_name(KEYS), connection=private_client)
    [abandoned] = started.get_job_ids(cleanup=False)  # the paused child's job
    claim_seen = time.monotonic()
    os.kill(child, signal.SIGKILL)
    seen = wait_all_bound(private_client, pods)
    report_recovery("(c) binder SIGKILLed mid-job (claimed)", claim_seen, seen, held)
    # The claim renewed the deadline: the pods came back only through the reaper...
    assert min(seen[p] for p in held) - claim_seen > ASSUME_TTL_MS / 1000 - 1
    # ... while rq still holds the abandoned job as started (its maintenance never ran).
    assert abandoned in started.get_job_ids(cleanup=False)
    respawned = children_of(pool.pid)
    assert len(respawned) == 1 and child not in respawned
    assert_invariants(private_client, pods, history=bind_history)


def test_binder_killed_between_store_write_and_confirm(
    private_client: redis.Redis,
    processes: ProcessGroup,
    tmp_path: Path,
    bind_history: BindHistory,
) -> None:
    pods = create_cluster(private_client, PODS)
    marker = tmp_path / "fault"
    spawn(processes, "binder", *BINDER_ARGS, fault=fault("bind-stored", marker))
    spawn(processes, "worker", *worker_args())
    stored = wait_marker(marker)
    held = set(stored["pods"])
    # The store's bind script confirmed the reservations in the same call.
    assert held and not (held & assumed(private_client))
    os.kill(stored["pid"], signal.SIGKILL)
    killed = time.monotonic()
    queue = RedisQueue(private_client, KEYS)

    def confirmed() -> bool:
        # Bound and confirmed in one script: the kill changes nothing, nothing is requeued.
        heads = queue.heads(PODS * 2)
        requeued = held & {
            k for name in ("active", "backoff", "unschedulable") for k in heads[name]
        }
        assert not requeued, f"bound pods were requeued: {requeued}"
        return not (held & assumed(private_client))

    wait_for("the reaper to confirm the bound pods", confirmed, ASSUME_TTL_MS / 1000 + SLACK_S)
    print(
        f"recovery (c') binder SIGKILLed after the store write: confirmed after "
        f"{time.monotonic() - killed:.2f}s"
    )
    wait_all_bound(private_client, pods)
    assert_invariants(private_client, pods, history=bind_history)


def test_worker_paused_past_its_lease_does_not_commit(
    private_client: redis.Redis,
    processes: ProcessGroup,
    tmp_path: Path,
    bind_history: BindHistory,
) -> None:
    """The dangerous interleaving: A pops, stalls past its lease; B re-pops the pods (newer
    lease epochs) and is still deciding when A resumes and tries to reserve them."""
    pods = create_cluster(private_client, PODS)
    first, second = tmp_path / "fault-a", tmp_path / "fault-b"
    stalled = spawn(processes, "worker", *worker_args(), fault=fault("pop", first, 1.0))
    held = wait_marker(first)["pods"]
    stalled.signal(signal.SIGSTOP)
    stopped = time.monotonic()
    spawn(processes, "binder", *BINDER_ARGS)
    # B's own lease is long: it must still hold the pods when A resumes.
    taker = spawn(processes, "worker", *worker_args(10_000), fault=fault("pop", second, 1.0))
    retaken = wait_marker(second)["pods"]
    taker.signal(signal.SIGSTOP)
    assert set(retaken) == set(held) == inflight(private_client)
    assert time.monotonic() - stopped > LEASE_MS / 1000
    stalled.signal(signal.SIGCONT)

    def fenced() -> bool:
        stale = [ln for ln in log_text(stalled).splitlines() if "stale" in ln and "epoch" in ln]
        return all(any(key in line for line in stale) for key in held)

    # A reserves its popped pods and the ledger answers Stale (lease epoch not current).
    wait_for("the resumed worker's stale reservations", fenced, 10.0, every=0.1)
    assert set(held) == inflight(private_client) and not assumed(private_client)
    taker.signal(signal.SIGCONT)  # B's reservations carry the current epochs
    seen = wait_all_bound(private_client, pods)
    report_recovery("(d) worker SIGSTOPped after pop", stopped, seen, held)
    assert stalled.alive() and taker.alive()
    assert_invariants(private_client, pods, history=bind_history)


def test_a_pod_that_keeps_crashing_workers_is_dead_lettered(
    private_client: redis.Redis,
    private_redis: EmbeddedRedis,
    processes: ProcessGroup,
    tmp_path: Path,
    bind_history: BindHistory,
) -> None:
    [poison] = create_cluster(private_client, 1, prefix="poison")
    queue = RedisQueue(private_client, KEYS)
    deliveries = queue.config.max_deliveries
    for attempt in range(deliveries):
        marker = tmp_path / f"fault-{attempt}"
        worker = spawn(processes, "worker", *worker_args(1000), fault=fault("pop", marker))
        assert wait_marker(marker)["pods"] == [poison]
        worker.kill()
    info = queue.info(poison)
    assert info is not None and info["d"] == deliveries and info["w"] == "inflight"
    spawn(processes, "worker", *worker_args(1000))
    spawn(processes, "binder", *BINDER_ARGS)
    wait_for(
        "the pod to be dead-lettered",
        lambda: queue_status(private_client, KEYS)["counts"]["dead-lettered"],
        10.0,
    )
    shown = subprocess.run(
        [
            sys.executable,
            "-m",
            "distsched",
            "queue",
            "-o",
            "json",
            "--redis-url",
            private_redis.url,
        ],
        capture_output=True,
        check=True,
        text=True,
    )
    status = json.loads(shown.stdout)
    assert status["counts"]["dead-lettered"] == 1
    assert status["heads"]["dead-lettered"] == [poison]
    # The pipeline goes on: new pods are scheduled and bound around the dead one.
    healthy = create_cluster(private_client, 3, prefix="ok")
    wait_all_bound(private_client, healthy)
    assert_invariants(private_client, [poison, *healthy], unbound=[poison], history=bind_history)


@pytest.mark.slow
def test_random_kills_under_load_lose_nothing_and_bind_nothing_twice(
    private_client: redis.Redis,
    processes: ProcessGroup,
    tmp_path: Path,
    bind_history: BindHistory,
) -> None:
    """Chaos: pods arrive in waves; each wave a worker that stops after its pop or its
    reserve is SIGKILLed there, and a random binder child is SIGKILLed at a random time,
    while two healthy workers and the pool go on."""
    rng = random.Random(7)
    create_cluster(private_client, 0, nodes=8)
    for _ in range(2):
        spawn(processes, "worker", *worker_args())
    pool = spawn(processes, "binder", "--processes", "2", *BINDER_ARGS)
    wait_for("two binder children", lambda: len(children_of(pool.pid)) == 2, 15)
    pods: list[str] = []
    fired = 0
    for wave in range(15):
        marker = tmp_path / f"fault-{wave}"
        point = rng.choice(["pop", "reserve"])
        victim = spawn(processes, "worker", *worker_args(), fault=fault(point, marker))
        # Its start-up (imports, the initial list) takes from a few tenths of a second to
        # several on a loaded machine: the wave waits for it, so that it competes.
        wait_for("victim worker started", partial(has_started, victim), 30)
        # The healthy workers split each wave by the live workers they count (the queue's
        # event consumers, re-read every 0.5 s): until they count the victim, they pop the
        # whole wave between them and it never gets a pod to be killed with.
        wait_for("victim counted live", partial(is_consumer, private_client, victim), 30)
        time.sleep(2 * WorkerConfig.share_refresh_s)
        pods += create_cluster(private_client, 40, prefix=f"w{wave:02d}-", cpu="20m")
        deadline = time.monotonic() + 3
        while read_marker(marker) is None and time.monotonic() < deadline:
            time.sleep(0.02)
        fired += read_marker(marker) is not None
        victim.kill()
        children = sorted(children_of(pool.pid))
        if rng.random() < 0.5 and children:
            time.sleep(rng.uniform(0, 0.2))
            os.kill(rng.choice(children), signal.SIGKILL)
    wait_all_bound(private_client, pods, timeout_s=60)
    assert_invariants(private_client, pods, history=bind_history)
    logs = "".join(log_text(p) for p in processes.processes)
    print(
        f"chaos: {len(pods)} pods, {fired} workers killed holding pods; reaper: "
        f"{logs.count('expired leases')} lease and {logs.count('expired assumed')} assumed "
        f"reclaims; binder respawns: {logs.count('respawning')}"
    )
    assert fired > 0
