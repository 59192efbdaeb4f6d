"""A sorted set that a script fills with many members at once is a skiplist from the
start: as a listpack each member would cost a scan of the set (lib/bulk.lua, zadd_all and
skiplist_begin/skiplist_end), and the member that converts it is never left behind."""

from __future__ import annotations

import redis

from distsched.cache.ledger import Reserved
from distsched.clock import FakeClock
from distsched.keys import Keys
from distsched.queue_redis import RedisQueue
from distsched.queue_types import PodEntry, QueueConfig
from distsched.store import Store
from tests.cache.ledger_helpers import decision, make_ledger
from tests.support.objects import node, pod

MANY = 100  # under the 128 members at which Redis would convert the set itself
LISTPACK = (b"listpack", b"ziplist")


def entries(n: int) -> list[PodEntry]:
    return [PodEntry(f"ns/p{i:03d}", f"u{i}", priority=0) for i in range(n)]


def assert_skiplist_of(r: redis.Redis, key: str, n: int) -> None:
    assert r.object("encoding", key) == b"skiplist"
    members = r.zrange(key, 0, -1)
    assert len(members) == n
    assert all(b"/" in m for m in members)  # nothing but pods ("[ts|]ns/name")


def test_a_big_add_makes_activeq_a_skiplist(r: redis.Redis, keys: Keys, clock: FakeClock) -> None:
    queue = RedisQueue(r, keys)
    assert queue.add(entries(MANY), now_ms=clock.now_ms()) == MANY
    assert_skiplist_of(r, keys.active, MANY)


def test_a_small_add_leaves_the_set_compact(r: redis.Redis, keys: Keys, clock: FakeClock) -> None:
    queue = RedisQueue(r, keys)
    queue.add(entries(5), now_ms=clock.now_ms())
    assert r.object("encoding", keys.active) in LISTPACK
    assert r.zcard(keys.active) == 5


def test_a_big_pop_and_reservation_use_skiplists(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    queue = RedisQueue(r, keys)
    ledger = make_ledger(r, keys, clock)
    ledger.set_node("n1", {"cpu": 100_000, "memory": 1 << 40, "pods": 1_000})
    queue.add(entries(MANY), now_ms=clock.now_ms())
    popped = queue.pop(MANY, now_ms=clock.now_ms())
    assert not r.exists(keys.active)
    assert_skiplist_of(r, keys.inflight, MANY)

    results = ledger.reserve_batch(
        [decision(p.key, "n1", uid=p.uid, epoch=p.epoch) for p in popped]
    )
    assert all(isinstance(result, Reserved) for result in results)
    assert not r.exists(keys.inflight)
    assert_skiplist_of(r, keys.ledger_assumed, MANY)


def test_moves_back_to_activeq_use_a_skiplist(r: redis.Redis, keys: Keys, clock: FakeClock) -> None:
    queue = RedisQueue(r, keys, config=QueueConfig(initial_backoff_ms=1_000))
    queue.add(entries(2 * MANY), now_ms=clock.now_ms())
    popped = queue.pop(2 * MANY, now_ms=clock.now_ms())
    unschedulable, failed = popped[:MANY], popped[MANY:]
    for p in unschedulable:
        queue.add_unschedulable_if_not_present(
            p.key, epoch=p.epoch, plugins=["NodeResourcesFit"], now_ms=clock.now_ms()
        )
    for p in failed:
        queue.add_unschedulable_if_not_present(
            p.key, epoch=p.epoch, plugins=[], now_ms=clock.now_ms(), error=True
        )
    assert r.zcard(keys.unschedulable) == MANY and r.zcard(keys.backoff) == MANY

    clock.step(10_000)
    assert queue.flush_backoff_completed(now_ms=clock.now_ms()) == MANY
    assert_skiplist_of(r, keys.active, MANY)
    r.delete(keys.active)  # as if popped: the move below starts from an empty activeQ

    moved = queue.move_all_to_active_or_backoff(
        "NodeAdd", now_ms=clock.now_ms(), interested_plugins=None
    )
    assert moved == MANY
    assert_skiplist_of(r, keys.active, MANY)
    assert not r.exists(keys.backoff)


def test_creating_many_pending_pods_makes_activeq_a_skiplist(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    r.hset(keys.profiles, mapping={"default-scheduler": "g"})
    store = Store(r, keys, clock=clock)
    store.create_many([node("n1")] + [pod(f"p{i:03d}") for i in range(MANY)])
    assert_skiplist_of(r, keys.active, MANY)
