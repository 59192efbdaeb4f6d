"""The ledger against the real Redis queue: pop -> reserve -> bind / fail / reap."""

from __future__ import annotations

import redis

from distsched.cache.ledger import Ledger, Rejected, Reserved, Stale
from distsched.clock import FakeClock
from distsched.keys import Keys
from distsched.queue_redis import RedisQueue
from distsched.queue_types import PodEntry, QueueConfig, queue_invariant_violations
from tests.cache.ledger_helpers import SMALL, decision, make_ledger

TTL = 20_000


def check(queue: RedisQueue, ledger: Ledger) -> None:
    assert queue_invariant_violations(queue.dump()) == []
    assert ledger.check_consistency() == []


def test_pop_reserve_bind_fail_and_reap(r: redis.Redis, keys: Keys, clock: FakeClock) -> None:
    queue = RedisQueue(r, keys, config=QueueConfig(lease_ms=10_000))
    ledger = make_ledger(r, keys, clock, assume_ttl_ms=TTL)
    ledger.set_node("n1", SMALL)
    queue.add([PodEntry(f"ns/p{i}", f"u{i}", priority=0) for i in range(4)], now_ms=clock.now_ms())
    pods = queue.pop(4, now_ms=clock.now_ms())
    assert [p.key for p in pods] == ["ns/p0", "ns/p1", "ns/p2", "ns/p3"]
    results = ledger.reserve_batch(
        [decision(p.key, "n1", uid=p.uid, epoch=p.epoch, requests={"cpu": 400}) for p in pods[:3]]
        + [decision("ns/p3", "n1", uid="u3", epoch=pods[3].epoch + 100)]
    )
    bound, failed, too_big, stale = results
    assert isinstance(bound, Reserved) and isinstance(failed, Reserved)
    assert isinstance(too_big, Rejected) and isinstance(stale, Stale)
    assert queue.where("ns/p0") == "assumed" and queue.where("ns/p3") == "inflight"
    check(queue, ledger)

    # binder success, binder failure, and the worker's failure handler for the misfit
    assert ledger.confirm_bound("ns/p0", bound.token)
    assert queue.info("ns/p0") is None
    assert ledger.release("ns/p1", token=failed.token)
    now = clock.now_ms()
    assert (
        queue.add_unschedulable_if_not_present(
            "ns/p1", epoch=pods[1].epoch, plugins=[], now_ms=now, error=True
        )
        == "backoff"
    )
    queue.add_unschedulable_if_not_present(
        "ns/p2", epoch=pods[2].epoch, plugins=["NodeResourcesFit"], now_ms=now
    )
    check(queue, ledger)
    assert ledger.node_state(["n1"])["n1"].requested == {"cpu": 400, "pods": 1}

    # p3's own worker reserves, then dies before binding: the reaper puts p3 back
    p3 = pods[3]
    assert isinstance(ledger.reserve(decision("ns/p3", "n1", uid="u3", epoch=p3.epoch)), Reserved)
    clock.step(TTL)
    assert ledger.reap_expired_assumed() == ["ns/p3"]
    assert queue.where("ns/p3") == "backoff"
    check(queue, ledger)
    clock.step(1_000)
    queue.flush_backoff_completed(now_ms=clock.now_ms())
    popped = {p.key: p for p in queue.pop(10, now_ms=clock.now_ms())}
    assert set(popped) == {"ns/p1", "ns/p3"}  # both backoffs are over; p2 waits for an event
    again = popped["ns/p3"]
    assert again.epoch > p3.epoch
    assert isinstance(ledger.reserve(decision("ns/p3", "n1", uid="u3", epoch=p3.epoch)), Stale)
    assert isinstance(
        ledger.reserve(decision("ns/p3", "n1", uid="u3", epoch=again.epoch)), Reserved
    )
    check(queue, ledger)


def test_reserve_after_the_lease_was_reclaimed_is_stale(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    queue = RedisQueue(r, keys, config=QueueConfig(lease_ms=1_000))
    ledger = make_ledger(r, keys, clock)
    ledger.set_node("n1", SMALL)
    queue.add([PodEntry("ns/p", "u", priority=0)], now_ms=clock.now_ms())
    [slow] = queue.pop(1, now_ms=clock.now_ms())
    clock.step(1_000)
    assert queue.reclaim_expired_leases(now_ms=clock.now_ms()) == ["ns/p"]
    [fast] = queue.pop(1, now_ms=clock.now_ms())
    assert isinstance(ledger.reserve(decision("ns/p", "n1", uid="u", epoch=slow.epoch)), Stale)
    assert isinstance(ledger.reserve(decision("ns/p", "n1", uid="u", epoch=fast.epoch)), Reserved)
    check(queue, ledger)
