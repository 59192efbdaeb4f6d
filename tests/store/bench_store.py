"""Store write throughput, single client: create_many (batches of 500), bind_many (of 100).

Run: ``python -m tests.store.bench_store --redis-url redis://127.0.0.1:6379/13 --pods 50000``
(it FLUSHDBs that database first).
"""

from __future__ import annotations

import argparse
import time

import redis

from distsched.keys import Keys
from distsched.store import BindRequest, Store
from tests.store.helpers import make_pod


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/13")
    parser.add_argument("--pods", type=int, default=50_000)
    parser.add_argument("--create-batch", type=int, default=500)
    parser.add_argument("--bind-batch", type=int, default=100)
    parser.add_argument("--nodes", type=int, default=5_000)
    args = parser.parse_args()

    client = redis.Redis.from_url(args.redis_url)
    client.flushdb()
    store = Store(client, Keys("bench"))
    pods = [make_pod(f"p{i}", namespace=f"ns{i % 10}") for i in range(args.pods)]

    start = time.perf_counter()
    for i in range(0, len(pods), args.create_batch):
        store.create_many(pods[i : i + args.create_batch])
    create_s = time.perf_counter() - start

    bindings = [
        BindRequest(f"ns{i % 10}/p{i}", None, f"node-{i % args.nodes}") for i in range(args.pods)
    ]
    start = time.perf_counter()
    for i in range(0, len(bindings), args.bind_batch):
        results = store.bind_many(bindings[i : i + args.bind_batch])
        assert all(r.status == "bound" for r in results), results
    bind_s = time.perf_counter() - start

    blob = client.hget(store.keys.objects("Pod"), "ns0/p0") or b""
    print(f"pods={args.pods} stored pod size={len(blob)} B")
    print(f"create_many(batch={args.create_batch}): {args.pods / create_s:,.0f} creates/s")
    print(f"bind_many(batch={args.bind_batch}): {args.pods / bind_s:,.0f} binds/s")
    print(f"events in stream: {client.xlen(store.keys.events)}")
    client.flushdb()


if __name__ == "__main__":
    main()
