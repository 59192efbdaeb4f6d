"""Pods as a worker leaves them for the binder: reserved, their bindings in hand."""

from __future__ import annotations

import redis

from distsched.bench.binder_pool import (
    create_cluster,
    node_manifest,
    pod_manifest,
    reserve_round_robin,
)
from distsched.binder.jobs import Binding
from distsched.cache.ledger import LedgerConfig
from distsched.clock import FakeClock
from distsched.keys import Keys

TTL = LedgerConfig(assume_ttl_ms=30_000)
NODES = ["node-a", "node-b"]


def reserved(r: redis.Redis, keys: Keys, clock: FakeClock, pods: int) -> list[Binding]:
    """``pods`` pods reserved round-robin on two nodes, as a worker leaves them."""
    create_cluster(
        r,
        keys,
        [node_manifest(n, cpu="4", memory="8Gi", pods=10) for n in NODES],
        [pod_manifest(f"p{i}", cpu="500m") for i in range(pods)],
        clock,
    )
    return reserve_round_robin(r, keys, NODES, clock, ledger_config=TTL)
