"""What only the Redis queue has: round trips, Lua argument checks, the wake list, layout."""

from __future__ import annotations

import re
import threading
import time
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import redis

from distsched.clock import FakeClock
from distsched.keys import Keys
from distsched.lua import ScriptSet
from distsched.queue_memory import MemoryQueue
from distsched.queue_redis import RedisQueue
from distsched.queue_types import (
    INFO_FIELDS,
    WAKE_CAP,
    PodEntry,
    SchedulingQueue,
    decode_info,
    encode_info,
)

LUA_DIR = resources.files("distsched.lua")
QUEUE_SCRIPTS = sorted(
    p.name for p in LUA_DIR.iterdir() if p.name.startswith("queue_") and p.name.endswith(".lua")
)


class CountingRedis(redis.Redis):
    """A real client that counts the commands it sends."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands: list[str] = []

    def execute_command(self, *args: Any, **options: Any) -> Any:
        self.commands.append(str(args[0]))
        return super().execute_command(*args, **options)


def entries(n: int, prefix: str = "p") -> list[PodEntry]:
    return [PodEntry(f"ns/{prefix}{i}", f"uid-{i}", i % 7) for i in range(n)]


def test_batches_are_one_round_trip(redis_url: str, r: redis.Redis, clock: FakeClock) -> None:
    client = CountingRedis(connection_pool=redis.ConnectionPool.from_url(redis_url))
    queue = RedisQueue(client, Keys("rt"))
    queue.add(entries(1), now_ms=clock.now_ms())  # loads the scripts
    (pod,) = queue.pop(1, now_ms=clock.now_ms())
    assert queue.done_many([(pod.key, pod.epoch)]) == [True]
    queue.delete([pod.key])
    client.commands.clear()
    assert queue.add(entries(1000, "b"), now_ms=clock.now_ms()) == 1000
    pods = queue.pop(1000, now_ms=clock.now_ms())
    assert len(pods) == 1000
    assert queue.done_many([(p.key, p.epoch) for p in pods[:500]]) == [True] * 500
    assert queue.delete([p.key for p in pods[500:]]) == 500
    assert client.commands == ["EVALSHA", "EVALSHA", "EVALSHA", "EVALSHA"]
    assert queue.counts()["inflight"] == 0
    client.close()


def test_scripts_reload_after_script_flush(r: redis.Redis, keys: Keys, clock: FakeClock) -> None:
    queue = RedisQueue(r, keys)
    queue.add(entries(2), now_ms=clock.now_ms())
    r.script_flush()
    assert len(queue.pop(2, now_ms=clock.now_ms())) == 2


def test_lua_validates_before_writing(r: redis.Redis, keys: Keys) -> None:
    scripts = ScriptSet(r)
    add_keys = [keys.info, keys.active, keys.gated, keys.wake]
    now = 1_700_000_000_000
    bad_batches: list[list[Any]] = [
        [now, WAKE_CAP, "ns/a", "u", 0, 0, "ns/b", "u", 2**31, 0],
        [now, WAKE_CAP, "ns/a", "u", 0, 0, "ns/b", "u", 1.5, 0],
        [now, WAKE_CAP, "ns/a", "u", 0, 0, "ns/b|x", "u", 0, 0],
        [now, WAKE_CAP, "ns/a", "u", 0, 0, "ns/b", "u", 0, 2],
        [now, WAKE_CAP, "ns/a", "u", 0],
        ["soon", WAKE_CAP, "ns/a", "u", 0, 0],
    ]
    for args in bad_batches:
        with pytest.raises(redis.ResponseError, match="queue_add"):
            scripts.get("queue_add")(keys=add_keys, args=args)
    assert r.dbsize() == 0
    bad_calls: list[tuple[str, list[str], list[Any]]] = [
        ("queue_pop", [keys.active] * 7, [0, now, 1000, 5]),
        ("queue_update", [keys.info] * 6, [now, WAKE_CAP, "ns/a", "u", "x", 0]),
        ("queue_done", [keys.info, keys.inflight], ["ns/a", "x"]),
        ("queue_done", [keys.info, keys.inflight], ["ns/a", 1, "ns/b"]),
        ("queue_add_unschedulable", [keys.info] * 5, ["ns/a", 1, "", now, 2, 1000, 10000]),
        ("queue_flush_backoff", [keys.backoff] * 4, [now, 0]),
        ("queue_flush_leftover", [keys.backoff] * 5, [now, "x", WAKE_CAP]),
        ("queue_move_all", [keys.info] * 7, [now, WAKE_CAP, 0, 2, "A"]),
        ("queue_move_all", [keys.info] * 7, [now, WAKE_CAP, 2, 0, 0]),
        ("queue_reclaim", [keys.inflight] * 4, ["x", WAKE_CAP]),
    ]
    for name, script_keys, args in bad_calls:
        with pytest.raises(redis.ResponseError, match=name):
            scripts.get(name)(keys=script_keys, args=args)
    assert r.dbsize() == 0


def test_info_is_one_readable_line_with_the_documented_fields(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    RedisQueue(r, keys).add([PodEntry("ns/a", "uid|a", -5)], now_ms=clock.now_ms())
    raw = r.hget(keys.info, "ns/a")
    assert raw is not None
    now = clock.now_ms()
    # w|e|cy|a|d|u|p|ts|its|bo|pl|uid, the uid last so that it may hold a "|".
    assert raw.decode() == f"active|0|0|0|0|0|-5|{now}|{now}|0||uid|a"
    info = decode_info("ns/a", raw)
    assert set(info) == set(INFO_FIELDS)
    assert encode_info(info) == raw.decode()
    assert (info["uid"], info["p"], info["w"]) == ("uid|a", -5, "active")
    assert r.zrange(keys.active, 0, -1, withscores=True) == [
        (f"{clock.now_ms():013d}|ns/a".encode(), 5.0)
    ]


def test_works_with_a_decoding_client(redis_url: str, r: redis.Redis, clock: FakeClock) -> None:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    queue = RedisQueue(client, Keys("text"))
    queue.add(entries(3), now_ms=clock.now_ms())
    assert [p.key for p in queue.pop(3, now_ms=clock.now_ms())] == ["ns/p2", "ns/p1", "ns/p0"]
    assert queue.reclaim_expired_leases(now_ms=clock.now_ms() + 10_000) == [
        "ns/p0",
        "ns/p1",
        "ns/p2",
    ]
    assert queue.dump().cycle == 3
    client.close()


def test_schedulers_do_not_share_queues(r: redis.Redis, clock: FakeClock) -> None:
    one, two = RedisQueue(r, Keys("one")), RedisQueue(r, Keys("two"))
    one.add(entries(2), now_ms=clock.now_ms())
    assert two.pop(5, now_ms=clock.now_ms()) == []
    assert len(one.pop(5, now_ms=clock.now_ms())) == 2
    one.clear()
    assert r.keys(Keys("one").pattern) == []


def test_active_member_without_info_is_discarded_by_pop(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    queue = RedisQueue(r, keys)
    queue.add([PodEntry("ns/real", "u", 0)], now_ms=clock.now_ms())
    r.zadd(keys.active, {"0000000000001|ns/orphan": -10})
    assert [p.key for p in queue.pop(5, now_ms=clock.now_ms())] == ["ns/real"]
    assert r.zcard(keys.active) == 0


def test_wake_list_is_capped_and_dropped_when_active_empties(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    queue = RedisQueue(r, keys)
    queue.add(entries(3), now_ms=clock.now_ms())
    assert r.llen(keys.wake) == 3
    queue.add(entries(WAKE_CAP * 2, "x"), now_ms=clock.now_ms())
    assert r.llen(keys.wake) == WAKE_CAP
    queue.pop(WAKE_CAP, now_ms=clock.now_ms())
    assert r.llen(keys.wake) == WAKE_CAP
    queue.pop(WAKE_CAP * 3, now_ms=clock.now_ms())
    assert r.exists(keys.wake) == 0
    assert len(queue.reclaim_expired_leases(now_ms=clock.now_ms() + 10_000)) == WAKE_CAP * 2 + 3
    assert r.llen(keys.wake) == WAKE_CAP


@pytest.fixture(params=["memory", "redis"])
def blocking_queue(request: pytest.FixtureRequest) -> SchedulingQueue:
    if request.param == "memory":
        return MemoryQueue()
    return RedisQueue(request.getfixturevalue("r"), Keys("blocking"))


def test_pop_blocking_wakes_on_add(blocking_queue: SchedulingQueue, clock: FakeClock) -> None:
    popped: list[list[str]] = []
    waiting = threading.Event()

    def worker() -> None:
        waiting.set()
        pods = blocking_queue.pop_blocking(2, timeout_s=10.0, clock=clock)
        popped.append([p.key for p in pods])

    thread = threading.Thread(target=worker)
    started = time.monotonic()
    thread.start()
    waiting.wait()
    blocking_queue.add(entries(1), now_ms=clock.now_ms())
    thread.join(timeout=10.0)
    assert popped == [["ns/p0"]]
    assert time.monotonic() - started < 5.0


def test_pop_blocking_returns_at_once_or_times_out(
    blocking_queue: SchedulingQueue, clock: FakeClock
) -> None:
    blocking_queue.add(entries(3), now_ms=clock.now_ms())
    assert len(blocking_queue.pop_blocking(5, timeout_s=10.0, clock=clock)) == 3
    started = time.monotonic()
    assert blocking_queue.pop_blocking(5, timeout_s=0.05, clock=clock) == []
    assert 0.04 <= time.monotonic() - started < 2.0


@pytest.mark.parametrize("script", QUEUE_SCRIPTS)
def test_every_script_header_lists_its_keys_and_argv(script: str) -> None:
    text = LUA_DIR.joinpath(script).read_text(encoding="utf-8")
    header = "\n".join(line for line in text.splitlines() if line.startswith("--"))
    body = "\n".join(line for line in text.splitlines() if not line.startswith("--"))
    assert "Returns:" in header
    for kind in ("KEYS", "ARGV"):
        for index in set(re.findall(kind + r"\[(\d+)\]", body)):
            assert re.search(rf"^-- {kind}\[{index}\]", header, re.M), f"{kind}[{index}]"
    assert "TIME" not in body and "redis.call('KEYS'" not in body and "SCAN" not in body


def test_every_queue_script_is_exercised_by_the_contract() -> None:
    source = Path(__file__).with_name("test_contract.py").read_text(encoding="utf-8")
    # Each script is named after the queue move that runs it.
    method_of = {
        "queue_add.lua": ".add(",
        "queue_update.lua": ".update(",
        "queue_delete.lua": ".delete(",
        "queue_pop.lua": ".pop(",
        "queue_done.lua": ".done(",
        "queue_forget.lua": ".forget(",
        "queue_add_unschedulable.lua": ".add_unschedulable_if_not_present(",
        "queue_flush_backoff.lua": ".flush_backoff_completed(",
        "queue_flush_leftover.lua": ".flush_unschedulable_leftover(",
        "queue_move_all.lua": ".move_all_to_active_or_backoff(",
        "queue_reclaim.lua": ".reclaim_expired_leases(",
        "queue_assume.lua": ".assume(",
        "queue_hand_back.lua": ".hand_back(",
        "queue_requeue_released.lua": ".requeue_released(",
        "queue_gang_min.lua": ".set_gang_minimums(",
    }
    assert set(method_of) == set(QUEUE_SCRIPTS)
    assert all(call in source for call in method_of.values())
