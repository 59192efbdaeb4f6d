"""The store's write scripts make the queue moves that need no Python: a pending pod's
create enqueues it, a reserved pod's bind records the move request; only the rest reaches
the queue handlers' stream (q:events)."""

from __future__ import annotations

import redis

from distsched.clock import FakeClock
from distsched.keys import Keys
from distsched.queue_redis import RedisQueue
from distsched.queue_types import encode_info
from distsched.store import Store
from tests.support.objects import node, pod
from tests.workers.harness import InProcessCluster


def queue_event_keys(r: redis.Redis, keys: Keys) -> list[tuple[str, str]]:
    return [
        (fields[b"type"].decode(), fields[b"key"].decode())
        for _id, fields in r.xrange(keys.queue_events)
    ]


def test_create_enqueues_pending_pods_of_registered_profiles(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    r.hset(keys.profiles, mapping={"default-scheduler": "g", "plain": "n", "custom": "p"})
    store, queue = Store(r, keys, clock=clock), RedisQueue(r, keys)
    gates = {"schedulingGates": [{"name": "wait"}]}
    store.create_many(
        [
            pod("ready", priority=7),
            pod("gated", **gates),
            pod("never-gated", schedulerName="plain", **gates),
            pod("custom", schedulerName="custom"),
            pod("other", schedulerName="someone-else"),
            pod("bound", nodeName="n1"),
            node("n1"),
        ]
    )
    assert queue.where("default/ready") == "active"
    assert queue.info("default/ready")["p"] == 7  # type: ignore[index]
    assert queue.info("default/ready")["ts"] == clock.now_ms()  # type: ignore[index]
    assert queue.where("default/never-gated") == "active"
    # Left to the handlers: a pod with gates (its PreEnqueue validates them), a profile
    # with other PreEnqueue plugins, another scheduler's pod, a pod created bound, the node.
    for key in ("default/gated", "default/custom", "default/other", "default/bound"):
        assert queue.info(key) is None
    assert queue_event_keys(r, keys) == [
        ("ADDED", "default/gated"),
        ("ADDED", "default/custom"),
        ("ADDED", "default/other"),
        ("ADDED", "default/bound"),
        ("ADDED", "n1"),
    ]
    assert r.hgetall(keys.added) == {b"active": b"2"}
    assert r.xlen(keys.events) == 7  # informers still see every write


def test_no_registered_profile_leaves_every_create_to_the_handlers(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    Store(r, keys, clock=clock).create(pod("a"))
    assert RedisQueue(r, keys).info("default/a") is None
    assert queue_event_keys(r, keys) == [("ADDED", "default/a")]


def test_a_pod_recreated_before_its_delete_is_handled_keeps_its_place(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    """The create enqueues at once, the delete's moves wait for the handlers: those must
    release only the deleted pod's reservation and remove only its queue record."""
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(node("n1"), pod("web-0"))
    cluster.handle_events()
    cluster.schedule(cluster.pop())
    cluster.bind()
    cluster.handle_events()
    old_uid = cluster.pod("web-0")["metadata"]["uid"]
    cluster.store.delete("Pod", "default/web-0")
    cluster.create(pod("web-0"))  # a StatefulSet re-creates its pod under the same name
    new_uid = cluster.pod("web-0")["metadata"]["uid"]
    assert new_uid != old_uid and cluster.queue.info("default/web-0")["uid"] == new_uid  # type: ignore[index]
    cluster.handle_events()  # the delete: the old pod's ledger record goes, not the new record
    assert cluster.worker.ledger.pod("default/web-0") is None
    assert cluster.queue.where("default/web-0") == "active"
    cluster.settle()
    assert cluster.node_of("web-0") == "n1"
    assert cluster.worker.ledger.pod("default/web-0").uid == new_uid  # type: ignore[union-attr]
    assert cluster.worker.ledger.check_consistency() == []


def test_a_leftover_record_of_another_uid_is_replaced_at_create(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    r.hset(keys.profiles, "default-scheduler", "g")
    store, queue = Store(r, keys, clock=clock), RedisQueue(r, keys)
    first = store.create(pod("a"))
    queue.pop(1, now_ms=clock.now_ms())  # the first pod is inflight when it is deleted
    store.delete("Pod", "default/a")
    clock.step(10)
    second = store.create(pod("a"))
    info = queue.info("default/a")
    assert info is not None and info["uid"] == second["metadata"]["uid"] != first["metadata"]["uid"]
    assert (info["w"], info["a"], info["ts"]) == ("active", 0, clock.now_ms())
    assert queue.counts()["inflight"] == 0 and queue.counts()["active"] == 1
    # the deleted pod's handler removes nothing of the new one
    assert queue.delete(["default/a"], now_ms=clock.now_ms(), uids=[first["metadata"]["uid"]]) == 0
    assert queue.where("default/a") == "active"


def test_a_reserved_bind_records_the_move_request_itself(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(node("n1", cpu="1"), pod("fits"))
    cluster.handle_events()
    before = r.xlen(keys.queue_events)
    cluster.schedule(cluster.pop())
    cycle = int(r.get(keys.cycle) or 0)
    cluster.bind()
    # nothing waits in the unschedulable set: no handler needs the binding
    assert r.xlen(keys.queue_events) == before
    assert int(r.get(keys.move_cycle) or 0) == cycle
    # with a parked pod, the handlers decide what a binding helps
    cluster.create(pod("big", cpu="2"))
    cluster.schedule(cluster.pop())
    assert cluster.where("big") == "unschedulable"
    cluster.create(pod("more"))
    cluster.schedule(cluster.pop())
    cluster.bind()
    assert ("MODIFIED", "default/more") in queue_event_keys(r, keys)


def test_a_created_pod_gets_the_queue_record_of_a_new_active_pod(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    """store_create writes the record as text (no table per pod): exactly the record a
    pod new to the queue and made active now has, every field of it."""
    r.hset(keys.profiles, "default-scheduler", "g")
    [created] = Store(r, keys, clock=clock).create_many([pod("ready", priority=-3)])
    now = clock.now_ms()
    expected = {"w": "active", "e": 0, "cy": 0, "a": 0, "d": 0, "u": 0, "p": -3}
    expected |= {"ts": now, "its": now, "bo": 0, "pl": "", "uid": created["metadata"]["uid"]}
    assert r.hget(keys.info, "default/ready") == encode_info(expected).encode()
    member = f"{now:013d}|default/ready".encode()
    assert r.zrange(keys.active, 0, -1, withscores=True) == [(member, 3.0)]
