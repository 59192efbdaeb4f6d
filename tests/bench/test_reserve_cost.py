"""bench/reserve_cost: every decision is reserved and costed, and nothing is left behind."""

from __future__ import annotations

import pytest
import redis

from distsched.bench.reserve_cost import measure
from distsched.keys import Keys


def test_reserves_every_pod_costs_it_and_deletes_its_keys(r: redis.Redis) -> None:
    keys = Keys("reserve-cost-test")
    r.set("unrelated", "kept")
    us = measure(r, keys, nodes=30, pods=100, batch=16)
    assert us > 0
    assert not list(r.scan_iter(match=keys.pattern))
    assert r.get("unrelated") == b"kept"


def test_a_refused_decision_is_an_error(r: redis.Redis) -> None:
    # 3 nodes of 110 pods: the 331st pod finds every node full.
    keys = Keys("reserve-cost-test")
    with pytest.raises(RuntimeError, match="not reserved"):
        measure(r, keys, nodes=3, pods=340, batch=3)
    assert not list(r.scan_iter(match=keys.pattern))
