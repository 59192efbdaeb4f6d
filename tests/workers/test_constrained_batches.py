"""Pods with inter-pod constraints decided in batches, and what their decisions tell the
ledger they saw (in-process workers, real Redis, FakeClock)."""

from __future__ import annotations

import redis

from distsched.bench.checker import check
from distsched.clock import FakeClock
from distsched.keys import Keys
from tests.support.objects import ZONE, node, pod, zone_spread
from tests.workers.harness import InProcessCluster, decide_while_the_other_holds


def zone_anti_affinity(name: str) -> dict:
    obj = pod(name, labels={"app": "db"})
    term = {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": ZONE}
    obj["spec"]["affinity"] = {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    }
    return obj


def test_a_worker_that_never_saw_a_zone_anti_affinity_pod_does_not_place_next_to_it(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    """Worker A reserves db-1, whose anti-affinity forbids other db pods in its zone; it is
    assumed, not bound, so worker B's informer does not have it. B then learns the state
    of a node of that zone from the ledger (a refused decision hands it over), and decides
    db-2, a pod without constraints of its own that db-1's anti-affinity rejects. B must
    not count on that node's anti-affinity generation without the zone's pod lists."""
    cluster = InProcessCluster(r, keys, clock)
    other = cluster.add_worker()
    cluster.create(
        node("a1", labels={ZONE: "a"}),
        node("a2", labels={ZONE: "a"}),
        node("b1", labels={ZONE: "b"}),
    )
    cluster.handle_events()
    other.informer.poll_once(0)
    db1 = zone_anti_affinity("db-1")
    db1["spec"]["nodeSelector"] = {ZONE: "a"}  # a zone of two nodes: the case that matters
    cluster.create(db1)
    cluster.handle_events()
    cluster.schedule(cluster.pop())  # worker A reserves db-1; nothing binds it yet
    zone_of = {"a1": "a", "a2": "a", "b1": "b"}
    placed = cluster.worker.ledger.pod("default/db-1")
    assert placed is not None and placed.state == "assumed"

    plain = pod("db-2", labels={"app": "db"}, nodeSelector={ZONE: "a"})
    cluster.store.create(plain)
    while other.informer.poll_once(0):
        pass
    other.consumer.poll(None)
    # B learns the state of the other node of db-1's zone (a refused decision hands it
    # over), and so its anti-affinity generation, but nothing of db-1's node.
    neighbour = next(n for n, z in zone_of.items() if z == "a" and n != placed.node)
    other.view.apply_states(other.ledger.node_state([neighbour]))
    other.view.refresh_from_ledger()
    popped = other.queue.pop(8, now_ms=clock.now_ms())
    assert [p.key for p in popped] == ["default/db-2"]
    other.schedule_one_batch(popped)
    # db-1 forbids zone a to db-2, which may go nowhere else: it must not be placed
    # (were B to trust the neighbour's generation, it would take the emptier neighbour).
    assert zone_of[placed.node] == "a"
    assert other.ledger.pod("default/db-2") is None
    assert other.queue.where("default/db-2") in ("unschedulable", "backoff")
    cluster.bind()
    assert check(r, keys) == []


def test_spread_pods_of_one_batch_are_reserved_together_and_spread(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(*(node(f"{z}{i}", labels={ZONE: z}) for z in "abc" for i in range(3)))
    cluster.create(*(zone_spread(f"web-{i}") for i in range(12)))
    cluster.handle_events()
    calls = 0
    reserve = cluster.worker.ledger.reserve_batch

    def counting(decisions):  # type: ignore[no-untyped-def]
        nonlocal calls
        calls += 1
        return reserve(decisions)

    cluster.worker.ledger.reserve_batch = counting  # type: ignore[method-assign]
    cluster.schedule(cluster.pop())
    assert calls == 1  # one reservation call for the whole batch of constrained pods
    outcome = cluster.bind()
    assert len(outcome.bound) == 12
    zones = [cluster.node_of(f"web-{i}")[0] for i in range(12)]
    assert sorted(zones.count(z) for z in "abc") == [4, 4, 4]


def test_two_workers_deciding_one_spread_group_take_turns_without_conflict(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    """Batches that depend on the same multi-node key (the zone) hold its lock from the
    view's refresh to the reservation: the second worker waits, then decides on the first
    one's reservations instead of being refused."""
    cluster = InProcessCluster(r, keys, clock, batch=6)
    other = cluster.add_worker()
    cluster.create(*(node(f"{z}{i}", labels={ZONE: z}) for z in "abc" for i in range(3)))
    cluster.create(*(zone_spread(f"web-{i}") for i in range(12)))
    cluster.handle_events()
    while other.informer.poll_once(0):
        pass
    first = cluster.pop(6)
    second = other.queue.pop(6, now_ms=clock.now_ms())

    # B does not get to reserve while A holds the zone (were it not waiting, it would
    # reserve on the view it had, and A's reservation would refuse it or be refused).
    meanwhile, eventually = decide_while_the_other_holds(cluster.worker, first, other, second)
    assert not meanwhile and eventually
    assert cluster.worker.conflicts == 0 and other.conflicts == 0
    cluster.bind()
    zones = [cluster.node_of(f"web-{i}")[0] for i in range(12)]
    assert sorted(zones.count(z) for z in "abc") == [4, 4, 4]
    assert check(r, keys) == []
