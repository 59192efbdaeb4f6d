"""cache_reserve: fit, ports, fencing, batches, domain and anti-affinity generations."""

from __future__ import annotations

import json

import pytest
import redis

from distsched.cache.ledger import Invalid, Ledger, Rejected, Reserved, Stale
from distsched.cache.ledger_types import domain
from distsched.clock import FakeClock
from distsched.keys import Keys
from distsched.lua import ScriptSet
from distsched.queue_redis import RedisQueue
from tests.cache.ledger_helpers import (
    SMALL,
    ZONE,
    add_bound,
    decision,
    info_of,
    make_ledger,
    pop_like_queue,
    snapshot_db,
)


@pytest.fixture
def ledger(r: redis.Redis, keys: Keys, clock: FakeClock) -> Ledger:
    led = make_ledger(r, keys, clock, assume_ttl_ms=30_000)
    led.set_node("n1", SMALL, {ZONE: "a"})
    led.set_node("n2", SMALL, {ZONE: "a"})
    led.set_node("n3", SMALL, {ZONE: "b"})
    return led


def popped(r: redis.Redis, keys: Keys, clock: FakeClock, *pods: str, epoch: int = 1) -> None:
    for pod in pods:
        pop_like_queue(r, keys, pod, epoch=epoch, now_ms=clock.now_ms())


