"""What the reliability tests share: a cluster of nodes, a pod creator that remembers which
creates were acknowledged, waits that tolerate a Redis outage, and figures for the report.

Every figure a test measures is printed (``pytest -s`` shows it) and appended to the file
named by ``DISTSCHED_RELIABILITY_LOG`` when set, so docs/reliability.md can quote it.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import redis

from distsched.bench.binder_pool import node_manifest, pod_manifest
from distsched.bench.procs import ProcessGroup
from distsched.connection import RedisOptions, connect, is_sentinel_url
from distsched.keys import Keys
from distsched.store import AlreadyExists, Store
from tests.support import waits
from tests.support.readers import bound_nodes

KEYS = Keys("default")  # ProcessGroup's scheduler name
ROLE_ARGS = ("--lease-ms", "3000", "--assume-ttl-ms", "6000")
LOG_ENV = "DISTSCHED_RELIABILITY_LOG"
RETRYABLE = (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError)


def report(line: str) -> None:
    print(line)
    out = os.environ.get(LOG_ENV)
    if out:
        with open(out, "a") as f:
            f.write(line + "\n")


def client_for(url: str, timeout_s: float = 2.0) -> redis.Redis:
    """A bytes client that fails fast while the server is down (the tests retry). A
    Sentinel URL gets a client that follows the primary and acknowledges its writes on
    a replica, like the roles' (distsched.connection.connect)."""
    if is_sentinel_url(url):
        client = connect(RedisOptions(url))
        client.connection_pool.connection_kwargs["socket_timeout"] = timeout_s
        return client
    return redis.Redis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s)


def start_roles(
    url: str,
    log_dir: Path,
    groups: list[ProcessGroup],
    *,
    workers: int = 2,
    binders: int = 1,
    canary: str = "canary",
) -> ProcessGroup:
    """Spawn workers and binders (short lease and assume TTL) and wait until they work."""
    log_dir.mkdir(parents=True, exist_ok=True)
    group = ProcessGroup(url, log_dir=log_dir)
    groups.append(group)
    for _ in range(workers):
        group.spawn("worker", *ROLE_ARGS)
    for _ in range(binders):
        group.spawn("binder", "--assume-ttl-ms", "6000")
    # A canary pod bound means every role is up: latencies then measure scheduling, not
    # interpreter start-up on a busy machine.
    client = client_for(url)
    try:
        Store(client, KEYS).create(pod_manifest(canary))
        wait_until("the canary pod to be bound", lambda: pod_key(canary) in bound_pods(client), 60)
    finally:
        client.close()
    return group


def create_nodes(client: redis.Redis, count: int, *, cpu: str = "8", pods: int = 110) -> None:
    """``count`` nodes of ``cpu`` cores, 32Gi and ``pods`` pod slots."""
    objs = [node_manifest(f"node-{i:04d}", cpu=cpu, memory="32Gi", pods=pods) for i in range(count)]
    store = Store(client, KEYS)
    for i in range(0, len(objs), 500):
        store.create_many(objs[i : i + 500])


def pod_key(name: str) -> str:
    return f"default/{name}"


