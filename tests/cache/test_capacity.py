"""cache:capacity, the copy of each live node's allocatable that cache_reserve reads for a
whole batch in one command: kept with the node hash by cache_node_set and
cache_node_remove, trusted by the reservation, checked by the consistency check; a node
without one (a ledger written before it existed) is read from its hash."""

from __future__ import annotations

import redis

from distsched.cache.ledger import Ledger
from distsched.cache.ledger_types import Reserved
from distsched.clock import FakeClock
from distsched.keys import Keys
from tests.cache.ledger_helpers import add_bound, decision, make_ledger, pop_like_queue


def plain_ledger(r: redis.Redis, keys: Keys, clock: FakeClock) -> Ledger:
    """A ledger no constrained pod ever watched a topology key of: the batch reads no
    domains, so node allocatable comes from cache:capacity."""
    return make_ledger(r, keys, clock, watch=())


def reserve_cpu(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger, name: str, cpu: int
) -> str:
    """Reserve a pod of ``cpu`` millicores on n1: "R", or the refusal's reason."""
    pop_like_queue(r, keys, f"ns/{name}", epoch=1, now_ms=clock.now_ms())
    (result,) = ledger.reserve_batch([decision(f"ns/{name}", "n1", requests={"cpu": cpu})])
    return "R" if isinstance(result, Reserved) else str(getattr(result, "reason", result))


def test_a_node_set_writes_its_allocatable_there_and_a_removal_drops_it(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    ledger = plain_ledger(r, keys, clock)
    ledger.set_node("n1", {"pods": 10, "cpu": 2000, "memory": 1 << 30})
    assert r.hget(keys.ledger_capacity, "n1") == b"cpu=2000,memory=1073741824,pods=10"
    ledger.set_node("n1", {"cpu": 1000, "pods": 10})
    assert r.hget(keys.ledger_capacity, "n1") == b"cpu=1000,pods=10"
    assert ledger.check_consistency() == []
    ledger.remove_node("n1")
    assert r.hget(keys.ledger_capacity, "n1") is None


def test_a_reservation_checks_the_batch_against_it(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    ledger = plain_ledger(r, keys, clock)
    ledger.set_node("n1", {"cpu": 1000, "pods": 10})
    assert reserve_cpu(r, keys, clock, ledger, "a", 600) == "R"
    assert reserve_cpu(r, keys, clock, ledger, "b", 600) == "Insufficient cpu"
    # The copy is what the reservation reads: one that says less refuses what fits the
    # hash (and the consistency check names the node).
    r.hset(keys.ledger_capacity, "n1", "cpu=500,pods=10")
    assert reserve_cpu(r, keys, clock, ledger, "c", 300) == "Insufficient cpu"
    (difference,) = ledger.check_consistency()
    assert difference.node == "n1" and "cpu=500,pods=10" in difference.item


def test_a_node_without_one_is_read_from_its_hash(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    ledger = plain_ledger(r, keys, clock)
    ledger.set_node("n1", {"cpu": 1000, "pods": 10})
    r.delete(keys.ledger_capacity)  # a ledger from before cache:capacity
    assert ledger.check_consistency() == []
    assert reserve_cpu(r, keys, clock, ledger, "a", 600) == "R"
    assert reserve_cpu(r, keys, clock, ledger, "b", 600) == "Insufficient cpu"
    assert add_bound(ledger, r, keys, "ns/bound", "uid-bound", "n1", {"cpu": 100}) == "added"
    ledger.remove_node("n1")  # a ghost now (a bound pod keeps it): not live, from its hash
    assert reserve_cpu(r, keys, clock, ledger, "c", 1) == "node(s) not found"


def test_a_removed_node_that_keeps_one_is_a_difference(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    ledger = plain_ledger(r, keys, clock)
    ledger.set_node("n1", {"cpu": 1000, "pods": 10})
    assert add_bound(ledger, r, keys, "ns/bound", "uid-bound", "n1", {"cpu": 100}) == "added"
    ledger.remove_node("n1")  # a ghost: its bound pod keeps it in the ledger
    assert ledger.check_consistency() == []
    r.hset(keys.ledger_capacity, "n1", "cpu=1000,pods=10")
    (difference,) = ledger.check_consistency()
    assert (difference.node, difference.item) == ("n1", "capacity of a node that is not live")
