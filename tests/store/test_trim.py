"""Issue 24, item 1: the event streams are trimmed by what their readers have read, so
Redis memory follows the live cluster rather than the run's length (real Redis)."""

from __future__ import annotations

import redis

from distsched.clock import FakeClock
from distsched.keys import Keys
from distsched.store import Informer, Store, trim
from distsched.workers.eventhandlers import GROUP


def first_rv(r: redis.Redis, key: str) -> int:
    [(entry_id, _)] = r.xrange(key, count=1)
    return int(entry_id.split(b"-")[0])


def make_pods(store: Store, n: int, prefix: str = "p") -> None:
    store.create_many(
        [
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{prefix}-{i}"}, "spec": {}}
            for i in range(n)
        ]
    )


def test_the_store_stream_is_kept_from_the_slowest_live_reader(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    store = Store(r, keys, clock=clock)
    make_pods(store, 200)
    now = clock.now_ms()
    trim.report_position(r, keys, "fast", 180, now)
    trim.report_position(r, keys, "slow", 50, now - 1_000)
    trim.report_position(r, keys, "gone", 10, now - trim.READER_TTL_MS - 1)
    removed = trim.trim_store_events(r, keys, now_ms=now, keep=10, approximate=False)
    assert removed == 50 and first_rv(r, keys.events) == 51
    assert set(trim.readers(r, keys)) == {"fast", "slow"}  # the silent one is dropped
    trim.forget_reader(r, keys, "slow")
    trim.trim_store_events(r, keys, now_ms=now, keep=10, approximate=False)
    assert first_rv(r, keys.events) == 181  # min(200 - 10 + 1, 180 + 1)
    trim.forget_reader(r, keys, "fast")
    trim.trim_store_events(r, keys, now_ms=now, keep=10, approximate=False)
    assert r.xlen(keys.events) == 10  # nobody reads: the tail for operators stays


def test_the_queue_stream_keeps_what_its_group_has_not_acknowledged(
    r: redis.Redis, keys: Keys
) -> None:
    assert trim.trim_queue_events(r, keys, GROUP) == 0  # no stream, no group yet
    for rv in range(1, 11):
        r.xadd(keys.queue_events, {"rv": rv}, id=f"{rv}-0")
    r.xgroup_create(keys.queue_events, GROUP, id="0")
    delivered = r.xreadgroup(GROUP, "a", {keys.queue_events: ">"}, count=6)[0][1]
    r.xack(keys.queue_events, GROUP, *[entry_id for entry_id, _ in delivered[:3]])
    # Delivered but not acknowledged (4..6): kept, for XAUTOCLAIM by another worker.
    assert trim.trim_queue_events(r, keys, GROUP, approximate=False) == 3
    assert first_rv(r, keys.queue_events) == 4
    r.xack(keys.queue_events, GROUP, *[entry_id for entry_id, _ in delivered[3:]])
    # All delivered ones acknowledged: the rest (7..10) is not delivered yet.
    assert trim.trim_queue_events(r, keys, GROUP, approximate=False) == 3
    assert first_rv(r, keys.queue_events) == 7 and r.xlen(keys.queue_events) == 4


def test_an_informer_reports_its_position_and_withdraws_it(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    store = Store(r, keys, clock=clock)
    make_pods(store, 5)
    informer = Informer(r, keys, ("Pod",), reader="w1", clock=clock)
    informer.poll_once(0)  # the initial list reports at once
    assert trim.readers(r, keys)["w1"] == (5, clock.now_ms())
    make_pods(store, 3, prefix="q")
    informer.poll_once(0)
    clock.step(trim.REPORT_INTERVAL_MS)
    informer.poll_once(0)  # reports at most every REPORT_INTERVAL_MS
    assert trim.readers(r, keys)["w1"] == (8, clock.now_ms())
    informer.stop()
    assert "w1" not in trim.readers(r, keys)


def test_an_informer_trimmed_past_relists_and_misses_nothing(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    store = Store(r, keys, clock=clock)
    informer = Informer(r, keys, ("Pod",), reader="stalled", clock=clock)
    informer.poll_once(0)
    make_pods(store, 50)
    # It stalls past the reader TTL; the trim no longer waits for it.
    clock.step(trim.READER_TTL_MS + 1)
    trim.trim_store_events(r, keys, now_ms=clock.now_ms(), keep=5, approximate=False)
    relists = informer.relists
    while informer.poll_once(0):
        pass
    assert informer.relists == relists + 1
    assert len(informer.list("Pod")) == 50
