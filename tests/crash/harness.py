"""What crash tests share: a small cluster, fault markers, waiting, and the invariants.

Timings are short so each test runs in seconds: leases of :data:`LEASE_MS`, reservations
assumed for :data:`ASSUME_TTL_MS`. Crash tests wait in real time (real processes, real
clocks); every wait polls with a deadline and fails with what it saw.
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import redis

from distsched.bench.binder_pool import node_manifest, pod_manifest
from distsched.bench.checker import BindHistory
from distsched.bench.procs import ProcessGroup
from distsched.cache.ledger import Ledger
from distsched.cache.ledger_types import normalize_requests
from distsched.clock import SYSTEM_CLOCK
from distsched.faults import MARKER_ENV, POINT_ENV, SECONDS_ENV
from distsched.framework.podinfo import PodInfo
from distsched.keys import Keys
from distsched.launcher import RoleProcess
from distsched.model import Node, Pod
from distsched.queue_redis import RedisQueue
from distsched.store import Store
from tests.support.readers import bound_nodes
from tests.support.waits import wait_for

LEASE_MS = 2_000
ASSUME_TTL_MS = 4_000
KEYS = Keys("default")  # ProcessGroup's scheduler name
NODE_COUNT = 4


def create_cluster(
    client: redis.Redis,
    pods: int,
    *,
    prefix: str = "p",
    cpu: str = "500m",
    nodes: int = NODE_COUNT,
) -> list[str]:
    """Nodes of 8 cpu and 110 pods (created by the first call) and ``pods`` pods: the
    tests keep everything fitting (a pod that cannot fit would test preemption, not crash
    safety). Returns the pod keys."""
    store = Store(client, KEYS)
    existing = {o["metadata"]["name"] for o in store.list("Node")[0]}
    names = [f"node-{i}" for i in range(nodes)]
    new_nodes = [node_manifest(n, cpu="8", memory="32Gi") for n in names if n not in existing]
    if new_nodes:
        store.create_many(new_nodes)
    names = [f"{prefix}{i:03d}" for i in range(pods)]
    store.create_many([pod_manifest(n, cpu=cpu, memory="64Mi") for n in names])
    return [f"default/{n}" for n in names]


def worker_args(lease_ms: int = LEASE_MS) -> list[str]:
    return ["--lease-ms", str(lease_ms), "--assume-ttl-ms", str(ASSUME_TTL_MS)]


def spawn(
    group: ProcessGroup, role: str, *args: str, fault: dict[str, str] | None = None
) -> RoleProcess:
    """Spawn a role process, with fault-injection variables for this process only."""
    saved = dict(group.extra_env)
    group.extra_env.update(fault or {})
    try:
        return group.spawn(role, *args)
    finally:
        group.extra_env.clear()
        group.extra_env.update(saved)


def fault(point: str, marker: Path, seconds: float = 30.0) -> dict[str, str]:
    return {POINT_ENV: point, MARKER_ENV: str(marker), SECONDS_ENV: str(seconds)}


def read_marker(marker: Path) -> dict[str, Any] | None:
    try:
        return json.loads(marker.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None  # not there yet, or still being written


def wait_marker(marker: Path, timeout_s: float = 15.0) -> dict[str, Any]:
    return wait_for(f"fault marker {marker.name}", lambda: read_marker(marker), timeout_s)


def report_recovery(name: str, since: float, seen: dict[str, float], pods: Iterable[str]) -> float:
    """Print (pytest -s shows it) and return the p99 time from ``since`` to bound."""
    times = sorted(seen[p] - since for p in pods)
    p99 = times[min(len(times) - 1, int(0.99 * len(times)))]
    line = (
        f"recovery {name}: {len(times)} pods, p50 {statistics.median(times):.2f}s, "
        f"p99 {p99:.2f}s, max {times[-1]:.2f}s"
    )
    print(line)
    out = os.environ.get("DISTSCHED_RECOVERY_LOG")
    if out:
        with open(out, "a") as f:
            f.write(line + "\n")
    return p99


def queue_drained(client: redis.Redis) -> dict[str, int] | None:
    """None while any pod is still active/backoff/unschedulable/inflight or assumed."""
    counts = {k: v for k, v in RedisQueue(client, KEYS).counts().items() if k != "dead" and v}
    assumed = len(Ledger(client, KEYS, SYSTEM_CLOCK).assumed_pods())
    if counts or assumed:
        return None
    return {"assumed": 0}


def assert_invariants(
    client: redis.Redis,
    pods: Iterable[str],
    unbound: Iterable[str] = (),
    *,
    history: BindHistory,
) -> None:
    """Every pod bound exactly once (the bindings ``history`` read, held since the test's
    start: the ``bind_history`` fixture), nothing left inflight or assumed, the ledger
    consistent and equal to the bound pods' requests, no node over allocatable."""
    pods, unbound = sorted(pods), set(unbound)
    wait_for("the queue to drain", lambda: queue_drained(client), 10.0)
    binds = history.advance().per_pod()
    assert {p: binds.get(p, 0) for p in pods} == {p: 0 if p in unbound else 1 for p in pods}
    assert set(binds) <= set(pods), f"unexpected binds: {set(binds) - set(pods)}"
    ledger = Ledger(client, KEYS, SYSTEM_CLOCK)
    assert ledger.check_consistency() == []
    assert ledger.assumed_pods() == {}
    store = Store(client, KEYS)
    placed = bound_nodes(client)
    expected: dict[str, dict[str, int]] = {}
    for key, node in placed.items():
        record = ledger.pod(key)
        assert record is not None and record.state == "bound" and record.node == node, key
        obj = store.get("Pod", key)
        assert obj is not None
        usage = expected.setdefault(node, {})
        requests = normalize_requests(PodInfo.of(Pod.from_dict(obj)).requests)
        for resource, amount in requests.items():
            usage[resource] = usage.get(resource, 0) + amount
    nodes = {o["metadata"]["name"]: Node.from_dict(o) for o in store.list("Node")[0]}
    states = ledger.node_state(nodes)
    for name, state in states.items():
        assert {r: v for r, v in state.requested.items() if v} == {
            r: v for r, v in expected.get(name, {}).items() if v
        }, name
        allocatable = nodes[name].status.allocatable
        for resource, amount in state.requested.items():
            assert amount <= allocatable.get(resource, 0), f"{name} over {resource}"


def children_of(pid: int) -> set[int]:
    """Live (not zombie) child processes of ``pid`` that are binder children (not
    multiprocessing's resource tracker)."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            text = (task / "children").read_text()
        except OSError:
            continue
        for child in map(int, text.split()):
            try:
                cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
                state = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state != "Z" and b"resource_tracker" not in cmdline:
                found.add(child)
    return found


def log_text(proc: RoleProcess) -> str:
    assert proc.log_path is not None
    return proc.log_path.read_text(errors="replace")
