"""Redis itself fails: SIGKILL of the server mid-run (AOF ``always`` and ``everysec``) and a
write stall (``CLIENT PAUSE``), with two real workers and a binder scheduling 2,000 pods.

Run with ``-s`` to see the figures (recovery time, loss window, throughput in a stall).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import redis

from distsched.bench.checker import check
from distsched.bench.procs import ProcessGroup
from distsched.embedded import EmbeddedRedis
from tests.reliability.harness import (
    KEYS,
    BindTracker,
    PodCreator,
    bound_pods,
    client_for,
    create_nodes,
    create_pods,
    drained,
    log_text,
    report,
    start_roles,
    summary,
    wait_all_bound,
    wait_until,
)

PODS = 2_000
NODES = 100
DOWN_S = 1.0  # how long the server stays dead


def stop_all(groups: list[ProcessGroup]) -> None:
    """Stop the roles while the server is still up (a role waiting out an outage takes
    its full SIGTERM grace to stop)."""
    for group in groups:
        group.stop()


def kill_and_restart(
    server: EmbeddedRedis, client: redis.Redis, appendfsync: str, at_bound: int
) -> tuple[EmbeddedRedis, float, float]:
    """Wait for ``at_bound`` bindings, SIGKILL the server, restart it on the same port and
    data dir after DOWN_S. Returns the new server, the kill time and the restart time."""
    wait_until(f"{at_bound} pods bound", lambda: len(bound_pods(client)) >= at_bound, 60)
    server.kill()
    killed = time.monotonic()
    time.sleep(DOWN_S)
    restarted = EmbeddedRedis(
        port=server.port, data_dir=server.data_dir, appendfsync=appendfsync
    ).start()
    return restarted, killed, time.monotonic()


def test_redis_sigkill_with_appendfsync_always_loses_no_acknowledged_pod(
    always_redis: EmbeddedRedis, group_on: list[ProcessGroup], tmp_path: Path
) -> None:
    client = client_for(always_redis.url)
    create_nodes(client, NODES)
    start_roles(always_redis.url, tmp_path, group_on)
    tracker = BindTracker(client_for(always_redis.url)).start()
    creator = PodCreator(always_redis.url, PODS, chunk=20, pause_s=0.04).start()
    restarted, killed, up = kill_and_restart(always_redis, client, "always", int(PODS * 0.3))
    try:
        # What the restarted server holds, read before the roles' backoff lets them back in.
        tracker.poll()
        bound_at_restart = set(tracker.first_bound)
        pending_at_kill = [k for k in creator.acked if k not in bound_at_restart]
        creator.join()
        acked = creator.acked
        assert len(acked) >= PODS // 2, f"only {len(acked)} creates acknowledged"
        wait_all_bound(client, acked, timeout_s=90)
        wait_until("the queue to drain", lambda: drained(client), 30)
        tracker.stop()

        problems = check(client, KEYS, expect_bound=set(acked))
        assert problems == [], "\n".join(problems)
        worker_logs = log_text(tmp_path, "worker")
        assert "Redis unavailable" in worker_logs
        assert "Redis is back" in worker_logs
        first = min(t for k, t in tracker.first_bound.items() if k not in bound_at_restart)
        recovery = [tracker.first_bound[k] - up for k in pending_at_kill]
        report(
            f"redis-kill always: {len(acked)} acked, {creator.failed_chunks} chunks refused "
            f"while down, 0 lost; down {up - killed:.2f}s, first binding {first - up:.2f}s "
            f"after restart; restart->bound of the {len(recovery)} pods pending at the kill: "
            f"{summary(recovery)}"
        )
    finally:
        stop_all(group_on)
        restarted.stop()


def test_redis_sigkill_with_a_backlog_reschedules_what_was_in_flight(
    always_redis: EmbeddedRedis, group_on: list[ProcessGroup], tmp_path: Path
) -> None:
    """All pods created up front, so the kill finds pods popped and reserved; they come
    back through the lease and assume-TTL reapers of the restarted server's state."""
    client = client_for(always_redis.url)
    create_nodes(client, NODES)
    start_roles(always_redis.url, tmp_path, group_on)
    tracker = BindTracker(client_for(always_redis.url)).start()
    pods = create_pods(client, PODS)
    restarted, _killed, up = kill_and_restart(always_redis, client, "always", int(PODS * 0.3))
    try:
        tracker.poll()
        bound_at_restart = set(tracker.first_bound)
        pipe = client.pipeline(transaction=True)
        pipe.zcard(KEYS.inflight)
        pipe.zcard(KEYS.ledger_assumed)
        inflight, assumed = pipe.execute()
        wait_all_bound(client, pods, timeout_s=90)
        wait_until("the queue to drain", lambda: drained(client), 30)
        tracker.stop()
        problems = check(client, KEYS, expect_bound=set(pods))
        assert problems == [], "\n".join(problems)
        recovery = [t - up for k, t in tracker.first_bound.items() if k not in bound_at_restart]
        report(
            f"redis-kill always, backlog: {len(pods)} pods, 0 lost; {inflight} inflight and "
            f"{assumed} assumed at the restart; restart->bound of the "
            f"{len(pods) - len(bound_at_restart & set(pods))} pending: {summary(recovery)}"
        )
    finally:
        stop_all(group_on)
        restarted.stop()


