"""Redis CPU of the ledger's reservation script per decision, timed alone.

A whole ``distsched bench`` run's Redis figures move with everything else on the machine
(on a 2-core VM, ±20 % between runs minutes apart), so a change to cache_reserve, the
largest script per pod (BENCHMARKS.md "Past one Redis core"), is better costed here:
``--nodes`` nodes as the SchedulingBasic bench makes them, ``--pods`` pods added to and
popped from the real queue, and reserved in batches of ``--batch`` (a worker's pop), each
batch on distinct nodes, each decision as a worker sends it (cpu, memory, scoring's
non-zero extra, the node's pod count it saw). The figure is the server's own EVALSHA
time (INFO commandstats) over the reserve calls only, so run it on an otherwise idle
server:

    python -m distsched.bench.reserve_cost --redis-url redis://127.0.0.1:6391/9 [--repeat 3]

Its keys are a deployment of their own (``--scheduler``, default ``reserve-cost``),
deleted before and after.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator

import redis

from distsched.bench.lua_costs import evalsha_usec
from distsched.cache.ledger import Decision, Ledger, Reserved
from distsched.clock import FakeClock
from distsched.keys import Keys
from distsched.model import LABEL_HOSTNAME
from distsched.queue_redis import RedisQueue
from distsched.queue_types import PodEntry
from distsched.scan import delete_matching

ALLOCATABLE = {"cpu": 64_000, "memory": 256 << 30, "pods": 110}  # bench's node_manifest
REQUESTS = {"cpu": 100, "memory": 128 << 20}  # bench's pod_manifest


def _spread(nodes: int, batch: int) -> Iterator[list[int]]:
    """Node indexes of each batch: distinct within a batch, every node in turn."""
    step, at = 7919, 0  # a prime: with any node count not a multiple, a full cycle
    while True:
        chosen = []
        for _ in range(batch):
            at = (at + step) % nodes
            chosen.append(at)
        yield chosen


def measure(client: redis.Redis, keys: Keys, *, nodes: int, pods: int, batch: int) -> float:
    """µs of Redis CPU per reserved decision."""
    delete_matching(client, keys.pattern)
    try:
        return _measure(client, keys, nodes=nodes, pods=pods, batch=batch)
    finally:
        delete_matching(client, keys.pattern)


def _measure(client: redis.Redis, keys: Keys, *, nodes: int, pods: int, batch: int) -> float:
    clock = FakeClock(1_700_000_000_000)
    ledger = Ledger(client, keys, clock)
    queue = RedisQueue(client, keys)
    names = [f"node-{i}" for i in range(nodes)]
    for name in names:
        ledger.set_node(name, ALLOCATABLE, {LABEL_HOSTNAME: name})
    pods_on = [0] * nodes
    spent = reserved = 0
    spread = _spread(nodes, batch)
    for first in range(0, pods, batch):
        count = min(batch, pods - first)
        entries = [PodEntry(f"bench/p{i}", f"uid-p{i}", 0) for i in range(first, first + count)]
        queue.add(entries, now_ms=clock.now_ms())
        popped = queue.pop(count, now_ms=clock.now_ms())
        decisions = []
        for pod, index in zip(popped, next(spread), strict=False):
            decisions.append(
                Decision(
                    pod_key=pod.key,
                    uid=pod.uid,
                    epoch=pod.epoch,
                    node=names[index],
                    requests={**REQUESTS, "pods": 1},
                    nonzero=(REQUESTS["cpu"], REQUESTS["memory"]),
                    seen_pods=pods_on[index],
                )
            )
            pods_on[index] += 1
        before = evalsha_usec(client)
        results = ledger.reserve_batch(decisions)
        spent += evalsha_usec(client) - before
        reserved += sum(isinstance(r, Reserved) for r in results)
        if reserved != first + len(decisions):
            raise RuntimeError(f"a decision was not reserved: {results[:3]}")
    return spent / reserved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--scheduler", default="reserve-cost")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10_240)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table")
    args = parser.parse_args()
    if not 1 <= args.batch <= min(args.nodes, 1000):
        parser.error("--batch must be 1..1000 and at most --nodes")
    client = redis.Redis.from_url(args.redis_url)
    keys = Keys(args.scheduler)
    figures = [
        measure(client, keys, nodes=args.nodes, pods=args.pods, batch=args.batch)
        for _ in range(args.repeat)
    ]
    if args.output == "json":
        print(json.dumps({"cache_reserve_us_per_decision": figures}))
    else:
        for us in figures:
            print(f"cache_reserve: {us:.2f} us of Redis CPU per decision ({args.pods} decisions)")


if __name__ == "__main__":
    main()
