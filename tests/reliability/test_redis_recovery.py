"""Issue 24, item 2, across processes: roles wait for a Redis that is down, and go on after
a Redis that comes back empty.

Before: a `distsched worker` started while Redis was down exited 1 (it built itself
outside its retry loop), `distsched up` exited 1, a binder child crashed at start and was
respawned in a loop, and the binder logged nothing of its own about an outage. A worker
running when Redis restarted without its data read from a consumer group that no longer
existed (NOGROUP) on every turn: no re-applied pod was ever bound.

Each test runs its own ``redis-server`` (no persistence) on a free port and kills and
starts it as it needs. Run with ``-s`` to see the figures.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from distsched.bench.checker import check
from distsched.bench.procs import ProcessGroup
from distsched.store import Store
from tests.controllers.helpers import apply_text, deployment
from tests.reliability import harness as h
from tests.reliability.sentinels import Node, free_port, redis_server_binary

NODES = 20
PODS = 200
REPLICAS = 5
DOWN_S = 3.0  # how long the roles wait for a server that is not there yet


class Server:
    """A redis-server without persistence on a fixed port: every start is an empty one."""

    def __init__(self, root: Path) -> None:
        self.port = free_port()
        self.root = root
        self.node: Node | None = None
        self.binary = redis_server_binary()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> Server:
        args = ["--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.root)]
        args += ["--save", "", "--appendonly", "no", "--protected-mode", "no"]
        self.node = Node("redis", self.port, args, self.root / "redis.log").start(self.binary)
        h.wait_until("redis-server to answer", lambda: bool(h.client_for(self.url).ping()), 15)
        return self

    def kill(self) -> None:
        if self.node is not None:
            self.node.kill()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    (tmp_path / "redis").mkdir()
    server = Server(tmp_path / "redis")
    yield server
    server.kill()


def fill(client: redis.Redis, prefix: str) -> list[str]:
    """Nodes, pods and a Deployment (for the controller); the pods to see bound."""
    h.create_nodes(client, NODES)
    pods = h.create_pods(client, PODS, prefix=prefix)
    apply_text(Store(client, h.KEYS), deployment(f"{prefix}web", REPLICAS))
    return pods


def deployment_pods(client: redis.Redis, prefix: str) -> list[str]:
    return [k for k in h.bound_pods(client) if k.startswith(f"default/{prefix}web-")]


def binder_retries(port: int) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    found = re.search(r'^distsched_redis_retries_total\{role="binder"\} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


def spawn_roles(group: ProcessGroup, binder_metrics: int) -> None:
    for _ in range(2):
        group.spawn("worker", *h.ROLE_ARGS)
    group.spawn("binder", "--assume-ttl-ms", "6000", "--metrics-port", str(binder_metrics))
    group.spawn("controller", "--lease-ms", "2000")


def assert_all_alive(group: ProcessGroup, log_dir: Path) -> None:
    for proc in group.processes:
        assert proc.alive(), f"{proc.role} exited: {h.log_text(log_dir, proc.role)[-2000:]}"


def test_roles_started_while_redis_is_down_wait_for_it(
    server: Server, group_on: list[ProcessGroup], tmp_path: Path
) -> None:
    group = ProcessGroup(server.url, log_dir=tmp_path)
    group_on.append(group)
    metrics_port = free_port()
    spawn_roles(group, metrics_port)
    # Each role must have found Redis down before it comes up: on a busy 2-core machine a
    # role's start-up alone can outlast a fixed wait (CI once saw the binder's first
    # connection find the server already up).
    h.wait_until(
        "the worker and the binder to find Redis down",
        lambda: all("Redis unavailable" in h.log_text(tmp_path, r) for r in ("worker", "binder")),
        60,
    )
    time.sleep(DOWN_S)
    assert_all_alive(group, tmp_path)
    server.start()
    up = time.monotonic()
    client = h.client_for(server.url)
    pods = fill(client, "p")
    seen = h.wait_all_bound(client, pods, timeout_s=90)
    h.wait_until("the Deployment's pods bound", lambda: len(deployment_pods(client, "p")) == 5, 60)
    h.wait_until("the queue to drain", lambda: h.drained(client), 30)
    assert check(client, h.KEYS, expect_bound=set(pods)) == []
    assert_all_alive(group, tmp_path)
    for role in ("worker", "binder"):
        text = h.log_text(tmp_path, role)
        assert "Redis unavailable" in text and "Redis is back" in text, f"{role}: {text[-2000:]}"
    assert "died with exit code" not in h.log_text(tmp_path, "binder")
    assert binder_retries(metrics_port) > 0
    h.report(
        f"roles started {DOWN_S:.0f}s before redis-server: all waited (0 exits); "
        f"{PODS} pods bound {max(seen.values()) - up:.2f}s after it started"
    )


def test_roles_go_on_after_redis_restarts_empty(
    server: Server, group_on: list[ProcessGroup], tmp_path: Path
) -> None:
    server.start()
    group = ProcessGroup(server.url, log_dir=tmp_path)
    group_on.append(group)
    spawn_roles(group, free_port())
    client = h.client_for(server.url)
    h.wait_all_bound(client, fill(client, "before"), timeout_s=90)
    h.wait_until(
        "the Deployment's pods bound", lambda: len(deployment_pods(client, "before")) == 5, 60
    )
    server.kill()
    time.sleep(1.0)
    server.start()  # empty: no RDB, no AOF
    restarted = time.monotonic()
    pods = fill(client, "after")
    seen = h.wait_all_bound(client, pods, timeout_s=90)
    h.wait_until(
        "the Deployment's pods bound", lambda: len(deployment_pods(client, "after")) == 5, 60
    )
    h.wait_until("the queue to drain", lambda: h.drained(client), 30)
    assert check(client, h.KEYS, expect_bound=set(pods)) == []
    assert_all_alive(group, tmp_path)
    assert "Redis lost its data" in h.log_text(tmp_path, "worker")
    for role in ("binder", "controller"):
        assert "Redis is back" in h.log_text(tmp_path, role), role
    h.report(
        f"redis-server restarted empty under 2 workers, a binder and a controller: "
        f"{PODS} re-applied pods bound {max(seen.values()) - restarted:.2f}s after the "
        f"restart, first {min(seen.values()) - restarted:.2f}s"
    )


def test_up_waits_for_a_redis_that_is_down(server: Server, tmp_path: Path) -> None:
    log = (tmp_path / "up.log").open("wb")
    roles = ["--workers", "1", "--binders", "1", "--controllers", "0"]
    up = subprocess.Popen(
        [sys.executable, "-m", "distsched", "up", "--redis-url", server.url, *roles],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        time.sleep(DOWN_S)
        assert up.poll() is None, (tmp_path / "up.log").read_text()
        server.start()
        client = h.client_for(server.url)
        h.create_nodes(client, 2)
        pods = h.create_pods(client, 10)
        h.wait_all_bound(client, pods, timeout_s=60)
        up.send_signal(signal.SIGINT)
        assert up.wait(timeout=20) == 0
        assert "Redis unavailable" in (tmp_path / "up.log").read_text()
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
        log.close()


def test_a_binder_pool_stops_on_sigterm_while_redis_is_down(
    server: Server, group_on: list[ProcessGroup], tmp_path: Path
) -> None:
    """Before, the child's rq loop kept retrying after the stop request (rq sets no flag
    for an idle worker) until the pool killed it after its grace period."""
    server.start()
    group = ProcessGroup(server.url, log_dir=tmp_path)
    group_on.append(group)
    binder = group.spawn("binder")
    h.wait_until("the binder to be ready", lambda: "ready" in h.log_text(tmp_path, "binder"), 30)
    server.kill()
    h.wait_until(
        "the binder to notice",
        lambda: "Redis" in h.log_text(tmp_path, "binder").split("ready")[-1],
        30,
    )
    stopped = time.monotonic()
    binder.signal(signal.SIGTERM)
    h.wait_until("the binder pool to exit", lambda: not binder.alive(), 15)
    text = h.log_text(tmp_path, "binder")
    assert "Redis unavailable at stop" in text, text[-2000:]
    h.report(f"binder pool stopped {time.monotonic() - stopped:.2f}s after SIGTERM, Redis down")


def test_a_binder_waiting_for_redis_stops_on_sigterm_and_says_so(
    server: Server, group_on: list[ProcessGroup], tmp_path: Path
) -> None:
    """Between rq's runs (here: started while Redis is down) the child waits in its own
    retry loop; a SIGTERM there once killed it mid-retry without a word (CI saw it when
    rq's run ended on the outage just before the stop)."""
    group = ProcessGroup(server.url, log_dir=tmp_path)
    group_on.append(group)
    binder = group.spawn("binder")
    h.wait_until(
        "the binder to wait for Redis",
        lambda: "retrying in" in h.log_text(tmp_path, "binder"),
        30,
    )
    binder.signal(signal.SIGTERM)
    h.wait_until("the binder pool to exit", lambda: not binder.alive(), 15)
    assert "Redis unavailable at stop" in h.log_text(tmp_path, "binder")