def test_redis_sigkill_with_appendfsync_everysec_loss_window(
    tmp_path: Path, group_on: list[ProcessGroup]
) -> None:
    """everysec may lose up to ~1 s of acknowledged writes: measure, don't promise zero.
    What must still hold: no node over its allocatable, no pod bound twice."""
    server = EmbeddedRedis(data_dir=tmp_path / "redis", appendfsync="everysec").start()
    restarted = server
    try:
        client = client_for(server.url)
        create_nodes(client, NODES)
        start_roles(server.url, tmp_path, group_on)
        creator = PodCreator(server.url, PODS, chunk=20, pause_s=0.04).start()
        restarted, killed, _up = kill_and_restart(server, client, "everysec", int(PODS * 0.3))
        creator.join()
        # What a power loss could cost: everysec fsyncs about once a second and Redis
        # documents up to 2 s; a SIGKILL loses nothing the kernel already has.
        at_risk = sum(1 for t in creator.ack_times if killed - 2.0 <= t <= killed)
        in_store = set(bound_pods(client)) | {
            k.decode() for k in client.hkeys(KEYS.store_meta("Pod"))
        }
        lost = [k for k in creator.acked if k not in in_store]
        survivors = [k for k in creator.acked if k in in_store]
        try:
            wait_all_bound(client, survivors, timeout_s=90)
            wait_until("the queue to drain", lambda: drained(client), 30)
            unbound = 0
        except AssertionError:
            unbound = len(set(survivors) - set(bound_pods(client)))
        problems = check(client, KEYS, expect_bound=set(survivors))
        hard = [p for p in problems if p.startswith(("overcommit", "double-bind", "host-port"))]
        report(
            f"redis-kill everysec: {len(creator.acked)} acked, {len(lost)} acknowledged creates "
            f"lost to SIGKILL, {at_risk} acked in the 2 s before the kill (power-loss window), "
            f"{unbound} surviving pods unbound, "
            f"{len(problems)} checker findings: {problems[:3]}"
        )
        assert hard == [], "\n".join(hard)
    finally:
        stop_all(group_on)
        restarted.stop()
        if restarted is not server:
            server.stop()


def test_client_pause_write_breaks_no_invariant(
    always_redis: EmbeddedRedis, group_on: list[ProcessGroup], tmp_path: Path
) -> None:
    client = client_for(always_redis.url, timeout_s=10)
    create_nodes(client, NODES)
    start_roles(always_redis.url, tmp_path, group_on)
    tracker = BindTracker(client_for(always_redis.url, timeout_s=10)).start()
    creator = PodCreator(always_redis.url, PODS, chunk=20, pause_s=0.04)
    creator.start()
    wait_until("30% bound", lambda: len(bound_pods(client)) >= PODS * 0.3, 60)
    admin = client_for(always_redis.url)
    paused_at = time.monotonic()
    admin.execute_command("CLIENT", "PAUSE", "2000", "WRITE")
    write_start = time.monotonic()
    client.set("reliability:probe", "1")  # a write waits out the pause
    write_wait = time.monotonic() - write_start
    resumed_at = paused_at + 2.0
    creator.join()
    wait_all_bound(client, creator.acked, timeout_s=90)
    wait_until("the queue to drain", lambda: drained(client), 30)
    tracker.stop()
    client.delete("reliability:probe")
    problems = check(client, KEYS, expect_bound=set(creator.acked))
    assert problems == [], "\n".join(problems)
    assert write_wait > 1.0, f"CLIENT PAUSE did not stall writes ({write_wait:.2f}s)"
    before = tracker.rate(paused_at - 2.0, paused_at)
    during = tracker.rate(paused_at + 0.2, resumed_at - 0.1)
    after = tracker.rate(resumed_at, resumed_at + 2.0)
    assert during <= max(before, 1.0) * 0.25, (before, during)
    acked_at = dict(zip(creator.acked, creator.ack_times, strict=True))

    def latencies(keep: Callable[[float], bool]) -> list[float]:
        return [tracker.first_bound[k] - t for k, t in acked_at.items() if keep(t)]

    report(
        f"client-pause 2s: bound/s before {before:.0f}, during {during:.0f}, after "
        f"{after:.0f}; a write waited {write_wait:.2f}s; create->bound latency: before "
        f"{summary(latencies(lambda t: t < paused_at - 0.5))}; acked in the 1 s before the "
        f"pause {summary(latencies(lambda t: paused_at - 1 <= t < paused_at))}; after "
        f"{summary(latencies(lambda t: t > resumed_at))}; {creator.failed_chunks} creates "
        "refused"
    )
    admin.close()
