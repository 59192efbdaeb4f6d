"""The ledger's hashes with a field per node are hash tables from their first node on: as
a listpack (Redis keeps one up to 512 short fields unless configured) every node of a
reservation batch would cost a scan of the whole hash (lib/bulk.lua, hashtable_encoding),
and the field that converts them is never left behind."""

from __future__ import annotations

import redis

from distsched.cache.ledger import Reserved
from distsched.clock import FakeClock
from distsched.keys import Keys
from distsched.model import LABEL_HOSTNAME
from distsched.queue_redis import RedisQueue
from distsched.queue_types import PodEntry
from tests.cache.ledger_helpers import decision, make_ledger

NODES = 20  # far under the entries at which Redis would convert a hash itself
ALLOCATABLE = {"cpu": 4_000, "memory": 32 << 30, "pods": 110}


def per_node_hashes(keys: Keys) -> list[str]:
    return [keys.ledger_usage, keys.ledger_capacity, keys.ledger_domain_gen]


def test_the_per_node_hashes_are_hash_tables_holding_only_nodes(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    ledger = make_ledger(r, keys, clock)
    names = [f"n{i:02d}" for i in range(NODES)]
    for name in names:
        ledger.set_node(name, ALLOCATABLE, {LABEL_HOSTNAME: name})
    for key in per_node_hashes(keys):
        assert r.object("encoding", key) == b"hashtable", key
        assert len(r.hkeys(key)) == NODES, key  # the converting field went out again
    assert sorted(k.decode() for k in r.hkeys(keys.ledger_usage)) == names

    queue = RedisQueue(r, keys)
    queue.add([PodEntry(f"ns/p{i}", f"u{i}", priority=0) for i in range(NODES)], now_ms=0)
    popped = queue.pop(NODES, now_ms=clock.now_ms())
    pairs = zip(popped, names, strict=True)
    results = ledger.reserve_batch(
        [decision(p.key, name, uid=p.uid, epoch=p.epoch) for p, name in pairs]
    )
    assert all(isinstance(result, Reserved) for result in results)
    assert r.object("encoding", keys.ledger_usage) == b"hashtable"
    assert len(r.hkeys(keys.ledger_usage)) == NODES


def test_one_node_makes_them_hash_tables(r: redis.Redis, keys: Keys, clock: FakeClock) -> None:
    make_ledger(r, keys, clock).set_node("n1", ALLOCATABLE, {})  # (its hostname is a domain)
    for key in per_node_hashes(keys):
        assert r.object("encoding", key) == b"hashtable", key
        assert r.hkeys(key) in ([b"n1"], [b"kubernetes.io/hostname=n1"]), key
