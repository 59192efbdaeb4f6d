"""Acknowledged means replicated, in-process against a real primary and replica: one WAIT
per script batch (counted by the primary's INFO commandstats), none without a policy, and
an acknowledgement that also covers writes made on other connections."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from distsched.bench.binder_pool import node_manifest, pod_manifest
from distsched.cache.ledger import Ledger
from distsched.cache.ledger_types import Reserved
from distsched.clock import FakeClock
from distsched.connection import RedisOptions, connect
from distsched.keys import Keys
from distsched.queue_redis import RedisQueue
from distsched.queue_types import PodEntry
from distsched.replication import NotReplicated, acknowledge, batch
from distsched.store import Store
from distsched.workers.eventhandlers import GROUP, EventConsumer
from tests.cache.ledger_helpers import decision, pop_like_queue
from tests.reliability.sentinels import Node, SentinelCluster

KEYS = Keys("acks")


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SentinelCluster]:
    cluster = SentinelCluster(tmp_path_factory.mktemp("pair"), sentinel_count=0).start()
    yield cluster
    cluster.stop()


def waits(primary: Node) -> int:
    stats = primary.client().info("commandstats")
    return int(stats.get("cmdstat_wait", {}).get("calls", 0))


def acked_client(primary: Node, replicas: int = 1, timeout_ms: int = 1000) -> redis.Redis:
    url = f"redis://127.0.0.1:{primary.port}/0"
    return connect(RedisOptions(url, min_replicas_ack=replicas, ack_timeout_ms=timeout_ms))


def test_one_wait_per_batch(pair: SentinelCluster) -> None:
    primary = pair.data[0]
    client = acked_client(primary)
    client.flushdb()
    store = Store(client, KEYS)
    before = waits(primary)
    store.apply_many([pod_manifest(f"p{i}") for i in range(50)])
    assert waits(primary) - before == 1
    store.apply_many([node_manifest("n1", cpu="64", memory="64Gi", pods=110)])
    results = store.bind_many([(f"default/p{i}", None, "n1") for i in range(50)])
    assert all(r == "bound" for r in results)
    store.delete("Pod", "default/p0")
    assert waits(primary) - before == 4  # apply_many, apply_many, bind_many, delete

    queue = RedisQueue(client, KEYS)
    queue.add([PodEntry(f"default/q{i}", f"u{i}", 0) for i in range(30)], now_ms=1_000)
    mark = waits(primary)
    assert len(queue.pop(30, now_ms=2_000)) == 30
    assert queue.pop(30, now_ms=2_000) == []  # nothing popped: nothing to acknowledge
    assert waits(primary) - mark == 1

    clock = FakeClock(10_000)
    ledger = Ledger(client, KEYS, clock)
    ledger.set_node("n2", {"cpu": 64_000, "memory": 1 << 36, "pods": 110})
    for i in range(20):
        pop_like_queue(client, KEYS, f"default/r{i}", epoch=100 + i, now_ms=10_000)
    mark = waits(primary)
    reserved = ledger.reserve_batch(
        [decision(f"default/r{i}", "n2", epoch=100 + i) for i in range(20)]
    )
    assert all(isinstance(r, Reserved) for r in reserved), reserved
    assert waits(primary) - mark == 1


def test_no_wait_without_a_policy(pair: SentinelCluster) -> None:
    primary = pair.data[0]
    client = connect(RedisOptions(f"redis://127.0.0.1:{primary.port}/0"))
    store = Store(client, Keys("plain"))
    before = waits(primary)
    store.apply_many([pod_manifest(f"x{i}") for i in range(10)])
    store.delete("Pod", "default/x1")
    assert waits(primary) == before


def test_acknowledgement_covers_writes_of_other_connections(pair: SentinelCluster) -> None:
    """WAIT alone only covers the calling connection's writes: on a pooled connection that
    wrote nothing lately it passes at once while the replica lags behind a write made on
    another connection. The marker write makes it cover what any connection wrote."""
    primary, replica = pair.data
    client = acked_client(primary, timeout_ms=300)
    other = primary.client()
    bare = redis.Redis(port=primary.port)
    # A pooled connection that wrote nothing since before the write below; its WAIT here
    # also makes the replica report its offset before it stops.
    assert bare.execute_command("WAIT", 1, 2000) == 1
    replica.signal(signal.SIGSTOP)
    try:
        other.set(KEYS.tag + ":written-elsewhere", 1)
        assert bare.execute_command("WAIT", 1, 300) == 1  # the trap the marker avoids
        started = time.monotonic()
        with pytest.raises(NotReplicated, match="acknowledged by 0 of 1"):
            acknowledge(client, KEYS.ack, "test write")
        assert time.monotonic() - started >= 0.25
    finally:
        replica.signal(signal.SIGCONT)
    pair.wait_replicas_online(primary, 1)
    acknowledge(client, KEYS.ack, "test write")  # caught up: acknowledged


def test_failed_store_write_reports_failure_not_success(pair: SentinelCluster) -> None:
    primary, replica = pair.data
    client = acked_client(primary, timeout_ms=300)
    store = Store(client, KEYS)
    replica.signal(signal.SIGSTOP)
    try:
        with pytest.raises(NotReplicated, match="create"):
            store.create(pod_manifest("unacked"))
        # Store calls inside one batch: a single wait for both, failing for both.
        before = waits(primary)
        with pytest.raises(NotReplicated, match=r"\(\+\d+ more\)"), batch(client, KEYS.ack):
            store.apply(pod_manifest("a1"))
            store.apply(pod_manifest("a2"))
        assert waits(primary) - before == 1
    finally:
        replica.signal(signal.SIGCONT)
    pair.wait_replicas_online(primary, 1)


class _Recorder:
    """Stands in for the queue handlers: records which events reached them."""

    def __init__(self) -> None:
        self.keys: list[str] = []

    def handle(self, events: list[Any]) -> None:
        self.keys += [event.key for event in events]


def test_after_an_outage_a_consumer_rereads_what_it_was_delivered_but_never_acked(
    r: redis.Redis,
) -> None:
    """A failover can keep an event's delivery to a consumer (its pending entry) and lose
    the queue moves made for it. Without rereading, the event would wait for XAUTOCLAIM's
    idle time (30 s); run_worker calls reread_pending() when Redis is back."""
    keys = Keys("reread")
    recorder = _Recorder()
    consumer = EventConsumer(r, keys.queue_events, "w1", recorder)  # type: ignore[arg-type]
    Store(r, keys).create(pod_manifest("lost-move"))
    r.xreadgroup(GROUP, "w1", {keys.queue_events: ">"}, count=10)  # delivered, moves "lost"
    assert consumer.poll(None) == 0 and recorder.keys == []  # ">" never returns it again
    consumer.reread_pending()
    assert consumer.poll(None) == 1
    assert recorder.keys == ["default/lost-move"]
    assert r.xpending(keys.queue_events, GROUP)["pending"] == 0  # handled and acknowledged
    assert consumer.poll(None) == 0  # back to new events only
