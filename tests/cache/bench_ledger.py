"""Reservation throughput of the ledger: batches of decisions on many nodes, one client.

    python -m tests.cache.bench_ledger --redis-url redis://127.0.0.1:6379/10

Prints reservations/s (wall clock of reserve_batch, client encoding included) and the
Redis CPU per reservation, from INFO commandstats (EVALSHA usec) and INFO cpu (process
user+sys), both as deltas over the timed calls. The database is flushed before and after:
point it at a database of its own (and at a server of its own for a clean CPU figure).
"""

from __future__ import annotations

import argparse
import json
import random
import time

import redis

from distsched.cache.ledger import Decision, Ledger, LedgerConfig, Reserved
from distsched.clock import SYSTEM_CLOCK
from distsched.keys import Keys
from distsched.queue_types import encode_info

ZONE = "topology.kubernetes.io/zone"


def redis_cpu(client: redis.Redis) -> tuple[int, int, float]:
    """(EVALSHA calls, EVALSHA usec, server CPU seconds)."""
    stats = client.info("commandstats").get("cmdstat_evalsha", {"calls": 0, "usec": 0})
    cpu = client.info("cpu")
    return int(stats["calls"]), int(stats["usec"]), cpu["used_cpu_user"] + cpu["used_cpu_sys"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--batches", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    client = redis.Redis.from_url(args.redis_url)
    client.flushdb()
    keys = Keys("bench")
    ledger = Ledger(client, keys, SYSTEM_CLOCK, LedgerConfig(assume_ttl_ms=600_000))
    rng = random.Random(args.seed)
    nodes = [f"node-{i:05d}" for i in range(args.nodes)]
    size = {"cpu": 64_000, "memory": 256 << 30, "ephemeral-storage": 1 << 40, "pods": 110}
    for i, name in enumerate(nodes):
        ledger.set_node(name, size, {ZONE: f"zone-{i % 3}", "rack": f"rack-{i % 50}"})

    pods = [f"bench/pod-{i}" for i in range(args.batch * args.batches)]
    now = SYSTEM_CLOCK.now_ms()
    pipe = client.pipeline(transaction=False)
    for epoch, key in enumerate(pods, start=1):
        info = {"uid": key, "p": 0, "ts": now, "its": now, "a": 1, "w": "inflight"}
        info |= {"pl": "", "cy": epoch, "e": epoch, "d": 1, "bo": 0}
        pipe.hset(keys.info, key, encode_info(info))
        pipe.zadd(keys.inflight, {key: now + 600_000})
    pipe.execute()

    batches = []
    for b in range(args.batches):
        batch = []
        for epoch in range(b * args.batch + 1, (b + 1) * args.batch + 1):
            key = pods[epoch - 1]
            port = [("", "TCP", rng.randrange(30000, 30100))] if rng.random() < 0.2 else []
            batch.append(
                Decision(
                    pod_key=key,
                    uid=key,
                    epoch=epoch,
                    node=rng.choice(nodes),
                    requests={"cpu": rng.randrange(100, 500), "memory": rng.randrange(1, 8) << 27},
                    host_ports=port,
                )
            )
        batches.append(batch)

    calls0, usec0, cpu0 = redis_cpu(client)
    start = time.perf_counter()
    reserved = 0
    for batch in batches:
        reserved += sum(isinstance(x, Reserved) for x in ledger.reserve_batch(batch))
    elapsed = time.perf_counter() - start
    calls1, usec1, cpu1 = redis_cpu(client)
    assert ledger.check_consistency() == []
    client.flushdb()

    print(
        json.dumps(
            {
                "nodes": args.nodes,
                "batch": args.batch,
                "decisions": len(pods),
                "reserved": reserved,
                "seconds": round(elapsed, 3),
                "reservations_per_s": round(reserved / elapsed),
                "evalsha_calls": calls1 - calls0,
                "redis_script_us_per_reservation": round((usec1 - usec0) / reserved, 2),
                "redis_cpu_us_per_reservation": round((cpu1 - cpu0) * 1e6 / reserved, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
