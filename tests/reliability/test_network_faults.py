"""Network faults between the processes and Redis: 2 ms each way and connection resets
(TCP RST) through :class:`tests.reliability.proxy.FaultProxy`. No pod may be lost and none
bound twice (the checker counts bind events per pod in the store's event stream)."""

from __future__ import annotations

import time
from pathlib import Path

import redis

from distsched.bench.checker import check
from distsched.bench.procs import ProcessGroup
from distsched.embedded import EmbeddedRedis
from tests.reliability.harness import (
    KEYS,
    PodCreator,
    bound_pods,
    client_for,
    create_nodes,
    create_pods,
    drained,
    report,
    start_roles,
    wait_all_bound,
    wait_until,
)
from tests.reliability.proxy import FaultProxy

NODES = 100
BASELINE_PODS = 1_000
PROXIED_PODS = 2_000
RESETS = 4


def bind_rate(creator: redis.Redis, watcher: redis.Redis, count: int, prefix: str) -> float:
    """Pods/s to create ``count`` pods through ``creator`` and see them all bound."""
    start = time.monotonic()
    wait_all_bound(watcher, create_pods(creator, count, prefix=prefix), 60)
    return count / (time.monotonic() - start)


def test_latency_and_resets_lose_no_pod_and_bind_none_twice(
    private_redis: EmbeddedRedis, group_on: list[ProcessGroup], tmp_path: Path
) -> None:
    client = client_for(private_redis.url, timeout_s=10)
    create_nodes(client, NODES)

    direct = start_roles(private_redis.url, tmp_path / "direct", group_on)
    baseline = bind_rate(client, client, BASELINE_PODS, "d")
    direct.stop()

    proxy = FaultProxy(private_redis.host, private_redis.port, latency_s=0.002).start()
    try:
        start_roles(proxy.url(), tmp_path / "proxied", group_on, canary="canary-2")
        proxied_client = client_for(proxy.url(), timeout_s=10)
        latency_only = bind_rate(proxied_client, client, BASELINE_PODS, "l")
        proxied_client.close()
        creator = PodCreator(proxy.url(), PROXIED_PODS, chunk=250, prefix="n")
        started = time.monotonic()
        creator.start()
        cut = 0
        for i in range(RESETS):
            goal = PROXIED_PODS * (i + 1) // (RESETS + 2)
            wait_until(
                f"{goal} proxied pods bound",
                lambda goal=goal: (
                    sum(k.startswith("default/n") for k in bound_pods(client)) >= goal
                ),
                60,
            )
            cut += proxy.reset_all()
        creator.join()
        wait_all_bound(client, creator.acked, timeout_s=90)
        elapsed = time.monotonic() - started
        wait_until("the queue to drain", lambda: drained(client), 30)
    finally:
        proxy.stop()

    rate = len(creator.acked) / elapsed
    problems = check(client, KEYS, expect_bound=set(creator.acked))
    assert problems == [], "\n".join(problems)
    assert cut > 0, "the resets cut no connection"
    report(
        f"network faults: {len(creator.acked)} pods via proxy (2 ms each way, {RESETS} resets "
        f"cutting {cut} connections, {creator.failed_chunks} creates refused): 0 lost, 0 double "
        f"binds. Throughput: {baseline:.0f} pods/s direct, {latency_only:.0f} pods/s with 2 ms "
        f"({100 * (1 - latency_only / baseline):.0f}% drop), {rate:.0f} pods/s with 2 ms and "
        f"resets ({100 * (1 - rate / baseline):.0f}% drop)"
    )
