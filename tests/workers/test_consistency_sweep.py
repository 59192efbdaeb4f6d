"""Issue 24, item 1: the consistency sweep finds and repairs any record a missed event left
out of step with the store (in-process worker, real Redis, FakeClock)."""

from __future__ import annotations

import redis

from distsched import metrics
from distsched.clock import FakeClock
from distsched.keys import Keys
from distsched.queue_types import PodEntry
from distsched.workers.eventhandlers import GROUP
from tests.support.objects import node, pod
from tests.workers.harness import InProcessCluster


def repairs(kind: str) -> float:
    return metrics.consistency_repairs.labels(kind)._value.get()


def lose_queue_events(r: redis.Redis, keys: Keys) -> None:
    """Take every pending q:events entry away from the workers' handlers, as if the events
    had been handled by a worker that then lost its moves."""
    r.xgroup_createconsumer(keys.queue_events, GROUP, "black-hole")
    while reply := r.xreadgroup(GROUP, "black-hole", {keys.queue_events: ">"}, count=500):
        ids = [entry_id for entry_id, _ in reply[0][1]]
        r.xack(keys.queue_events, GROUP, *ids)


def test_a_reservation_of_a_deleted_pod_is_released(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(node("n1", cpu="4"), pod("p", cpu="1"), pod("q", cpu="1"))
    cluster.settle()
    assert cluster.node_of("p") == cluster.node_of("q") == "n1"
    cluster.store.delete("Pod", "default/p")
    lose_queue_events(r, keys)
    ledger = cluster.worker.ledger
    assert ledger.pod("default/p") is not None  # leaked: nothing will release it
    before = repairs("reservation")
    # Found once: it could be a deletion its handler is about to handle; left alone.
    assert cluster.worker.sweep.run() == 0
    assert ledger.pod("default/p") is not None
    assert cluster.worker.sweep.run() == 1
    assert ledger.pod("default/p") is None
    assert ledger.pod("default/q") is not None  # the store has it: never taken
    assert ledger.node_state(["n1"])["n1"].requested["cpu"] == 1000
    assert ledger.check_consistency() == []
    assert repairs("reservation") == before + 1
    assert cluster.worker.sweep.run() == 0


def test_queue_records_of_deleted_or_bound_pods_go(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(node("n1", cpu="4"), pod("bound", cpu="1"))
    cluster.settle()
    queue = cluster.queue
    # A handler that handled an old ADDED after the pod's deletion queued a ghost; another
    # queued a pod that is bound by now.
    queue.add([PodEntry("default/ghost", "uid-ghost", 0)], now_ms=clock.now_ms())
    uid = cluster.pod("bound")["metadata"]["uid"]
    queue.add([PodEntry("default/bound", uid, 0)], now_ms=clock.now_ms())
    assert queue.where("default/ghost") == queue.where("default/bound") == "active"
    cluster.worker.sweep.run()
    assert queue.where("default/ghost") == queue.where("default/bound") == "active"
    cluster.worker.sweep.run()
    assert queue.where("default/ghost") is None
    assert queue.where("default/bound") is None
    assert queue.counts()["active"] == 0


def test_a_pod_in_no_sub_queue_is_put_back_after_two_sweeps(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(node("n1", cpu="4"))
    cluster.handle_events()
    cluster.create(pod("stranded", cpu="1"))
    # A script that popped it and then failed (before the fix of queue_pop's input checks)
    # left it in no sub-queue.
    r.zpopmin(keys.active)
    assert cluster.queue.where("default/stranded") == "active"
    before = repairs("queue-lost")
    sweep = cluster.worker.sweep
    sweep.run()  # seen once: could be between two halves of a move, left alone
    assert r.zcard(keys.active) == 0
    sweep.run()
    assert r.zcard(keys.active) == 1
    assert repairs("queue-lost") == before + 1
    cluster.settle()
    assert cluster.node_of("stranded") == "n1"


def test_a_lost_pod_that_moved_between_sweeps_is_left_alone(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(node("n1", cpu="4"), pod("p", cpu="1"))
    cluster.handle_events()
    r.zpopmin(keys.active)
    sweep = cluster.worker.sweep
    sweep.run()
    # The pod's record changes (an update while it is stranded): the next sweep sees a
    # new record and only notes it again.
    uid = cluster.pod("p")["metadata"]["uid"]
    r.hset(keys.info, "default/p", r.hget(keys.info, "default/p").replace(b"|0|0|", b"|0|7|", 1))
    sweep.run()
    assert r.zcard(keys.active) == 0
    sweep.run()
    assert r.zcard(keys.active) == 1
    assert cluster.queue.info("default/p")["uid"] == uid


def test_explain_records_of_deleted_pods_go(r: redis.Redis, keys: Keys, clock: FakeClock) -> None:
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(node("n1", cpu="1"), pod("big", cpu="2"), pod("gone", cpu="2"))
    cluster.settle()
    assert r.hexists(keys.explain, "default/big") and r.hexists(keys.explain, "default/gone")
    cluster.store.delete("Pod", "default/gone")
    # An attempt that ended after the delete writes its explanation again.
    r.hset(keys.explain, "default/gone", r.hget(keys.explain, "default/big"))
    cluster.worker.sweep.run()
    assert r.hexists(keys.explain, "default/gone") == 1
    cluster.worker.sweep.run()
    assert r.hexists(keys.explain, "default/gone") == 0
    assert r.hexists(keys.explain, "default/big") == 1


def test_the_sweep_is_a_periodic_task_of_every_worker(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    cluster = InProcessCluster(r, keys, clock)
    worker = cluster.add_worker()
    worker._setup_periodic()
    assert "sweep" in {task.name for task in worker.periodic._tasks}


def test_a_deletion_its_handler_is_about_to_handle_is_not_a_repair(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(node("n1", cpu="4"), pod("p", cpu="1"))
    cluster.settle()
    before = repairs("reservation")
    cluster.store.delete("Pod", "default/p")
    cluster.worker.sweep.run()  # before the DELETED event is handled
    cluster.handle_events()
    cluster.worker.sweep.run()
    assert cluster.worker.ledger.pod("default/p") is None
    assert repairs("reservation") == before


def test_the_gang_membership_of_a_deleted_pod_goes(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    """A gang member deleted while its handler missed the event would keep counting for its
    group (which could then be released below its minimum)."""
    label = {"scheduling.x-k8s.io/pod-group": "train"}
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(node("n1", cpu="4"), pod("train-0", labels=label), pod("train-1", labels=label))
    cluster.settle()
    assert cluster.queue.gang_members("default/train") == ["default/train-0", "default/train-1"]
    cluster.store.delete("Pod", "default/train-1")
    lose_queue_events(r, keys)
    before = repairs("gang-member")
    assert cluster.worker.sweep.run() == 0  # found once: maybe its handler is on the way
    assert cluster.worker.sweep.run() == 2  # its queue record (held) and its membership
    assert cluster.queue.gang_members("default/train") == ["default/train-0"]
    assert cluster.queue.where("default/train-1") is None
    assert repairs("gang-member") == before + 1
