"""Binder pool throughput: bindings per second with M binder processes.

    python -m distsched.bench.binder_pool [--processes M] [--pods P] [--nodes N] [--job-size B]
                                     [-o json]

Pods and nodes are created in the store, every pod is popped and reserved through the
ledger exactly as a scheduling worker does (no worker runs), then ``distsched binder
--processes M`` is started on a private embedded server (AOF fsync every second, as the
crash tests use) and, once its M rq workers are registered, the bindings are enqueued as
jobs of B. The figure is P / (time from the first enqueue until the last reservation is
confirmed). The run is then checked: every pod bound once, the ledger consistent.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import click
import redis
from rq import Worker

from distsched.bench.checker import BindHistory
from distsched.bench.procs import ProcessGroup
from distsched.binder.jobs import Binding, bind_queue, enqueue_bindings, queue_name
from distsched.cache.ledger import Ledger, LedgerConfig
from distsched.cache.ledger_types import Decision, Reserved
from distsched.clock import SYSTEM_CLOCK, Clock
from distsched.embedded import EmbeddedRedis
from distsched.framework.podinfo import PodInfo
from distsched.keys import Keys
from distsched.model import Node, Pod
from distsched.queue_redis import RedisQueue
from distsched.queue_types import PodEntry
from distsched.store import Store

CHUNK = 1000  # objects per store script call, decisions per reserve call


def node_manifest(name: str, *, cpu: str = "64", memory: str = "256Gi", pods: int = 110) -> dict:
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": str(pods)}},
    }


def pod_manifest(
    name: str, *, namespace: str = "default", cpu: str = "100m", memory: str = "128Mi"
) -> dict:
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "pause",
                    "resources": {"requests": {"cpu": cpu, "memory": memory}},
                }
            ]
        },
    }


def create_cluster(
    client: redis.Redis, keys: Keys, nodes: Sequence[dict], pods: Sequence[dict], clock: Clock
) -> None:
    """Nodes and pods in the store, nodes in the ledger, pods in activeQ."""
    store = Store(client, keys, clock=clock)
    ledger = Ledger(client, keys, clock)
    queue = RedisQueue(client, keys)
    for i in range(0, len(nodes), CHUNK):
        for obj in store.create_many(nodes[i : i + CHUNK]):
            ledger.set_node_from(Node.from_dict(obj))
    for i in range(0, len(pods), CHUNK):
        created = store.create_many(pods[i : i + CHUNK])
        entries = [
            PodEntry(
                f"{o['metadata']['namespace']}/{o['metadata']['name']}", o["metadata"]["uid"], 0
            )
            for o in created
        ]
        queue.add(entries, now_ms=clock.now_ms())


def reserve_round_robin(
    client: redis.Redis,
    keys: Keys,
    node_names: Sequence[str],
    clock: Clock,
    *,
    ledger_config: LedgerConfig | None = None,
    max_pods: int | None = None,
) -> list[Binding]:
    """Pop the queued pods and reserve pod i on node i mod N, as a worker would; returns
    the bindings a worker would enqueue."""
    ledger = Ledger(client, keys, clock, ledger_config)
    queue = RedisQueue(client, keys)
    bindings: list[Binding] = []
    while max_pods is None or len(bindings) < max_pods:
        want = CHUNK if max_pods is None else min(CHUNK, max_pods - len(bindings))
        popped = queue.pop(want, now_ms=clock.now_ms())
        if not popped:
            break
        objs = Store(client, keys).get_many("Pod", [p.key for p in popped])
        decisions: list[Decision] = []
        for queued, obj in zip(popped, objs, strict=True):
            if obj is None:
                raise RuntimeError(f"{queued.key} is queued but not in the store")
            pod = Pod.from_dict(obj)
            node = node_names[(len(bindings) + len(decisions)) % len(node_names)]
            decisions.append(
                Decision(
                    pod_key=queued.key,
                    uid=queued.uid,
                    epoch=queued.epoch,
                    node=node,
                    requests=PodInfo.of(pod).requests,
                )
            )
        results = ledger.reserve_batch(decisions)
        for queued, decision, result in zip(popped, decisions, results, strict=True):
            if not isinstance(result, Reserved):
                raise RuntimeError(f"reserving {queued.key} on {decision.node}: {result}")
            bindings.append(
                Binding(
                    pod_key=queued.key,
                    uid=queued.uid,
                    node=decision.node,
                    profile="default-scheduler",
                    cycle=queued.cycle,
                    epoch=queued.epoch,
                    token=str(queued.epoch),
                    initial_attempt_ms=queued.initial_attempt_ms,
                    attempts=queued.attempts,
                )
            )
    return bindings


def bind_events(client: redis.Redis, keys: Keys) -> dict[str, int]:
    """Pod key -> number of binds in the store's event stream (all incarnations)."""
    return BindHistory(client, keys).advance().per_pod()


