"""confirm_bound, release, pod_deleted, the assumed-pod reaper and add_bound_pod."""

from __future__ import annotations

import pytest
import redis

from distsched.cache.ledger import Ledger, Reserved
from distsched.cache.ledger_types import domain
from distsched.clock import FakeClock
from distsched.keys import Keys
from distsched.model.objects import Node, NodeStatus, ObjectMeta
from tests.cache.ledger_helpers import (
    SMALL,
    ZONE,
    add_bound,
    bound_in_store,
    decision,
    info_of,
    make_ledger,
    pop_like_queue,
)

TTL = 5_000


@pytest.fixture
def ledger(r: redis.Redis, keys: Keys, clock: FakeClock) -> Ledger:
    led = make_ledger(r, keys, clock, assume_ttl_ms=TTL)
    led.set_node("n1", SMALL, {ZONE: "a"})
    led.set_node("n2", SMALL, {ZONE: "b"})
    return led


def reserve(
    r: redis.Redis,
    keys: Keys,
    clock: FakeClock,
    ledger: Ledger,
    pod: str,
    node: str = "n1",
    *,
    epoch: int = 1,
    attempts: int = 1,
    priority: int = 0,
    **kw: object,
) -> str:
    pop_like_queue(
        r, keys, pod, epoch=epoch, now_ms=clock.now_ms(), attempts=attempts, priority=priority
    )
    result = ledger.reserve(decision(pod, node, epoch=epoch, **kw))  # type: ignore[arg-type]
    assert isinstance(result, Reserved), result
    return result.token


