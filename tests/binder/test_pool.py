"""`distsched binder --processes M` as a real process tree on a private server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import redis

from distsched.bench.binder_pool import (
    bind_events,
    create_cluster,
    node_manifest,
    pod_manifest,
    reserve_round_robin,
    wait_for_binders,
)
from distsched.bench.procs import ProcessGroup
from distsched.binder.jobs import bind_queue, enqueue_bindings
from distsched.cache.ledger import Ledger, LedgerConfig
from distsched.clock import SYSTEM_CLOCK
from distsched.embedded import EmbeddedRedis
from distsched.keys import Keys
from tests.crash.harness import children_of
from tests.support.waits import wait_for

KEYS = Keys("default")


def test_the_pool_respawns_a_killed_child_and_keeps_binding(
    private_client: redis.Redis, processes: ProcessGroup
) -> None:
    pool = processes.spawn("binder", "--processes", "2")

    def two_children(without: int = 0) -> set[int] | None:
        children = children_of(pool.pid)
        return children if len(children) == 2 and without not in children else None

    first = wait_for("two binder children", two_children, 15)
    wait_for_binders(private_client, KEYS, 2)
    victim = min(first)
    os.kill(victim, signal.SIGKILL)
    now = wait_for("a respawned child", lambda: two_children(without=victim), 10)
    assert len(now & first) == 1  # the other child kept running
    assert pool.log_path is not None and "respawning" in pool.log_path.read_text()

    nodes = ["n1", "n2", "n3"]
    create_cluster(
        private_client,
        KEYS,
        [node_manifest(n) for n in nodes],
        [pod_manifest(f"p{i}") for i in range(200)],
        SYSTEM_CLOCK,
    )
    ttl = LedgerConfig(assume_ttl_ms=600_000)
    bindings = reserve_round_robin(private_client, KEYS, nodes, SYSTEM_CLOCK, ledger_config=ttl)
    queue = bind_queue(private_client, KEYS)
    for i in range(0, len(bindings), 16):
        enqueue_bindings(queue, KEYS, bindings[i : i + 16])
    ledger = Ledger(private_client, KEYS, SYSTEM_CLOCK)
    wait_for("every binding confirmed", lambda: not ledger.assumed_pods(), 20)
    assert bind_events(private_client, KEYS) == {b.pod_key: 1 for b in bindings}
    assert ledger.check_consistency() == []


def test_a_bad_config_is_refused_before_any_child_starts(
    private_redis: EmbeddedRedis, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.yaml"
    url = private_redis.url
    bad.write_text("profiles: [{schedulerName: x, plugins: {bind: {enabled: [{name: Nope}]}}}]\n")
    result = subprocess.run(
        [sys.executable, "-m", "distsched", "binder", "--config", str(bad), "--redis-url", url],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2, result.stderr
    assert "bad.yaml" in result.stderr
