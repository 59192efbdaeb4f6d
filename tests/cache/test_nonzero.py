"""Scoring's non-zero requests summed per node in the ledger (``+cpu`` / ``+memory``)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import redis

from distsched.cache.ledger import Ledger, Reserved
from distsched.cache.ledger_types import (
    NodeUsage,
    UsageTail,
    nonzero_extra_requests,
    parse_usage_record,
    parse_usage_tail,
)
from distsched.clock import FakeClock
from distsched.keys import Keys
from tests.cache.ledger_helpers import (
    SMALL,
    ZONE,
    add_bound,
    decision,
    make_ledger,
    pop_like_queue,
)

MI = 1 << 20


@pytest.fixture
def ledger(r: redis.Redis, keys: Keys, clock: FakeClock) -> Ledger:
    led = make_ledger(r, keys, clock)
    led.set_node("n1", SMALL, {ZONE: "a"})
    return led


def test_extra_is_what_nonzero_adds_over_requests() -> None:
    assert nonzero_extra_requests({"cpu": 100}, (100, 200 * MI)) == {
        "cpu": 100,
        "+memory": 200 * MI,
    }
    assert nonzero_extra_requests({"cpu": 100, "memory": MI}, (100, MI)) == {
        "cpu": 100,
        "memory": MI,
    }
    assert nonzero_extra_requests({"cpu": 5}, None) == {"cpu": 5}


def test_reserve_release_and_bound_pods_sum_the_extra_apart_from_requests(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    # Nearly all of the node's cpu: the extra (a container without a memory request
    # counts 200Mi for scoring) is never checked against allocatable.
    pop_like_queue(r, keys, "ns/a", epoch=1, now_ms=clock.now_ms())
    pop_like_queue(r, keys, "ns/b", epoch=1, now_ms=clock.now_ms())
    a = replace(decision("ns/a", "n1", requests={"cpu": 900}), nonzero=(900, 200 * MI))
    b = replace(decision("ns/b", "n1", requests={}), nonzero=(100, 200 * MI))
    assert ledger.reserve_batch([a, b]) == [Reserved("1"), Reserved("1")]
    state = ledger.node_state(["n1"])["n1"]
    assert state.requested == {"cpu": 900, "pods": 2}
    assert state.nonzero_extra == (100, 400 * MI)
    _, usages, _ = ledger.changes_since(0)
    assert usages["n1"].requested == {"cpu": 900, "pods": 2}
    assert usages["n1"].nonzero_extra == (100, 400 * MI)

    add_bound(ledger, r, keys, "ns/c", "uid-c", "n1", {"memory": MI}, nonzero=(100, MI))
    assert ledger.node_state(["n1"])["n1"].nonzero_extra == (200, 400 * MI)
    assert ledger.release("ns/a")
    assert ledger.pod_deleted("ns/c")
    state = ledger.node_state(["n1"])["n1"]
    assert state.requested == {"pods": 1}
    assert state.nonzero_extra == (100, 200 * MI)
    assert ledger.check_consistency() == []


def test_parse_of_a_usage_record() -> None:
    usage = NodeUsage.parse("n1", "7|0|+cpu=100,+memory=5,cpu=250,pods=2")
    assert usage == NodeUsage("n1", 7, {"cpu": 250, "pods": 2}, 0, (100, 5))
    assert NodeUsage.parse("n1", "3|-1|cpu=1").nonzero_extra == (0, 0)


def test_a_usage_tail_is_parsed_once_for_every_node_that_has_it() -> None:
    tail = "2|+cpu=100,cpu=250,pods=2"
    parsed = parse_usage_tail(tail)
    assert parsed == UsageTail(2, {"cpu": 250, "pods": 2}, (100, 0))
    assert parse_usage_tail("2|+cpu=100,cpu=250,pods=2") is parsed  # shared, not re-parsed
    assert parse_usage_tail("") == UsageTail(0, {}, (0, 0))  # a node the ledger has none of
    assert parse_usage_tail("-1|cpu=1").host_ports == -1
    # a whole record: its generation, then the tail
    assert parse_usage_record("7|" + tail) == (7, parsed)
    assert parse_usage_record("") == (0, UsageTail(0, {}, (0, 0)))
    assert NodeUsage.parse("n1", "") == NodeUsage("n1", 0, {}, 0)