@dataclass(frozen=True)
class BenchResult:
    processes: int
    pods: int
    nodes: int
    job_size: int
    enqueue_seconds: float
    seconds: float
    redis_cpu_seconds: float
    binder_cpu_seconds: float

    @property
    def bindings_per_second(self) -> float:
        return self.pods / self.seconds if self.seconds > 0 else float("inf")


def redis_cpu(client: redis.Redis) -> float:
    """CPU seconds the server has used (user + system, all threads)."""
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (Linux /proc)."""
    pids = [pid]
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            for child in (task / "children").read_text().split():
                pids += process_tree(int(child))
    return pids


def process_cpu(pids: Sequence[int]) -> float:
    """CPU seconds (user + system) the live processes ``pids`` have used."""
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def wait_for_binders(client: redis.Redis, keys: Keys, count: int, timeout_s: float = 30) -> None:
    queue = bind_queue(client, keys)
    deadline = time.monotonic() + timeout_s
    while len(Worker.all(queue=queue)) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{count} binder processes did not register in {timeout_s}s")
        time.sleep(0.05)


def run_bench(
    url: str, *, processes: int, pods: int, nodes: int, job_size: int, log_dir: Path | None
) -> BenchResult:
    keys = Keys("bench-binder")
    client = redis.Redis.from_url(url)
    clock = SYSTEM_CLOCK
    ttl = LedgerConfig(assume_ttl_ms=3_600_000)  # no reaping during the run
    node_names = [f"node-{i:05d}" for i in range(nodes)]
    per_node = -(-pods // nodes)
    create_cluster(
        client,
        keys,
        [node_manifest(n, pods=max(110, per_node)) for n in node_names],
        [pod_manifest(f"pod-{i:06d}", namespace="bench") for i in range(pods)],
        clock,
    )
    bindings = reserve_round_robin(client, keys, node_names, clock, ledger_config=ttl)
    ledger = Ledger(client, keys, clock)
    with ProcessGroup(url, scheduler=keys.scheduler, log_dir=log_dir) as group:
        group.spawn(
            "binder", "--processes", str(processes), "--assume-ttl-ms", str(ttl.assume_ttl_ms)
        )
        wait_for_binders(client, keys, processes)
        queue = bind_queue(client, keys)
        binders = process_tree(group.binders()[0].pid)
        cpu_before, binder_before = redis_cpu(client), process_cpu(binders)
        started = time.perf_counter()
        for i in range(0, len(bindings), job_size):
            enqueue_bindings(queue, keys, bindings[i : i + job_size])
        enqueued = time.perf_counter()
        while client.zcard(ledger.assumed_key):
            time.sleep(0.005)
        finished = time.perf_counter()
        cpu = redis_cpu(client) - cpu_before
        binder_cpu = process_cpu(binders) - binder_before
    binds = bind_events(client, keys)
    wrong = {k: n for k, n in binds.items() if n != 1}
    if len(binds) != pods or wrong or ledger.check_consistency():
        raise RuntimeError(f"bad run: {len(binds)} pods bound of {pods}, repeated: {wrong}")
    if client.llen(f"rq:queue:{queue_name(keys)}"):
        raise RuntimeError("jobs left in the binding queue")
    return BenchResult(
        processes, pods, nodes, job_size, enqueued - started, finished - started, cpu, binder_cpu
    )


@click.command()
@click.option("--processes", "process_counts", multiple=True, type=int, default=(1, 2))
@click.option("--pods", default=20_000, show_default=True)
@click.option("--nodes", default=500, show_default=True)
@click.option("--job-size", default=64, show_default=True, help="Bindings per rq job.")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table")
def main(
    process_counts: tuple[int, ...], pods: int, nodes: int, job_size: int, output: str
) -> None:
    """Bindings/s of the binder pool, one fresh private server per process count."""
    results = []
    for processes in process_counts:
        with tempfile.TemporaryDirectory(prefix="distsched-binder-bench-") as tmp:
            server = EmbeddedRedis(data_dir=Path(tmp) / "redis", appendfsync="everysec").start()
            try:
                results.append(
                    run_bench(
                        server.url,
                        processes=processes,
                        pods=pods,
                        nodes=nodes,
                        job_size=job_size,
                        log_dir=Path(tmp),
                    )
                )
            finally:
                server.stop()
    if output == "json":
        rows = [{**asdict(r), "bindings_per_second": r.bindings_per_second} for r in results]
        json.dump(rows, sys.stdout, indent=2)
        print()
        return
    for r in results:
        print(
            f"{r.processes} binder process(es): {r.pods} pods in jobs of {r.job_size}: "
            f"{r.bindings_per_second:,.0f} bindings/s ({r.seconds:.2f}s, "
            f"enqueue {r.enqueue_seconds:.2f}s, Redis busy {r.redis_cpu_seconds / r.seconds:.0%}, "
            f"CPU per binding: Redis {r.redis_cpu_seconds / r.pods * 1e6:.0f} us, "
            f"binders {r.binder_cpu_seconds / r.pods * 1e6:.0f} us)"
        )


if __name__ == "__main__":
    main()
