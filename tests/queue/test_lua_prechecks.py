"""A queue script that meets a key someone set by hand fails with nothing written.

Redis does not roll back a script that fails half way. Before these checks, a non-numeric
``q:epoch`` made ``queue_pop`` fail after its ZPOPMIN: the popped pods were in no
sub-queue, and nothing ever reclaimed them. Each case below sets one bad key, calls the
move that would have failed half way, and checks the error names the script and the key
and that every key of the deployment is exactly as before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
import redis

from distsched.clock import FakeClock
from distsched.keys import Keys
from distsched.queue_redis import RedisQueue
from distsched.queue_types import PodEntry, QueueConfig


def contents(r: redis.Redis, keys: Keys) -> dict[bytes, tuple[bytes, bytes | None]]:
    """Every key of the deployment with its type and serialized value."""
    return {k: (r.type(k), r.dump(k)) for k in r.scan_iter(keys.pattern)}


@dataclass(frozen=True)
class Case:
    name: str
    setup: Callable[[RedisQueue, redis.Redis, Keys, FakeClock], None]
    corrupt: Callable[[redis.Redis, Keys], None]
    move: Callable[[RedisQueue, FakeClock], object]
    error: str  # a regex the error matches: the script and the key
    config: QueueConfig | None = None


def _active(queue: RedisQueue, _r: redis.Redis, _k: Keys, clock: FakeClock) -> None:
    queue.add([PodEntry(f"ns/p{i}", f"u{i}", 0) for i in range(20)], now_ms=clock.now_ms())


def _popped(queue: RedisQueue, r: redis.Redis, k: Keys, clock: FakeClock) -> None:
    _active(queue, r, k, clock)
    queue.pop(20, now_ms=clock.now_ms())


def _unschedulable(queue: RedisQueue, r: redis.Redis, k: Keys, clock: FakeClock) -> None:
    _popped(queue, r, k, clock)
    for i in range(20):
        queue.add_unschedulable_if_not_present(
            f"ns/p{i}", epoch=i + 1, plugins=["NodeResourcesFit"], now_ms=clock.now_ms()
        )
    clock.step(600_000)  # past the unschedulable leftover limit (5 min) and any backoff


def _backoff(queue: RedisQueue, r: redis.Redis, k: Keys, clock: FakeClock) -> None:
    _popped(queue, r, k, clock)
    for i in range(20):
        queue.add_unschedulable_if_not_present(
            f"ns/p{i}", epoch=i + 1, plugins=[], now_ms=clock.now_ms(), error=True
        )
    clock.step(60_000)


def _assumed(queue: RedisQueue, r: redis.Redis, k: Keys, clock: FakeClock) -> None:
    _popped(queue, r, k, clock)
    queue.assume([(f"ns/p{i}", i + 1, f"u{i}") for i in range(20)])


def _mixed(queue: RedisQueue, r: redis.Redis, k: Keys, clock: FakeClock) -> None:
    """ns/p0 active, ns/p1 dead-lettered."""
    queue.add([PodEntry("ns/p1", "u1", 5)], now_ms=clock.now_ms())
    for _ in range(queue.config.max_deliveries):
        queue.pop(1, now_ms=clock.now_ms())
        clock.step(60_000)
        queue.reclaim_expired_leases(now_ms=clock.now_ms())
    queue.pop(1, now_ms=clock.now_ms())
    assert queue.where("ns/p1") == "dead"
    queue.add([PodEntry("ns/p0", "u0", 0)], now_ms=clock.now_ms())


def _set(key: Callable[[Keys], str], value: str = "x") -> Callable[[redis.Redis, Keys], None]:
    def corrupt(r: redis.Redis, k: Keys) -> None:
        r.delete(key(k))
        r.set(key(k), value)

    return corrupt


def _pop(q: RedisQueue, c: FakeClock) -> object:
    return q.pop(20, now_ms=c.now_ms())


def _fail(q: RedisQueue, c: FakeClock) -> object:
    return q.add_unschedulable_if_not_present("ns/p0", epoch=1, plugins=[], now_ms=c.now_ms())


def _leftover(q: RedisQueue, c: FakeClock) -> object:
    return q.flush_unschedulable_leftover(now_ms=c.now_ms())


def _move_all(q: RedisQueue, c: FakeClock) -> object:
    return q.move_all_to_active_or_backoff("NodeAdd", now_ms=c.now_ms(), interested_plugins=None)


def _add(q: RedisQueue, c: FakeClock) -> object:
    pods = [PodEntry("ns/a", "ua", 0), PodEntry("ns/g", "ug", 0, gated=True)]
    return q.add(pods, now_ms=c.now_ms())


def _delete(q: RedisQueue, _c: FakeClock) -> object:
    return q.delete(["ns/p0", "ns/p1"])


def _flush_backoff(q: RedisQueue, c: FakeClock) -> object:
    return q.flush_backoff_completed(now_ms=c.now_ms())


def _reclaim(q: RedisQueue, c: FakeClock) -> object:
    return q.reclaim_expired_leases(now_ms=c.now_ms() + 60_000)


def _requeue(q: RedisQueue, c: FakeClock) -> object:
    return q.requeue_released([f"ns/p{i}" for i in range(20)], now_ms=c.now_ms())


def _update(q: RedisQueue, c: FakeClock) -> object:
    return q.update(PodEntry("ns/p0", "u0", 3), now_ms=c.now_ms())


def _nothing(_q: RedisQueue, _r: redis.Redis, _k: Keys, _c: FakeClock) -> None:
    pass


NOT_A_COUNTER = r"{}: .*q:{} is not a counter"
WRONG_TYPE = r"{}: .*q:{} holds a string, expected a {}"
NO_BACKOFF = QueueConfig(initial_backoff_ms=0, max_backoff_ms=0)
CASES = [
    Case("pop: q:epoch not a number", _active, _set(lambda k: k.epoch, "abc"), _pop,
         NOT_A_COUNTER.format("queue_pop", "epoch")),
    Case("pop: q:cycle not a number", _active, _set(lambda k: k.cycle, "1.5"), _pop,
         NOT_A_COUNTER.format("queue_pop", "cycle")),
    Case("pop: inflight of another type", _active, _set(lambda k: k.inflight), _pop,
         WRONG_TYPE.format("queue_pop", "inflight", "zset")),
    Case("add_unschedulable: q:move_cycle not a number", _popped,
         _set(lambda k: k.move_cycle, "abc"), _fail,
         NOT_A_COUNTER.format("queue_add_unschedulable", "move_cycle")),
    Case("flush_leftover: q:cycle not a number", _unschedulable, _set(lambda k: k.cycle, "abc"),
         _leftover, NOT_A_COUNTER.format("queue_flush_leftover", "cycle")),
    Case("move_all: q:cycle not a number", _unschedulable, _set(lambda k: k.cycle, "abc"),
         _move_all, NOT_A_COUNTER.format("queue_move_all", "cycle")),
    Case("add: gated of another type", _nothing, _set(lambda k: k.gated), _add,
         WRONG_TYPE.format("queue_add", "gated", "zset")),
    Case("delete: dead of another type", _mixed, _set(lambda k: k.dead), _delete,
         WRONG_TYPE.format("queue_delete", "dead", "zset")),
    Case("flush_backoff: wake of another type", _backoff, _set(lambda k: k.wake), _flush_backoff,
         WRONG_TYPE.format("queue_flush_backoff", "wake", "list")),
    Case("reclaim: wake of another type", _popped, _set(lambda k: k.wake), _reclaim,
         WRONG_TYPE.format("queue_reclaim", "wake", "list")),
    Case("requeue_released: wake of another type", _assumed, _set(lambda k: k.wake), _requeue,
         WRONG_TYPE.format("queue_requeue_released", "wake", "list"), NO_BACKOFF),
    Case("update: wake of another type", _unschedulable, _set(lambda k: k.wake), _update,
         WRONG_TYPE.format("queue_update", "wake", "list")),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_bad_key_fails_the_move_with_nothing_written(
    r: redis.Redis, keys: Keys, clock: FakeClock, case: Case
) -> None:
    queue = RedisQueue(r, keys, config=case.config)
    case.setup(queue, r, keys, clock)
    case.corrupt(r, keys)
    before = contents(r, keys)
    with pytest.raises(redis.ResponseError, match=case.error):
        case.move(queue, clock)
    assert contents(r, keys) == before


def test_pop_discards_an_active_member_that_names_no_pod(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    """A member without the "<ts>|" prefix (written by hand) is dropped, and the pods
    behind it are popped as usual."""
    queue = RedisQueue(r, keys)
    queue.add([PodEntry("ns/real", "u", 0)], now_ms=clock.now_ms())
    r.zadd(keys.active, {"no-bar": -10})
    assert [p.key for p in queue.pop(5, now_ms=clock.now_ms())] == ["ns/real"]
    assert r.zcard(keys.active) == 0