def test_confirm_bound_keeps_the_ledger_and_ends_the_queue_entry(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    token = reserve(r, keys, clock, ledger, "ns/p")
    assert not ledger.confirm_bound("ns/p", "not-the-token")
    assert ledger.confirm_bound("ns/p", token)
    assert ledger.confirm_bound("ns/p", token)  # idempotent
    record = ledger.pod("ns/p")
    assert record is not None and record.state == "bound" and record.deadline_ms is None
    assert ledger.assumed_pods() == {}
    assert info_of(r, keys, "ns/p") is None
    assert ledger.node_state(["n1"])["n1"].requested["cpu"] == 100
    # a bound pod never expires
    clock.step(10 * TTL)
    assert ledger.reap_expired_assumed() == []
    assert ledger.check_consistency() == []


def test_release_is_idempotent_and_token_guarded(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    token = reserve(r, keys, clock, ledger, "ns/p", ports=[("", "TCP", 80)])
    gen = ledger.node_state(["n1"])["n1"].generation
    assert not ledger.release("ns/p", token="stale-binder")
    assert ledger.pod("ns/p") is not None
    assert ledger.release("ns/p", token=token)
    assert not ledger.release("ns/p", token=token)
    assert not ledger.release("ns/p")
    state = ledger.node_state(["n1"])["n1"]
    assert state.requested == {} and state.ports == () and state.pods == ()
    assert state.generation == gen + 1
    assert ledger.pod("ns/p") is None and ledger.assumed_pods() == {}
    assert ledger.check_consistency() == []


def test_release_forgets_only_assumed_pods_and_delete_takes_bound_ones(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    token = reserve(r, keys, clock, ledger, "ns/p", anti_affinity_keys=[ZONE])
    assert ledger.confirm_bound("ns/p", token)
    assert not ledger.release("ns/p", token=token)
    assert ledger.pod("ns/p") is not None
    assert ledger.pod_deleted("ns/p")
    assert not ledger.pod_deleted("ns/p")
    assert ledger.pod("ns/p") is None
    assert ledger.anti_affinity_pods() == {}
    assert ledger.node_state(["n1"])["n1"].requested == {}
    assert ledger.check_consistency() == []


def test_reaper_requeues_expired_pods_into_backoff(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    reserve(r, keys, clock, ledger, "ns/first", epoch=1, attempts=1)
    reserve(r, keys, clock, ledger, "ns/third", epoch=2, attempts=3)
    reserve(r, keys, clock, ledger, "ns/tenth", epoch=3, attempts=10)
    clock.step(1_000)
    reserve(r, keys, clock, ledger, "ns/later", epoch=4)
    clock.step(TTL - 1_000 - 1)
    assert ledger.reap_expired_assumed() == []
    clock.step(1)
    now = clock.now_ms()
    assert sorted(ledger.reap_expired_assumed()) == ["ns/first", "ns/tenth", "ns/third"]
    for pod, backoff in (("ns/first", 1_000), ("ns/third", 4_000), ("ns/tenth", 10_000)):
        info = info_of(r, keys, pod)
        assert info is not None
        assert (info["w"], info["bo"], info["ts"], info["m"]) == ("backoff", now + backoff, now, "")
        assert r.zscore(keys.backoff, pod) == now + backoff
        assert ledger.pod(pod) is None
    assert ledger.node_state(["n1"])["n1"].pods == ("ns/later",)
    assert ledger.assumed_pods() == {"ns/later": now - 4_000 + TTL}
    assert ledger.check_consistency() == []
    clock.step(1_000)
    assert ledger.reap_expired_assumed() == ["ns/later"]
    assert ledger.node_state(["n1"])["n1"].requested == {}


def test_reaper_with_zero_backoff_requeues_into_active_and_wakes(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    ledger = make_ledger(r, keys, clock, assume_ttl_ms=TTL, initial_backoff_ms=0)
    ledger.set_node("n1", SMALL)
    reserve(r, keys, clock, ledger, "ns/p", priority=7)
    clock.step(TTL)
    now = clock.now_ms()
    assert ledger.reap_expired_assumed() == ["ns/p"]
    member = f"{now:013d}|ns/p"
    assert r.zrange(keys.active, 0, -1, withscores=True) == [(member.encode(), -7.0)]
    info = info_of(r, keys, "ns/p")
    assert info is not None and (info["w"], info["m"]) == ("active", member)
    assert r.llen(keys.wake) == 1


def test_reaper_releases_without_requeue_when_the_queue_moved_on(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    reserve(r, keys, clock, ledger, "ns/recreated")
    reserve(r, keys, clock, ledger, "ns/deleted", epoch=2)
    # the pod was deleted and recreated under the same name: the queue holds a new uid
    pop_like_queue(r, keys, "ns/recreated", epoch=9, now_ms=clock.now_ms(), uid="new")
    r.hdel(keys.info, "ns/deleted")
    clock.step(TTL)
    assert sorted(ledger.reap_expired_assumed()) == ["ns/deleted", "ns/recreated"]
    info = info_of(r, keys, "ns/recreated")
    assert info is not None and info["w"] == "inflight" and info["uid"] == "new"
    assert r.zcard(keys.backoff) == 0 and info_of(r, keys, "ns/deleted") is None
    assert ledger.check_consistency() == []


def test_reaper_works_in_batches(r: redis.Redis, keys: Keys, clock: FakeClock) -> None:
    ledger = make_ledger(r, keys, clock, assume_ttl_ms=TTL, reap_batch=3)
    ledger.set_node("n1", {"cpu": 100_000, "memory": 1 << 40, "pods": 100})
    for i in range(10):
        reserve(r, keys, clock, ledger, f"ns/p{i}", epoch=i + 1)
    clock.step(TTL)
    assert len(ledger.reap_expired_assumed()) == 10
    assert r.zcard(keys.backoff) == 10


def test_expired_reservation_cannot_be_confirmed_or_released_by_its_binder(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    old = reserve(r, keys, clock, ledger, "ns/p", epoch=1)
    clock.step(TTL)
    ledger.reap_expired_assumed()
    new = reserve(r, keys, clock, ledger, "ns/p", "n2", epoch=2)
    assert not ledger.confirm_bound("ns/p", old)
    assert not ledger.release("ns/p", token=old)
    record = ledger.pod("ns/p")
    assert record is not None and (record.node, record.token, record.state) == (
        "n2",
        new,
        "assumed",
    )


def test_remove_node_requeues_assumed_and_keeps_bound_pods_on_a_ghost(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    bound = reserve(r, keys, clock, ledger, "ns/bound", epoch=1)
    ledger.confirm_bound("ns/bound", bound)
    reserve(r, keys, clock, ledger, "ns/assumed", epoch=2, attempts=2)
    now = clock.now_ms()
    assert ledger.remove_node("n1") == ["ns/assumed"]
    info = info_of(r, keys, "ns/assumed")
    assert info is not None and (info["w"], info["bo"]) == ("backoff", now + 2_000)
    ghost = ledger.node_state(["n1"])["n1"]
    assert not ghost.live and ghost.pods == ("ns/bound",) and ghost.allocatable == {}
    assert ghost.requested["cpu"] == 100
    pop_like_queue(r, keys, "ns/new", epoch=3, now_ms=now)
    result = ledger.reserve(decision("ns/new", "n1", epoch=3))
    assert not isinstance(result, Reserved)
    assert ledger.check_consistency() == []
    # the node comes back before its pod is gone: it keeps the bound pod's usage
    assert ledger.set_node("n1", SMALL, {ZONE: "a"})
    assert ledger.node_state(["n1"])["n1"].requested["cpu"] == 100
    ledger.remove_node("n1")
    assert ledger.pod_deleted("ns/bound")
    assert "n1" not in ledger.node_names()
    assert r.exists(*ledger.node_keys("n1")) == 0
    assert ledger.check_consistency() == []


def test_remove_empty_node_deletes_it(ledger: Ledger, r: redis.Redis) -> None:
    assert ledger.remove_node("n2") == []
    assert ledger.node_names() == ["n1"]
    assert r.exists(*ledger.node_keys("n2")) == 0
    assert ledger.remove_node("n2") == []


def test_add_bound_pod_is_idempotent(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    req = {"cpu": 300, "memory": 1000}
    port = [("10.0.0.1", "TCP", 443)]
    assert add_bound(ledger, r, keys, "ns/p", "u1", "n1", req, port) == "added"
    assert add_bound(ledger, r, keys, "ns/p", "u1", "n1", req, port) == "present"
    state = ledger.node_state(["n1"])["n1"]
    assert state.requested == {"cpu": 300, "memory": 1000, "pods": 1}
    assert state.ports == (("10.0.0.1", "TCP", 443),)
    # bound pods are facts: they are recorded even when they do not fit
    assert add_bound(ledger, r, keys, "ns/huge", "u2", "n1", {"cpu": 5_000}) == "added"
    assert ledger.node_state(["n1"])["n1"].requested["cpu"] == 5_300
    assert ledger.check_consistency() == []


def test_add_bound_pod_moves_and_replaces_records(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    reserve(r, keys, clock, ledger, "ns/assumed-here", epoch=1)
    assert (
        add_bound(ledger, r, keys, "ns/assumed-here", "uid-ns/assumed-here", "n1", {})
        == "confirmed"
    )
    assert info_of(r, keys, "ns/assumed-here") is None
    reserve(r, keys, clock, ledger, "ns/assumed-there", epoch=2)
    # bound elsewhere than assumed (kube's cache moves the pod to the real node)
    assert (
        add_bound(ledger, r, keys, "ns/assumed-there", "uid-ns/assumed-there", "n2", {}) == "added"
    )
    add_bound(ledger, r, keys, "ns/old", "old-uid", "n1", {"cpu": 10})
    assert add_bound(ledger, r, keys, "ns/old", "new-uid", "n1", {"cpu": 20}) == "added"
    state = ledger.node_state(["n1", "n2"])
    assert state["n1"].pods == ("ns/assumed-here", "ns/old")
    assert state["n1"].requested == {"cpu": 120, "memory": 1 << 20, "pods": 2}
    assert state["n2"].pods == ("ns/assumed-there",)
    assert ledger.assumed_pods() == {}
    assert ledger.check_consistency() == []


def test_add_bound_pod_on_unknown_node_makes_a_ghost(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    assert add_bound(ledger, r, keys, "ns/p", "u", "later", {"cpu": 400}, anti_affinity_keys=[ZONE])
    ghost = ledger.node_state(["later"])["later"]
    assert not ghost.live and ghost.requested["cpu"] == 400
    aagen_before = ledger.node_state(["n1"])["n1"].anti_affinity_gens[domain(ZONE, "a")]
    assert ledger.set_node("later", SMALL, {ZONE: "a"})
    # the anti-affinity pod entered zone a with its node: zone a's workers must refresh
    n1 = ledger.node_state(["n1"])["n1"]
    assert n1.anti_affinity_gens[domain(ZONE, "a")] == aagen_before + 1
    pop_like_queue(r, keys, "ns/big", epoch=1, now_ms=clock.now_ms())
    result = ledger.reserve(
        decision("ns/big", "later", requests={"cpu": 700}, anti_affinity_gen=n1.anti_affinity_gen)
    )
    assert not isinstance(result, Reserved) and "Insufficient cpu" in str(result)
    assert ledger.check_consistency() == []


def test_set_node_updates_allocatable_and_domains(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    before = ledger.node_state(["n1"])["n1"]
    assert not ledger.set_node("n1", {"cpu": 2000, "pods": 5}, {ZONE: "b"})
    after = ledger.node_state(["n1"])["n1"]
    assert after.allocatable == {"cpu": 2000, "pods": 5}
    assert after.domains == {ZONE: "b", "kubernetes.io/hostname": "n1"}
    assert after.generation == before.generation + 1
    zone_a = domain(ZONE, "a")
    assert r.hget(keys.ledger_domain_gen, zone_a) == str(before.domain_gens[zone_a] + 1).encode()
    assert after.domain_gens[domain(ZONE, "b")] == 2  # n2 was added to zone b, then n1
    with pytest.raises(ValueError):
        ledger.set_node("n1", {"cpu": -1})
    with pytest.raises(ValueError):
        ledger.set_node("n1", SMALL, {"bad=key": "x"})


def test_check_consistency_finds_drift(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    reserve(r, keys, clock, ledger, "ns/p", ports=[("", "TCP", 80)])
    assert ledger.check_consistency() == []
    usage = r.hget(keys.ledger_usage, "n1")
    assert usage is not None and b"|cpu=100," in usage
    r.hset(keys.ledger_usage, "n1", usage.replace(b"|cpu=100,", b"|cpu=105,"))
    r.hdel(keys.ledger_ports("n1"), "TCP|80|0.0.0.0")
    r.srem(keys.ledger_node_pods("n1"), "ns/p")
    r.zadd(keys.ledger_assumed, {"ns/ghost": 1})
    items = {(d.node, d.item, d.ledger, d.expected) for d in ledger.check_consistency()}
    assert items == {
        ("n1", "cpu", 105, 100),
        ("n1", "port TCP|80|0.0.0.0", 0, 1),
        ("n1", "host-port fields in use", 2, 1),
        ("n1", "member ns/p", 0, 1),
        ("", "assumed ns/ghost", 1, 0),
    }


def test_removed_node_with_only_assumed_pods_disappears(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    reserve(r, keys, clock, ledger, "ns/a", "n2", epoch=1)
    reserve(r, keys, clock, ledger, "ns/b", "n2", epoch=2)
    assert sorted(ledger.remove_node("n2")) == ["ns/a", "ns/b"]
    assert ledger.node_names() == ["n1"]
    assert r.exists(*ledger.node_keys("n2")) == 0
    assert r.zcard(keys.backoff) == 2
    assert ledger.check_consistency() == []


def test_a_deleted_node_leaves_the_usage_hash_and_a_new_one_starts_above_its_generations(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    """cache:usage holds the nodes the ledger has; a deleted node's last record goes to the
    feed, and a node that comes back under its name never repeats one of its generations."""
    ledger.set_node("gone-empty", SMALL)
    version = ledger.changes_since(0)[0]
    ledger.remove_node("gone-empty")  # no pod: deleted at once
    assert r.hget(keys.ledger_usage, "gone-empty") is None
    _, changes, _ = ledger.changes_since(version)
    assert changes["gone-empty"].requested == {}
    # A ghost (removed with a pod still on it) is deleted when its last pod leaves.
    token = reserve(r, keys, clock, ledger, "ns/a", "n2", epoch=1)
    gen_before = ledger.node_state(["n2"])["n2"].generation
    ledger.remove_node("n2")
    assert r.hget(keys.ledger_usage, "n2") is None  # its pod was released with it
    assert int(r.get(keys.ledger_generation_floor) or 0) >= gen_before + 2
    ledger.set_node("n2", SMALL)
    assert ledger.node_state(["n2"])["n2"].generation > gen_before + 2
    assert token and ledger.check_consistency() == []
    assert set(ledger.changes_since(0)[1]) == {"n1", "n2"}  # a full read: nodes it has


def test_confirm_bound_many(r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger) -> None:
    a = reserve(r, keys, clock, ledger, "ns/a", epoch=1)
    b = reserve(r, keys, clock, ledger, "ns/b", epoch=2)
    assert ledger.confirm_bound_many([("ns/a", a), ("ns/b", "wrong"), ("ns/c", "1")]) == [
        True,
        False,
        False,
    ]
    assert ledger.assumed_pods() == {"ns/b": clock.now_ms() + TTL}
    assert ledger.confirm_bound_many([("ns/b", b)]) == [True]
    assert ledger.confirm_bound_many([]) == []


def test_set_node_from_a_node_object(ledger: Ledger) -> None:
    node = Node(
        metadata=ObjectMeta(name="n9", namespace="", labels={ZONE: "c", "disk": "ssd"}),
        status=NodeStatus(allocatable={"cpu": 4000, "pods": 20}),
    )
    assert ledger.set_node_from(node)
    state = ledger.node_state(["n9"])["n9"]
    assert state.live and state.allocatable == {"cpu": 4000, "pods": 20}
    assert state.domains == {ZONE: "c", "disk": "ssd", "kubernetes.io/hostname": "n9"}


def test_reaper_confirms_a_pod_the_store_already_bound(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    """A binder that died between the store's bind and the ledger's confirm leaves a bound
    pod assumed; the reaper must keep its usage (releasing it would let another pod take
    capacity the bound pod uses)."""
    reserve(r, keys, clock, ledger, "ns/bound", "n1", epoch=1, requests={"cpu": 700})
    reserve(r, keys, clock, ledger, "ns/unbound", "n1", epoch=2, requests={"cpu": 300})
    r.hset(keys.store_meta("Pod"), "ns/bound", "9|n1|2024-01-01T00:00:00Z|uid-ns/bound")
    clock.step(TTL)
    assert ledger.reap_expired_assumed() == ["ns/unbound"]
    assert ledger.assumed_pods() == {}
    assert ledger.node_state(["n1"])["n1"].requested["cpu"] == 700
    assert ledger.check_consistency() == []
    assert info_of(r, keys, "ns/bound") is None


def test_add_bound_pod_records_only_what_the_store_has_bound_there(
    r: redis.Redis, keys: Keys, ledger: Ledger
) -> None:
    # not in the store (deleted since the event or listing the caller read)
    assert ledger.add_bound_pod("ns/p", "u1", "n1", {"cpu": 100}) == "gone"
    # another incarnation under the name, bound elsewhere, or not bound at all
    bound_in_store(r, keys, "ns/p", "u2", "n1")
    assert ledger.add_bound_pod("ns/p", "u1", "n1", {"cpu": 100}) == "gone"
    bound_in_store(r, keys, "ns/p", "u1", "n2")
    assert ledger.add_bound_pod("ns/p", "u1", "n1", {"cpu": 100}) == "gone"
    bound_in_store(r, keys, "ns/p", "u1", "")
    assert ledger.add_bound_pod("ns/p", "u1", "n1", {"cpu": 100}) == "gone"
    assert r.hlen(keys.ledger_pods) == 0
    assert ledger.node_state(["n1"])["n1"].requested.get("cpu", 0) == 0
    bound_in_store(r, keys, "ns/p", "u1", "n1")
    assert ledger.add_bound_pod("ns/p", "u1", "n1", {"cpu": 100}) == "added"


def test_pods_deleted_together_release_as_one_by_one(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    """The event handlers' batch of deletions: one read, one pipelined script each; a
    record of another uid stays, an unknown pod releases nothing."""
    token = reserve(r, keys, clock, ledger, "ns/bound", "n1")
    assert ledger.confirm_bound("ns/bound", token)
    reserve(r, keys, clock, ledger, "ns/assumed", "n2")
    reserve(r, keys, clock, ledger, "ns/other", "n2")
    uids = {k: ledger.pod(k).uid for k in ("ns/bound", "ns/assumed", "ns/other")}  # type: ignore[union-attr]
    answers = ledger.pods_deleted(
        [
            ("ns/bound", uids["ns/bound"]),
            ("ns/assumed", uids["ns/assumed"]),
            ("ns/other", "an-older-uid"),
            ("ns/unknown", ""),
        ]
    )
    assert answers == [True, True, False, False]
    assert ledger.pod("ns/bound") is None and ledger.pod("ns/assumed") is None
    assert ledger.pod("ns/other") is not None
    assert ledger.node_state(["n1"])["n1"].requested == {}
    assert ledger.node_state(["n2"])["n2"].requested["cpu"] == 100
    assert ledger.check_consistency() == []


def test_pods_deleted_together_take_each_uid_and_each_name_once(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    """A preemptor's victims on one node go in one release, each under its own uid; a
    batch naming a pod twice (deleted, re-created, deleted) releases it one by one."""
    victims = [f"ns/v{i}" for i in range(3)]
    for key in victims:
        reserve(r, keys, clock, ledger, key, "n1")
    uids = {k: ledger.pod(k).uid for k in victims}  # type: ignore[union-attr]
    answers = ledger.pods_deleted(
        [(victims[0], uids[victims[0]]), (victims[1], "not-its-uid"), (victims[2], "")]
    )
    assert answers == [True, False, True]
    assert ledger.node_state(["n1"])["n1"].requested["cpu"] == 100
    assert ledger.pods_deleted([(victims[1], "not-its-uid"), (victims[1], uids[victims[1]])]) == [
        False,
        True,
    ]
    assert ledger.node_state(["n1"])["n1"].requested == {}
    assert ledger.check_consistency() == []


def test_release_in_pairs_refuses_a_key_without_its_uid(
    r: redis.Redis, keys: Keys, clock: FakeClock, ledger: Ledger
) -> None:
    keys_, args = ledger._release_call("delete_each", ["ns/a", "u", "ns/b"], [], "", 0)
    with pytest.raises(redis.ResponseError, match="pairs"):
        ledger._scripts.get("cache_release")(keys=keys_, args=args)
