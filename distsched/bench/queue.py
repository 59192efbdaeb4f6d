"""Scheduling-queue throughput: add -> pop -> done round trips from a single client.

    python -m distsched.bench.queue [--pods N] [--batch B] [--redis-url URL] [-o json]

Batched: one script call adds B pods, one pops them, one marks them done.
Unbatched: three round trips per pod. Both figures are pods per second over the whole run.
The benchmark uses its own scheduler name (``Keys("bench-queue")``), starts from empty
queue keys and deletes them afterwards.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass

import click
import redis

from distsched.clock import SYSTEM_CLOCK
from distsched.keys import Keys
from distsched.queue_redis import RedisQueue
from distsched.queue_types import PodEntry

BENCH_KEYS = Keys("bench-queue")


@dataclass(frozen=True)
class RunResult:
    mode: str
    pods: int
    batch: int
    seconds: float

    @property
    def pods_per_second(self) -> float:
        return self.pods / self.seconds if self.seconds > 0 else float("inf")


def _entries(start: int, count: int) -> list[PodEntry]:
    return [PodEntry(f"bench/pod-{i}", f"uid-{i}", i % 10) for i in range(start, start + count)]


def _drain_check(queue: RedisQueue, mode: str) -> None:
    leftovers = {name: n for name, n in queue.counts().items() if n}
    if leftovers:
        raise RuntimeError(f"{mode} run left pods behind: {leftovers}")


def run_batched(queue: RedisQueue, pods: int, batch: int) -> RunResult:
    started = time.perf_counter()
    for start in range(0, pods, batch):
        count = min(batch, pods - start)
        now = SYSTEM_CLOCK.now_ms()
        queue.add(_entries(start, count), now_ms=now)
        popped = queue.pop(count, now_ms=now)
        accepted = queue.done_many([(p.key, p.epoch) for p in popped])
        if len(popped) != count or not all(accepted):
            raise RuntimeError(f"batch at {start}: popped {len(popped)} of {count}")
    seconds = time.perf_counter() - started
    _drain_check(queue, "batched")
    return RunResult("batched", pods, batch, seconds)


def run_unbatched(queue: RedisQueue, pods: int) -> RunResult:
    started = time.perf_counter()
    for entry in _entries(0, pods):
        now = SYSTEM_CLOCK.now_ms()
        queue.add([entry], now_ms=now)
        (pod,) = queue.pop(1, now_ms=now)
        if not queue.done(pod.key, epoch=pod.epoch):
            raise RuntimeError(f"done refused for {pod.key}")
    seconds = time.perf_counter() - started
    _drain_check(queue, "unbatched")
    return RunResult("unbatched", pods, 1, seconds)


def run(client: redis.Redis, *, pods: int, batch: int) -> list[RunResult]:
    queue = RedisQueue(client, BENCH_KEYS)
    results = []
    try:
        for runner in (lambda: run_batched(queue, pods, batch), lambda: run_unbatched(queue, pods)):
            queue.clear()
            results.append(runner())
    finally:
        queue.clear()
    return results


@click.command()
@click.option("--pods", default=50_000, show_default=True, help="Pods per run.")
@click.option("--batch", default=500, show_default=True, help="Pods per add/pop/done batch.")
@click.option(
    "--redis-url",
    default=lambda: os.environ.get("DISTSCHED_REDIS_URL", "redis://127.0.0.1:6379/0"),
    help="Redis to measure (default: $DISTSCHED_REDIS_URL or local db 0).",
)
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table")
def main(pods: int, batch: int, redis_url: str, output: str) -> None:
    """Measure add -> pop -> done throughput of the Redis scheduling queue."""
    if pods < 1 or batch < 1:
        raise click.BadParameter("--pods and --batch must be at least 1")
    client = redis.Redis.from_url(redis_url)
    try:
        results = run(client, pods=pods, batch=batch)
    finally:
        client.close()
    if output == "json":
        rows = [asdict(r) | {"pods_per_second": round(r.pods_per_second, 1)} for r in results]
        click.echo(json.dumps({"redis_url": redis_url, "runs": rows}))
        return
    click.echo(f"queue round trips (add -> pop -> done), {pods} pods, redis {redis_url}")
    for r in results:
        rate = f"{r.pods_per_second:>10,.0f} pods/s"
        click.echo(f"  {r.mode:<9}  batch {r.batch:>5}  {r.seconds:8.2f} s  {rate}")
    batched, unbatched = results
    click.echo(f"  batching speed-up: {batched.pods_per_second / unbatched.pods_per_second:.1f}x")


if __name__ == "__main__":
    main()