@dataclass
class PodCreator:
    """Creates ``total`` pods in chunks from a thread; a chunk whose create_many raised
    (Redis down) is not acknowledged and not retried, like a client that gave up.

    ``acked`` holds the keys of every pod whose create_many returned."""

    url: str
    total: int
    chunk: int = 50
    pause_s: float = 0.0
    prefix: str = "p"
    cpu: str = "100m"
    acked: list[str] = field(default_factory=list)
    failed_chunks: int = 0
    ack_times: list[float] = field(default_factory=list)
    _thread: threading.Thread | None = None

    def run(self) -> None:
        client = client_for(self.url)
        store = Store(client, KEYS)
        try:
            for start in range(0, self.total, self.chunk):
                names = [f"{self.prefix}{i:05d}" for i in range(start, start + self.chunk)]
                objs = [pod_manifest(n, cpu=self.cpu, memory="64Mi") for n in names]
                try:
                    store.create_many(objs)
                except (*RETRYABLE, AlreadyExists):
                    # AlreadyExists: redis-py retried a create whose reply a reset cut off.
                    self.failed_chunks += 1
                    time.sleep(0.2)
                    continue
                now = time.monotonic()
                self.acked += [pod_key(n) for n in names]
                self.ack_times += [now] * len(names)
                if self.pause_s:
                    time.sleep(self.pause_s)
        finally:
            client.close()

    def start(self) -> PodCreator:
        self._thread = threading.Thread(target=self.run, name="pod-creator", daemon=True)
        self._thread.start()
        return self

    def join(self, timeout_s: float = 120.0) -> None:
        assert self._thread is not None
        self._thread.join(timeout_s)
        assert not self._thread.is_alive(), "the pod creator did not finish"


def create_pods(
    client: redis.Redis, count: int, *, prefix: str = "p", cpu: str = "100m"
) -> list[str]:
    store = Store(client, KEYS)
    names = [f"{prefix}{i:05d}" for i in range(count)]
    for i in range(0, count, 500):
        store.create_many([pod_manifest(n, cpu=cpu, memory="64Mi") for n in names[i : i + 500]])
    return [pod_key(n) for n in names]


def bound_pods(client: redis.Redis) -> dict[str, str]:
    """Pod key -> node of every bound pod (store meta hash); {} while Redis is down."""
    try:
        return bound_nodes(client, KEYS)
    except RETRYABLE:
        return {}


def wait_until(what: str, probe: Callable[[], bool], timeout_s: float, every: float = 0.1) -> float:
    """Poll ``probe`` (Redis errors count as "not yet"); returns the seconds it took."""
    return waits.seconds_until(what, probe, timeout_s, every=every, retry=RETRYABLE)


def drained(client: redis.Redis) -> bool:
    """Nothing active, in backoff, inflight or assumed (unschedulable pods may stay)."""
    pipe = client.pipeline(transaction=False)
    for key in (KEYS.active, KEYS.backoff, KEYS.inflight, KEYS.ledger_assumed):
        pipe.zcard(key)
    return sum(pipe.execute()) == 0


def wait_all_bound(client: redis.Redis, pods: Sequence[str], timeout_s: float) -> dict[str, float]:
    """Poll until every pod is bound; returns when (time.monotonic) each was first seen."""
    return waits.wait_all_bound(client, pods, timeout_s, keys=KEYS, retry=RETRYABLE)


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def summary(values: Sequence[float]) -> str:
    if not values:
        return "n=0"
    return (
        f"n={len(values)} p50 {statistics.median(values):.2f}s "
        f"p99 {percentile(values, 0.99):.2f}s max {max(values):.2f}s"
    )


def log_text(log_dir: Path, role: str) -> str:
    return "\n".join(p.read_text(errors="replace") for p in sorted(log_dir.glob(f"{role}-*.log")))


@dataclass
class BindTracker:
    """Polls the store every 50 ms from a thread: when each pod was first seen bound, and
    the bound count over time (throughput during and after a fault)."""

    client: redis.Redis
    first_bound: dict[str, float] = field(default_factory=dict)
    samples: list[tuple[float, int]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.poll()

    def poll(self) -> None:
        try:
            bound = bound_nodes(self.client, KEYS)
        except RETRYABLE:
            return
        now = time.monotonic()
        for key in bound:
            self.first_bound.setdefault(key, now)
        self.samples.append((now, len(bound)))

    def start(self) -> BindTracker:
        self._thread = threading.Thread(target=self._run, name="bind-tracker", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(5)
        self.poll()

    def rate(self, start: float, end: float) -> float:
        """Pods bound per second between two monotonic times."""
        inside = [(t, n) for t, n in self.samples if start <= t <= end]
        if len(inside) < 2 or inside[-1][0] == inside[0][0]:
            return 0.0
        return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])
