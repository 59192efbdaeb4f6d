"""Issue 24, item 4: the ledger counts in Lua doubles, so it accounts amounts up to the
model's MAX_AMOUNT (2^53-1); a decision beyond it is refused alone, never its batch."""

from __future__ import annotations

import pytest
import redis

from distsched.cache.ledger import Invalid, Reserved
from distsched.cache.ledger_types import check_count
from distsched.clock import FakeClock
from distsched.keys import Keys
from distsched.lua import ScriptSet
from distsched.model import MAX_AMOUNT
from distsched.queue_redis import RedisQueue
from distsched.queue_types import PodEntry
from tests.cache.ledger_helpers import SMALL, decision, make_ledger


def test_the_ledger_and_the_model_share_one_limit() -> None:
    assert check_count("amount", MAX_AMOUNT) == MAX_AMOUNT == 2**53 - 1
    with pytest.raises(ValueError, match="2\\^53-1"):
        check_count("amount", MAX_AMOUNT + 1)


def test_a_request_beyond_the_limit_is_refused_alone(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    queue = RedisQueue(r, keys)
    ledger = make_ledger(r, keys, clock)
    ledger.set_node("n1", SMALL)
    queue.add([PodEntry(f"ns/p{i}", f"u{i}", priority=0) for i in range(3)], now_ms=clock.now_ms())
    small, huge, other = queue.pop(3, now_ms=clock.now_ms())
    results = ledger.reserve_batch(
        [
            decision(small.key, "n1", uid=small.uid, epoch=small.epoch, requests={"cpu": 100}),
            decision(huge.key, "n1", uid=huge.uid, epoch=huge.epoch, requests={"cpu": 2**63 - 1}),
            decision(other.key, "n1", uid=other.uid, epoch=other.epoch, requests={"cpu": 100}),
        ]
    )
    assert isinstance(results[0], Reserved) and isinstance(results[2], Reserved)
    assert results[1] == Invalid(
        "request cpu: 9223372036854775807m exceeds the largest amount distsched can account"
        " (2^53-1 millicores)"
    )
    assert queue.where(huge.key) == "inflight"  # the worker's failure handler takes it
    assert ledger.node_state(["n1"])["n1"].requested["cpu"] == 200
    assert ledger.check_consistency() == []


def test_the_reserve_script_refuses_such_a_request_alone_too(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    """The script does not trust its caller: an amount a double cannot hold exactly is
    the one decision's fault ("I"), the others are reserved."""
    queue = RedisQueue(r, keys)
    ledger = make_ledger(r, keys, clock)
    ledger.set_node("n1", SMALL)
    queue.add([PodEntry(f"ns/p{i}", f"u{i}", priority=0) for i in range(2)], now_ms=clock.now_ms())
    huge, small = queue.pop(2, now_ms=clock.now_ms())
    node_keys = ledger.node_keys("n1")
    keys_ = [
        keys.inflight,
        keys.info,
        ledger.pods_key,
        ledger.assumed_key,
        ledger.domgen_key,
        ledger.aagen_key,
        ledger.aapods_key,
        ledger.topokeys_key,
        ledger.capacity_key,
        *node_keys,
        *ledger.feed_keys,
    ]
    deadline = clock.now_ms() + 30_000
    args: list[str | int] = [deadline, 0, 1, "n1"]
    for pod, cpu in ((huge, "9223372036854775807"), (small, "100")):
        args += [pod.key, pod.uid, pod.epoch, 1, f"cpu={cpu},pods=1", "", "", 0, 0, 0]
    script = ScriptSet(r).get("cache_reserve")
    flat = [x.decode() for x in script(keys=keys_, args=args)]
    kinds = list(zip(flat[::2], flat[1::2], strict=True))
    assert kinds[0][0] == "I" and "cpu" in kinds[0][1] and "2^53-1" in kinds[0][1]
    assert kinds[1] == ("R", str(small.epoch))
    assert ledger.node_state(["n1"])["n1"].requested["cpu"] == 100