def test_reserve_records_assumed_pod_and_charges_the_node(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    popped(r, keys, clock, "ns/p1", epoch=7)
    before = ledger.node_state(["n1"])["n1"]
    [result] = ledger.reserve_batch(
        [decision("ns/p1", "n1", epoch=7, ports=[("", "", 8080)], anti_affinity_keys=[ZONE])]
    )
    assert result == Reserved("7")
    after = ledger.node_state(["n1"])["n1"]
    assert after.requested == {"cpu": 100, "memory": 1 << 20, "pods": 1}
    assert after.ports == (("0.0.0.0", "TCP", 8080),)
    assert after.pods == ("ns/p1",)
    assert after.generation == before.generation + 1
    for dom, gen in before.domain_gens.items():
        assert after.domain_gens[dom] == gen + 1
    assert after.anti_affinity_gens[domain(ZONE, "a")] == 1
    record = ledger.pod("ns/p1")
    assert record is not None
    assert (record.state, record.node, record.token) == ("assumed", "n1", "7")
    assert record.deadline_ms == clock.now_ms() + 30_000
    assert r.zscore(keys.inflight, "ns/p1") is None
    info = info_of(r, keys, "ns/p1")
    assert info is not None and info["w"] == "assumed" and info["e"] == 7
    assert ledger.anti_affinity_pods() == {"ns/p1": "n1"}
    assert ledger.check_consistency() == []


def test_resource_fit_is_checked_for_every_resource(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    popped(r, keys, clock, "ns/big", "ns/gpu", "ns/zero", "ns/ok")
    results = ledger.reserve_batch(
        [
            decision("ns/big", "n1", requests={"cpu": 1001, "memory": 2 << 30}),
            decision("ns/gpu", "n1", requests={"example.com/gpu": 1}),
            decision("ns/ok", "n1", requests={"cpu": 1000}),
            # nothing requested but the pod slot: fits although all cpu is taken
            decision("ns/zero", "n1", requests={}),
        ]
    )
    big, gpu, ok, zero = results
    assert isinstance(big, Rejected) and big.reason == "Insufficient cpu, Insufficient memory"
    assert isinstance(gpu, Rejected) and gpu.reason == "Insufficient example.com/gpu"
    assert isinstance(ok, Reserved) and isinstance(zero, Reserved)
    state = big.node_state
    assert state is not None and state.requested["cpu"] == 1000 and state.allocatable == SMALL
    assert r.zscore(keys.inflight, "ns/big") is not None  # still the worker's to retry


def test_pod_count_is_a_resource(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    ledger.set_node("tiny", {"cpu": 10_000, "pods": 2})
    pods = [f"ns/p{i}" for i in range(3)]
    popped(r, keys, clock, *pods)
    results = ledger.reserve_batch([decision(p, "tiny", requests={"cpu": 1}) for p in pods])
    assert [type(x) for x in results] == [Reserved, Reserved, Rejected]
    assert isinstance(results[2], Rejected) and results[2].reason == "Insufficient pods"


def test_batch_sees_its_own_earlier_decisions(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    popped(r, keys, clock, "ns/a", "ns/b", "ns/c", "ns/d")
    half = {"cpu": 500}
    results = ledger.reserve_batch(
        [
            decision("ns/a", "n1", requests=half),
            decision("ns/b", "n1", requests=half),
            decision("ns/c", "n1", requests=half),  # third half-node pod: over by 500
            decision("ns/d", "n2", requests=half),
            decision("ns/a", "n2", requests=half),  # same pod twice: already taken
        ]
    )
    assert [type(x) for x in results] == [Reserved, Reserved, Rejected, Reserved, Stale]
    state = ledger.node_state(["n1", "n2"])
    assert state["n1"].requested["cpu"] == 1000 and state["n1"].pods == ("ns/a", "ns/b")
    assert state["n2"].requested["cpu"] == 500 and state["n2"].pods == ("ns/d",)
    assert ledger.check_consistency() == []


def test_stale_epoch_writes_nothing(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    popped(r, keys, clock, "ns/p", epoch=5)
    pop_like_queue(r, keys, "ns/q", epoch=6, now_ms=clock.now_ms(), uid="new-uid")
    before = snapshot_db(r)
    results = ledger.reserve_batch(
        [
            decision("ns/p", "n1", epoch=4),  # a lease that expired and was re-popped
            decision("ns/q", "n1", epoch=6, uid="old-uid"),  # pod recreated under the name
            decision("ns/gone", "n1"),  # never popped
        ]
    )
    assert [type(x) for x in results] == [Stale, Stale, Stale]
    assert snapshot_db(r) == before


def test_stale_and_fresh_in_one_batch(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    popped(r, keys, clock, "ns/p", epoch=5)
    popped(r, keys, clock, "ns/q", epoch=9)
    stale, fresh = ledger.reserve_batch(
        [decision("ns/p", "n1", epoch=4), decision("ns/q", "n1", epoch=9)]
    )
    assert isinstance(stale, Stale) and fresh == Reserved("9")
    assert ledger.node_state(["n1"])["n1"].pods == ("ns/q",)
    assert r.zscore(keys.inflight, "ns/p") is not None


def test_pod_already_holding_a_reservation_is_not_reserved_twice(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    add_bound(ledger, r, keys, "ns/p", "uid-ns/p", "n1", {"cpu": 100})
    popped(r, keys, clock, "ns/p")
    [result] = ledger.reserve_batch([decision("ns/p", "n2")])
    assert isinstance(result, Stale)
    add_bound(ledger, r, keys, "ns/q", "old", "n1", {"cpu": 100})
    popped(r, keys, clock, "ns/q")
    [result] = ledger.reserve_batch([decision("ns/q", "n2")])
    assert isinstance(result, Rejected) and "previous pod" in result.reason
    assert ledger.node_state(["n2"])["n2"].pods == ()


@pytest.mark.parametrize(
    ("held", "wanted", "conflict"),
    [
        (("10.0.0.1", "TCP", 80), ("10.0.0.1", "TCP", 80), True),
        (("10.0.0.1", "TCP", 80), ("10.0.0.2", "TCP", 80), False),
        (("10.0.0.1", "TCP", 80), ("10.0.0.1", "UDP", 80), False),
        (("10.0.0.1", "TCP", 80), ("10.0.0.1", "TCP", 81), False),
        (("10.0.0.1", "TCP", 80), ("0.0.0.0", "TCP", 80), True),
        (("0.0.0.0", "TCP", 80), ("10.0.0.1", "TCP", 80), True),
        (("", "", 80), ("10.0.0.9", "TCP", 80), True),  # defaults: 0.0.0.0 and TCP
        (("0.0.0.0", "UDP", 53), ("", "TCP", 53), False),
    ],
)
def test_host_ports(
    r: redis.Redis,
    keys: Keys,
    clock: FakeClock,
    ledger: Ledger,
    held: tuple[str, str, int],
    wanted: tuple[str, str, int],
    conflict: bool,
) -> None:
    popped(r, keys, clock, "ns/a", "ns/b", "ns/c")
    first, second, elsewhere = ledger.reserve_batch(
        [
            decision("ns/a", "n1", ports=[held]),
            decision("ns/b", "n1", ports=[wanted]),
            decision("ns/c", "n2", ports=[wanted]),
        ]
    )
    assert isinstance(first, Reserved) and isinstance(elsewhere, Reserved)
    if conflict:
        assert isinstance(second, Rejected) and "free ports" in second.reason
        assert second.node_state is not None and len(second.node_state.ports) == 1
    else:
        assert isinstance(second, Reserved)
    assert ledger.check_consistency() == []


def test_released_port_is_free_again_and_one_pod_may_hold_several(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    popped(r, keys, clock, "ns/a")
    ports = [("0.0.0.0", "TCP", 80), ("10.0.0.1", "TCP", 80), ("", "UDP", 80)]
    assert ledger.reserve(decision("ns/a", "n1", ports=ports)) == Reserved("1")
    assert len(ledger.node_state(["n1"])["n1"].ports) == 3
    assert ledger.release("ns/a")
    assert ledger.node_state(["n1"])["n1"].ports == ()
    assert r.hgetall(keys.ledger_ports("n1")) == {}
    popped(r, keys, clock, "ns/b", epoch=2)
    assert ledger.reserve(decision("ns/b", "n1", epoch=2, ports=[("", "TCP", 80)])) == Reserved("2")


def test_domain_generation_conflict(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    zone_a, zone_b = domain(ZONE, "a"), domain(ZONE, "b")
    seen = ledger.node_state(["n1", "n3"])
    gen_a, gen_b = seen["n1"].domain_gens[zone_a], seen["n3"].domain_gens[zone_b]
    popped(r, keys, clock, "ns/other", "ns/spread-a", "ns/spread-b")
    # another worker reserves on n2, in zone a
    assert isinstance(ledger.reserve(decision("ns/other", "n2")), Reserved)
    in_a, in_b = ledger.reserve_batch(
        [
            decision("ns/spread-a", "n1", domain_checks={zone_a: gen_a}),
            decision("ns/spread-b", "n3", domain_checks={zone_b: gen_b}),
        ]
    )
    assert isinstance(in_a, Rejected) and zone_a in in_a.reason
    assert in_a.node_state is not None and in_a.node_state.domain_gens[zone_a] == gen_a + 1
    assert isinstance(in_b, Reserved)
    retry = ledger.reserve(
        decision("ns/spread-a", "n1", domain_checks={zone_a: in_a.node_state.domain_gens[zone_a]})
    )
    assert isinstance(retry, Reserved)


def test_hostname_domain_and_release_bump_generations(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    host = domain("kubernetes.io/hostname", "n1")
    popped(r, keys, clock, "ns/a", "ns/b")
    assert isinstance(ledger.reserve(decision("ns/a", "n1")), Reserved)
    gen = ledger.node_state(["n1"])["n1"].domain_gens[host]
    ledger.release("ns/a")
    [result] = ledger.reserve_batch([decision("ns/b", "n1", domain_checks={host: gen})])
    assert isinstance(result, Rejected)  # the release changed what affinity saw on n1


def test_symmetric_anti_affinity_race_is_closed(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    """Q (anti-affinity against app=web, per zone) and P (app=web, no constraints) are
    scheduled by two workers from the same snapshot, in which zone a is empty. Each choice
    is valid alone; together they violate Q's anti-affinity. Whichever reserves second is
    rejected."""
    zone_a = domain(ZONE, "a")
    snapshot = ledger.node_state(["n1", "n2"])  # both workers' view
    popped(r, keys, clock, "ns/q", "ns/p")

    def reserve_q() -> object:
        return ledger.reserve(
            decision(
                "ns/q",
                "n1",
                domain_checks={zone_a: snapshot["n1"].domain_gens[zone_a]},
                anti_affinity_gen=snapshot["n1"].anti_affinity_gen,
                anti_affinity_keys=[ZONE],
            )
        )

    def reserve_p() -> object:
        return ledger.reserve(
            decision("ns/p", "n2", anti_affinity_gen=snapshot["n2"].anti_affinity_gen)
        )

    # Q first: P's worker has not seen Q and P carries no domain checks of its own.
    assert isinstance(reserve_q(), Reserved)
    second = reserve_p()
    assert isinstance(second, Rejected) and "anti-affinity" in second.reason
    assert second.node_state is not None and second.node_state.anti_affinity_gen == 1
    assert ledger.anti_affinity_pods() == {"ns/q": "n1"}
    # zone b is not affected by Q's anti-affinity
    popped(r, keys, clock, "ns/p-in-b")
    assert isinstance(ledger.reserve(decision("ns/p-in-b", "n3")), Reserved)


def test_anti_affinity_race_other_order(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    zone_a = domain(ZONE, "a")
    snapshot = ledger.node_state(["n1", "n2"])
    popped(r, keys, clock, "ns/q", "ns/p")
    assert isinstance(ledger.reserve(decision("ns/p", "n2")), Reserved)
    second = ledger.reserve(
        decision(
            "ns/q",
            "n1",
            domain_checks={zone_a: snapshot["n1"].domain_gens[zone_a]},
            anti_affinity_keys=[ZONE],
        )
    )
    assert isinstance(second, Rejected) and zone_a in second.reason


def test_anti_affinity_in_the_same_batch(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    popped(r, keys, clock, "ns/q", "ns/p")
    results = ledger.reserve_batch(
        [
            decision("ns/q", "n1", anti_affinity_keys=[ZONE]),
            decision("ns/p", "n2", anti_affinity_gen=0),
        ]
    )
    assert [type(x) for x in results] == [Reserved, Rejected]


def test_node_not_found(r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger) -> None:
    popped(r, keys, clock, "ns/a", "ns/b")
    ledger.remove_node("n3")
    results = ledger.reserve_batch([decision("ns/a", "nope"), decision("ns/b", "n3")])
    assert all(isinstance(x, Rejected) and x.reason == "node(s) not found" for x in results)
    assert r.exists(keys.ledger_node("nope")) == 0


@pytest.mark.parametrize(
    "bad",
    [
        {"requests": {"cpu": -1}},
        {"requests": {"cpu": 1.5}},
        {"ports": [("", "TCP", 70000)]},
        {"ports": [("", "HTTP", 80)]},
        {"domain_checks": {"no-equals-sign": 1}},
        {"anti_affinity_gen": -1},
        {"epoch": -3},
        {"node": ""},
    ],
)
def test_bad_decisions_are_refused_alone_before_redis(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger, bad: dict
) -> None:
    """A decision that cannot be sent is Invalid, and only it (issue 24: one bad pod
    failed its whole batch); nothing is written for it."""
    popped(r, keys, clock, "ns/a", "ns/b")
    good = decision("ns/a", "n1")
    node = bad.pop("node", "n1")
    reserved, refused = ledger.reserve_batch([good, decision("ns/b", node, **bad)])
    assert isinstance(reserved, Reserved) and isinstance(refused, Invalid)
    assert r.hget(keys.ledger_pods, "ns/b") is None
    assert r.zscore(keys.inflight, "ns/b") is not None


def test_requests_equal_to_checked_ones_are_still_checked(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    """Each distinct requests mapping is checked and encoded once: ``True`` equals 1 and
    hashes alike, and must not pass as the ``{"cpu": 1}`` checked just before."""
    popped(r, keys, clock, "ns/a", "ns/b", "ns/c")
    results = ledger.reserve_batch(
        [
            decision("ns/a", "n1", requests={"cpu": 1}),
            decision("ns/b", "n1", requests={"cpu": True}),
            decision("ns/c", "n1", requests={"cpu": 1}),
        ]
    )
    assert [type(x) for x in results] == [Reserved, Invalid, Reserved]


def test_script_validates_its_input_before_writing(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    popped(r, keys, clock, "ns/a", "ns/b")
    script = ScriptSet(r).get("cache_reserve")
    base = [keys.inflight, keys.info, keys.ledger_pods, keys.ledger_assumed]
    base += [keys.ledger_domain_gen, keys.ledger_anti_affinity_gen, keys.ledger_anti_affinity_pods]
    base += [keys.ledger_topology_keys, keys.ledger_capacity]
    node_keys = ledger.node_keys("n1")
    # per decision: key, uid, epoch, node index, requests, ports, ak, aa gen, seen, checks
    good = ["ns/a", "uid-ns/a", 1, 1, "cpu=1,pods=1", "", "", 0, 0, 0]
    bad = ["ns/b", "uid-ns/b", 1, 1, "cpu=1,pods=1", "TCP|0|x", "", 0, 0, 0]
    before = snapshot_db(r)
    with pytest.raises(redis.ResponseError, match="bad host port"):
        script(keys=base + node_keys + ledger.feed_keys, args=[1, 0, 1, "n1", *good, *bad])
    with pytest.raises(redis.ResponseError, match="expected 16 keys"):
        script(keys=base, args=[1, 0, 1, "n1", *good])
    with pytest.raises(redis.ResponseError, match="malformed decision #2"):
        script(keys=base + node_keys + ledger.feed_keys, args=[1, 0, 1, "n1", *good, *good[:5]])
    with pytest.raises(redis.ResponseError, match="bad requests in #1"):
        script(
            keys=base + node_keys + ledger.feed_keys,
            args=[1, 0, 1, "n1", "ns/a", "uid-ns/a", 1, 1, "cpu=x", "", "", 0, 0, 0],
        )
    for epoch in ("x", "-1", "1.5", "", "9" * 17):
        with pytest.raises(redis.ResponseError, match="malformed decision #2"):
            script(
                keys=base + node_keys + ledger.feed_keys,
                args=[1, 0, 1, "n1", *good, *bad[:2], epoch, *bad[3:]],
            )
    assert snapshot_db(r) == before


def test_an_epoch_written_otherwise_fences_as_its_number(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    # Workers send the epoch as a canonical decimal, compared with the record as text;
    # another spelling of the same number still holds the lease, and the token is canonical.
    popped(r, keys, clock, "ns/a", "ns/b", epoch=7)
    script = ScriptSet(r).get("cache_reserve")
    base = [keys.inflight, keys.info, keys.ledger_pods, keys.ledger_assumed]
    base += [keys.ledger_domain_gen, keys.ledger_anti_affinity_gen, keys.ledger_anti_affinity_pods]
    base += [keys.ledger_topology_keys, keys.ledger_capacity]
    all_keys = base + ledger.node_keys("n1") + ledger.feed_keys

    def one(key: str, epoch: str) -> list[object]:
        return [key, f"uid-{key}", epoch, 1, "cpu=1,pods=1", "", "", 0, 0, 0]

    stale = script(keys=all_keys, args=[1, 0, 1, "n1", *one("ns/a", "8"), *one("ns/b", "08")])
    assert stale[0::2] == [b"S", b"S"]
    out = script(keys=all_keys, args=[1, 0, 1, "n1", *one("ns/a", "07"), *one("ns/b", "7.0")])
    assert out == [b"R", b"7", b"R", b"7"]


def test_batch_size_is_bounded(ledger: Ledger) -> None:
    with pytest.raises(ValueError, match="at most 1000"):
        ledger.reserve_batch([decision(f"ns/p{i}", "n1") for i in range(1001)])


def test_change_feed_names_every_node_whose_usage_changed(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    version, states, _ = ledger.changes_since(0)
    assert set(states) == {"n1", "n2", "n3"}
    assert ledger.changes_since(version)[:2] == (version, {})

    popped(r, keys, clock, "ns/a")
    [result] = ledger.reserve_batch([decision("ns/a", "n2", requests={"cpu": 500})])
    assert isinstance(result, Reserved)
    version2, states, _ = ledger.changes_since(version)
    assert version2 > version
    assert list(states) == ["n2"]
    assert states["n2"].requested["cpu"] == 500
    assert states["n2"].requested["pods"] == 1
    assert states["n2"].generation == ledger.node_state(["n2"])["n2"].generation
    assert states["n2"].host_ports == 0

    assert ledger.release("ns/a", result.token)
    _, states, _ = ledger.changes_since(version2)
    assert list(states) == ["n2"]
    assert states["n2"].requested.get("cpu", 0) == 0


def test_usage_record_keeps_its_resources_sorted_as_they_change(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    """The record is rewritten in its own order, and sorted again when a reservation
    brings a resource it did not name; host-port fields are counted as they are taken."""
    ledger.set_node("big", {"cpu": 10_000, "memory": 1 << 34, "pods": 100, "example.com/gpu": 4})
    popped(r, keys, clock, "ns/a", "ns/b", "ns/c", "ns/d")
    results = ledger.reserve_batch(
        [
            decision("ns/a", "big", requests={"memory": 1 << 20, "cpu": 100}),
            decision("ns/b", "big", requests={"cpu": 200}),
        ]
    )
    assert all(isinstance(x, Reserved) for x in results)
    gen = ledger.node_state(["big"])["big"].generation
    want = f"{gen}|0|cpu=300,memory={1 << 20},pods=2"
    assert r.hget(keys.ledger_usage, "big") == want.encode()
    results = ledger.reserve_batch(
        [
            decision("ns/c", "big", requests={"cpu": 1}),
            decision("ns/d", "big", requests={"example.com/gpu": 1}, ports=[("", "", 80)]),
        ]
    )
    assert all(isinstance(x, Reserved) for x in results)
    want = f"{gen + 2}|2|cpu=301,example.com/gpu=1,memory={1 << 20},pods=4"
    assert r.hget(keys.ledger_usage, "big") == want.encode()
    assert ledger.check_consistency() == []


def test_change_feed_reads_its_log_and_falls_back_to_every_usage_when_the_log_lacks_versions(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    version, everything, _ = ledger.changes_since(0)
    popped(r, keys, clock, "ns/a", "ns/b")
    assert isinstance(ledger.reserve(decision("ns/a", "n2", requests={"cpu": 500})), Reserved)
    entry_id, fields = r.xrange(keys.ledger_feed)[-1]
    assert entry_id == f"{version + 1}-0".encode() and set(fields) == {b"n2"}
    assert list(ledger.changes_since(version)[1]) == ["n2"]

    # The log lost (or written by a release before it had one): every node, as they are now.
    r.delete(keys.ledger_feed)
    latest, states, _ = ledger.changes_since(version)
    assert set(states) == set(everything) and states["n2"].requested["cpu"] == 500
    # ... and from the next version on, the log again.
    assert isinstance(ledger.reserve(decision("ns/b", "n3", requests={"cpu": 300})), Reserved)
    assert list(ledger.changes_since(latest)[1]) == ["n3"]

    # Further behind than the log keeps: trimmed entries make the reader take everything.
    for i in range(800):
        ledger.set_node("n1", {**SMALL, "pods": 10 + i % 2}, {})
    now = ledger.changes_since(0)[0]
    assert 512 <= r.xlen(keys.ledger_feed) < 700
    first_kept = int(r.xrange(keys.ledger_feed, count=1)[0][0].split(b"-")[0])
    assert set(ledger.changes_since(first_kept - 1)[1]) == set(everything)
    assert list(ledger.changes_since(now - 3)[1]) == ["n1"]

    # A version counter that starts over starts the log over (ids must keep growing).
    r.delete(keys.ledger_feed_version)
    assert ledger.release("ns/b", ledger.pod("ns/b").token)  # type: ignore[union-attr]
    assert r.get(keys.ledger_feed_version) == b"1"
    assert [i for i, _ in r.xrange(keys.ledger_feed)] == [b"1-0"]
    assert sorted(ledger.changes_since(0)[1]) == sorted(everything)  # (a hash: any order)


def test_only_watched_topology_keys_keep_generations(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    ledger = make_ledger(r, keys, clock, watch=())
    ledger.set_node("n1", SMALL, {ZONE: "a"})
    ledger.set_node("n2", SMALL, {ZONE: "a"})
    zone_a = domain(ZONE, "a")
    popped(r, keys, clock, "ns/p1", "ns/p2", "ns/p3")
    start = ledger.node_state(["n1"])["n1"].domain_gens[zone_a]
    # Nobody watches the zone: reservations in it write no generation.
    assert isinstance(ledger.reserve(decision("ns/p1", "n1")), Reserved)
    assert ledger.node_state(["n1"])["n1"].domain_gens[zone_a] == start
    # A worker registers the key, then reads the zone's generation (with the change
    # feed, before the pod lists it syncs): from then on every reservation in the zone
    # counts, so a decision made on the read generation is refused once another pod
    # landed in the zone.
    ledger.watch_topology_keys([ZONE])
    assert r.smembers(keys.ledger_topology_keys) == {ZONE.encode()}
    _, _, seen = ledger.changes_since(0, [zone_a])
    assert seen.checks == {zone_a: start} and seen.anti_affinity == {zone_a: 0}
    assert isinstance(ledger.reserve(decision("ns/p2", "n2")), Reserved)
    late = ledger.reserve(decision("ns/p3", "n1", domain_checks=seen.checks))
    assert isinstance(late, Rejected) and zone_a in late.reason
    _, _, now_seen = ledger.changes_since(0, [zone_a])
    assert now_seen.checks == {zone_a: start + 1}


def test_claim_renews_assumed_reservations_and_names_the_others(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    popped(r, keys, clock, "ns/a", "ns/b", "ns/c", epoch=3)
    results = ledger.reserve_batch([decision(p, "n1", epoch=3) for p in ("ns/a", "ns/b", "ns/c")])
    assert all(isinstance(res, Reserved) for res in results)
    assert ledger.confirm_bound("ns/b", "3")
    assert ledger.release("ns/c", "3")
    clock.step(20_000)
    statuses = ledger.claim([("ns/a", "3"), ("ns/a", "4"), ("ns/b", "3"), ("ns/c", "3")])
    assert statuses == ["claimed", "stale", "duplicate", "stale"]
    record = ledger.pod("ns/a")
    assert record is not None and record.deadline_ms == clock.now_ms() + 30_000
    assert ledger.pod("ns/b") is not None and ledger.pod("ns/b").deadline_ms is None  # type: ignore[union-attr]
    # renew pushes only reservations that are still assumed
    clock.step(1_000)
    ledger.renew(["ns/a", "ns/b", "ns/c"])
    assert ledger.pod("ns/a").deadline_ms == clock.now_ms() + 30_000  # type: ignore[union-attr]
    assert r.zscore(keys.ledger_assumed, "ns/b") is None
    assert r.zscore(keys.ledger_assumed, "ns/c") is None
    assert ledger.claim([]) == []


def test_records_written_as_json_before_the_line_layout_still_work(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    """A deployment upgraded in place keeps its JSON queue and ledger records: they are
    read as before and rewritten in the line layout on their next move."""
    queue = RedisQueue(r, keys)
    now = clock.now_ms()
    old_info = {"uid": "u-a", "p": 5, "ts": now, "its": now, "a": 0, "w": "active"}
    old_info |= {"m": f"{now:013d}|ns/a", "pl": "", "cy": 0, "e": 0, "d": 0, "bo": 0}
    r.hset(keys.info, "ns/a", json.dumps(old_info))
    r.zadd(keys.active, {f"{now:013d}|ns/a": -5})
    assert queue.info("ns/a") == {**old_info}
    [popped] = queue.pop(1, now_ms=now)
    assert (popped.key, popped.uid, popped.priority, popped.attempts) == ("ns/a", "u-a", 5, 1)
    assert r.hget(keys.info, "ns/a").startswith(b"inflight|")  # type: ignore[union-attr]
    # an inflight pod whose record is still JSON is assumed all the same
    r.hset(keys.info, "ns/b", json.dumps({**old_info, "w": "inflight", "e": 9, "uid": "u-b"}))
    r.zadd(keys.inflight, {"ns/b": now + 10_000})
    [result] = ledger.reserve_batch([decision("ns/b", "n1", epoch=9, uid="u-b")])
    assert isinstance(result, Reserved)
    assert info_of(r, keys, "ns/b")["w"] == "assumed"  # type: ignore[index]
    # an old JSON ledger record is released and read like a new one
    old_record = {"node": "n2", "uid": "u-c", "req": {"cpu": 300, "pods": 1}, "ports": ""}
    r.hset(keys.ledger_pods, "ns/c", json.dumps({**old_record, "token": "4", "ak": ""}))
    r.zadd(keys.ledger_assumed, {"ns/c": now + 1000})
    # (those versions kept a node's generation and requested amounts in its hash as well as
    # in its usage record: the record is read, the hash's copies are dropped on a node set)
    r.hset(keys.ledger_node("n2"), mapping={"req:cpu": 300, "req:pods": 1, "gen": 4})
    r.hset(keys.ledger_usage, "n2", "4|0|cpu=300,pods=1")
    r.sadd(keys.ledger_node_pods("n2"), "ns/c")
    record = ledger.pod("ns/c")
    assert record is not None and (record.node, record.requests) == ("n2", {"cpu": 300, "pods": 1})
    assert ledger.release("ns/c", "4")
    assert ledger.node_state(["n2"])["n2"].requested == {}
    assert ledger.check_consistency() == []
    ledger.set_node("n2", SMALL, {ZONE: "a"})
    assert not {b"gen", b"req:cpu", b"req:pods"} & set(r.hkeys(keys.ledger_node("n2")))
    assert r.hget(keys.ledger_usage, "n2") == b"6|0|"
    # a node whose usage record is missing (written before the records existed) is read
    # from its hash's copies
    r.hset(keys.ledger_node("n3"), mapping={"req:cpu": 200, "req:pods": 1, "gen": 7})
    r.hdel(keys.ledger_usage, "n3")
    state = ledger.node_state(["n3"])["n3"]
    assert (state.generation, state.requested) == (7, {"cpu": 200, "pods": 1})


def test_a_gang_is_reserved_all_or_nothing(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    popped(r, keys, clock, "ns/g0", "ns/g1", "ns/g2")
    before = snapshot_db(r)
    # g2 does not fit n1 after g0: nothing of the gang is reserved.
    results = ledger.reserve_batch(
        [
            decision("ns/g0", "n1", requests={"cpu": 600}),
            decision("ns/g1", "n2", requests={"cpu": 600}),
            decision("ns/g2", "n1", requests={"cpu": 600}),
        ],
        groups=[3],
    )
    assert all(isinstance(x, Rejected) for x in results)
    assert results[0].reason == "gang member ns/g2: Insufficient cpu"
    assert results[2].reason == "Insufficient cpu"
    assert snapshot_db(r) == before
    # Placed so that every member fits: all are reserved in the one call.
    results = ledger.reserve_batch(
        [
            decision("ns/g0", "n1", requests={"cpu": 600}),
            decision("ns/g1", "n2", requests={"cpu": 600}),
            decision("ns/g2", "n3", requests={"cpu": 600}),
        ],
        groups=[3],
    )
    assert all(isinstance(x, Reserved) for x in results)
    assert ledger.check_consistency() == []


def test_a_gang_member_beyond_what_the_ledger_accounts_refuses_the_gang(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    popped(r, keys, clock, "ns/g0", "ns/g1")
    results = ledger.reserve_batch(
        [
            decision("ns/g0", "n1", requests={"cpu": 100}),
            decision("ns/g1", "n2", requests={"cpu": 1 << 60}),
        ],
        groups=[2],
    )
    assert isinstance(results[0], Rejected) and "gang member ns/g1" in results[0].reason
    assert isinstance(results[1], Invalid)
    assert ledger.pod("ns/g0") is None


def test_gangs_in_one_call_each_all_or_nothing_and_a_refused_one_leaves_no_trace(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    popped(r, keys, clock, "ns/a0", "ns/a1", "ns/b0", "ns/b1", "ns/s")
    results = ledger.reserve_batch(
        [
            # gang a: a1 does not fit n1 after a0, so a0's 600m must not count for b0
            decision("ns/a0", "n1", requests={"cpu": 600}, ports=[("", "TCP", 80)]),
            decision("ns/a1", "n1", requests={"cpu": 600}),
            # gang b fits only if a0 was taken back
            decision("ns/b0", "n1", requests={"cpu": 900}, ports=[("", "TCP", 80)]),
            decision("ns/b1", "n2", requests={"cpu": 900}),
            # a single pod after them
            decision("ns/s", "n3", requests={"cpu": 100}),
        ],
        groups=[2, 2, 1],
    )
    assert isinstance(results[0], Rejected) and results[0].reason.startswith("gang member ns/a1")
    assert isinstance(results[1], Rejected) and results[1].reason == "Insufficient cpu"
    assert [type(x) for x in results[2:]] == [Reserved, Reserved, Reserved]
    assert ledger.pod("ns/a0") is None and ledger.pod("ns/a1") is None
    n1 = ledger.node_state(["n1"])["n1"]
    assert n1.requested["cpu"] == 900 and n1.pods == ("ns/b0",)
    assert n1.ports == (("0.0.0.0", "TCP", 80),)
    assert ledger.check_consistency() == []


def test_group_sizes_must_cover_the_decisions(ledger: Ledger) -> None:
    with pytest.raises(ValueError, match="group sizes"):
        ledger.reserve_batch([decision("ns/a", "n1"), decision("ns/b", "n1")], groups=[1])


def test_a_refused_gang_leaves_a_node_exactly_the_pods_reserved_there(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    # n1 gets one pod, then a gang's two (refused for its member on n2), then two more:
    # the node's pod list is built one pod, then two, then three, and taken back to one.
    popped(r, keys, clock, "ns/s0", "ns/g0", "ns/g1", "ns/g2", "ns/s1", "ns/s2")
    results = ledger.reserve_batch(
        [
            decision("ns/s0", "n1", requests={"cpu": 100}),
            decision("ns/g0", "n1", requests={"cpu": 100}),
            decision("ns/g1", "n1", requests={"cpu": 100}),
            decision("ns/g2", "n2", requests={"cpu": 5_000}),
            decision("ns/s1", "n1", requests={"cpu": 100}),
            decision("ns/s2", "n1", requests={"cpu": 100}),
        ],
        groups=[1, 3, 1, 1],
    )
    assert [type(x) for x in results] == [
        Reserved,
        Rejected,
        Rejected,
        Rejected,
        Reserved,
        Reserved,
    ]
    n1 = ledger.node_state(["n1"])["n1"]
    assert sorted(n1.pods) == ["ns/s0", "ns/s1", "ns/s2"]
    assert n1.requested["cpu"] == 300
    assert r.smembers(keys.ledger_node_pods("n1")) == {b"ns/s0", b"ns/s1", b"ns/s2"}
    assert ledger.check_consistency() == []


@pytest.mark.parametrize("start", [0, 7, 8, 9, 98, 99, 1999])
def test_node_generation_counts_every_reserved_pod_across_digit_carries(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger, start: int
) -> None:
    # Every reserved pod bumps its node's generation: one pod, then three on one node in
    # one batch, from generations whose last digit carries.
    _gen, ports, items = r.hget(keys.ledger_usage, "n1").decode().split("|", 2)
    r.hset(keys.ledger_usage, "n1", f"{start}|{ports}|{items}")
    assert ledger.node_state(["n1"])["n1"].generation == start
    popped(r, keys, clock, "ns/a", "ns/b", "ns/c", "ns/d")
    [one] = ledger.reserve_batch([decision("ns/a", "n1")])
    assert isinstance(one, Reserved)
    assert ledger.node_state(["n1"])["n1"].generation == start + 1
    three = ledger.reserve_batch([decision(k, "n1") for k in ("ns/b", "ns/c", "ns/d")])
    assert all(isinstance(x, Reserved) for x in three)
    after = ledger.node_state(["n1"])["n1"]
    assert after.generation == start + 4
    assert after.requested["pods"] == 4
