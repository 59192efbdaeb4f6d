"""Contract tests: kube-scheduler's queue behaviours, on the memory twin and on Redis."""

from __future__ import annotations

import pytest

from distsched.clock import FakeClock
from distsched.queue_types import PodEntry as E
from distsched.queue_types import (
    QueueConfig,
    QueuedPod,
    SchedulingQueue,
    backoff_duration_ms,
)
from tests.queue.conftest import QueueFactory

MIN_PRIORITY, MAX_PRIORITY = -2147483648, 2147483647


def pop_keys(queue: SchedulingQueue, clock: FakeClock, n: int = 100) -> list[str]:
    return [pod.key for pod in queue.pop(n, now_ms=clock.now_ms())]


def pop_one(queue: SchedulingQueue, clock: FakeClock) -> QueuedPod:
    (pod,) = queue.pop(1, now_ms=clock.now_ms())
    return pod


def fail(
    queue: SchedulingQueue,
    clock: FakeClock,
    pod: QueuedPod,
    plugins: frozenset[str] = frozenset({"NodeResourcesFit"}),
    *,
    error: bool = False,
) -> str:
    return queue.add_unschedulable_if_not_present(
        pod.key, epoch=pod.epoch, plugins=plugins, now_ms=clock.now_ms(), error=error
    )


def make_unschedulable(
    queue: SchedulingQueue, clock: FakeClock, key: str, plugins: frozenset[str]
) -> QueuedPod:
    queue.add([E(key, "uid-" + key, 0)], now_ms=clock.now_ms())
    pod = pop_one(queue, clock)
    assert pod.key == key
    assert fail(queue, clock, pod, plugins) == "unschedulable"
    return pod


# --- activeQ order ------------------------------------------------------------------------
def test_pop_order_is_priority_then_timestamp_over_int32(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    for key, priority in [
        ("ns/zero-1", 0),
        ("ns/max-1", MAX_PRIORITY),
        ("ns/min", MIN_PRIORITY),
        ("ns/zero-2", 0),
        ("ns/max-2", MAX_PRIORITY),
        ("ns/max-minus-1", MAX_PRIORITY - 1),
        ("ns/min-plus-1", MIN_PRIORITY + 1),
    ]:
        assert queue.add([E(key, "u", priority)], now_ms=clock.now_ms()) == 1
        clock.step(1)
    assert pop_keys(queue, clock) == [
        "ns/max-1",
        "ns/max-2",
        "ns/max-minus-1",
        "ns/zero-1",
        "ns/zero-2",
        "ns/min-plus-1",
        "ns/min",
    ]


def test_same_priority_and_timestamp_pop_in_key_order(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    queue.add([E("ns/c", "u", 1), E("ns/a", "u", 1), E("ns/b", "u", 1)], now_ms=clock.now_ms())
    assert pop_keys(queue, clock) == ["ns/a", "ns/b", "ns/c"]


def test_failed_pod_requeues_behind_pods_queued_before_its_failure(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    queue.add([E("ns/first", "u", 5)], now_ms=clock.now_ms())
    first = pop_one(queue, clock)
    clock.step(10)
    queue.add([E("ns/second", "u", 5)], now_ms=clock.now_ms())
    clock.step(10)
    assert fail(queue, clock, first, error=True) == "backoff"
    info = queue.info("ns/first")
    assert info is not None
    assert info["ts"] == clock.now_ms()
    assert info["its"] == clock.now_ms() - 20
    clock.step(1_000)
    assert queue.flush_backoff_completed(now_ms=clock.now_ms()) == 1
    assert pop_keys(queue, clock) == ["ns/second", "ns/first"]


def test_pop_batch_leases_each_pod_with_its_own_cycle_and_epoch(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    queue.add([E(f"ns/p{i}", f"uid{i}", i) for i in range(5)], now_ms=clock.now_ms())
    pods = queue.pop(3, now_ms=clock.now_ms())
    assert [p.key for p in pods] == ["ns/p4", "ns/p3", "ns/p2"]
    assert [p.cycle for p in pods] == [1, 2, 3]
    assert len({p.epoch for p in pods}) == 3
    assert all(p.attempts == 1 and p.uid == "uid" + p.key[-1] for p in pods)
    assert all(p.unschedulable_plugins == frozenset() for p in pods)
    assert pods[0].timestamp_ms == pods[0].initial_attempt_ms == clock.now_ms()
    assert queue.counts() == {
        "active": 2,
        "backoff": 0,
        "unschedulable": 0,
        "gated": 0,
        "inflight": 3,
        "dead": 0,
    }
    assert queue.where("ns/p4") == "inflight"
    assert queue.pop(10, now_ms=clock.now_ms())[-1].cycle == 5
    assert queue.pop(10, now_ms=clock.now_ms()) == []
    with pytest.raises(ValueError):
        queue.pop(0, now_ms=clock.now_ms())


def test_add_leaves_known_pods_alone(queue: SchedulingQueue, clock: FakeClock) -> None:
    assert queue.add([E("ns/a", "u1", 1), E("ns/a", "u2", 9)], now_ms=clock.now_ms()) == 1
    clock.step(5)
    assert queue.add([E("ns/a", "u3", 7), E("ns/b", "u", 0)], now_ms=clock.now_ms()) == 1
    info = queue.info("ns/a")
    assert info is not None
    assert (info["uid"], info["p"], info["ts"]) == ("u1", 1, clock.now_ms() - 5)
    assert queue.add([], now_ms=clock.now_ms()) == 0


def test_invalid_entries_are_refused(queue: SchedulingQueue, clock: FakeClock) -> None:
    for bad in [E("ns/a", "u", MAX_PRIORITY + 1), E("no-namespace", "u", 0), E("n/a|b", "u", 0)]:
        with pytest.raises(ValueError):
            queue.add([E("ns/ok", "u", 0), bad], now_ms=clock.now_ms())
    assert queue.counts()["active"] == 0


# --- backoff ------------------------------------------------------------------------------
def test_backoff_duration_doubles_and_caps() -> None:
    cfg = QueueConfig()
    assert [backoff_duration_ms(a, cfg) for a in range(8)] == [
        1000,
        1000,
        2000,
        4000,
        8000,
        10000,
        10000,
        10000,
    ]
    odd = QueueConfig(initial_backoff_ms=300, max_backoff_ms=1000)
    assert [backoff_duration_ms(a, odd) for a in range(1, 5)] == [300, 600, 1000, 1000]


def test_backoff_expiry_doubles_per_attempt_and_flushes_at_expiry(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    queue.add([E("ns/a", "u", 0)], now_ms=clock.now_ms())
    for expected in [1000, 2000, 4000, 8000, 10000, 10000]:
        pod = pop_one(queue, clock)
        assert fail(queue, clock, pod, error=True) == "backoff"
        info = queue.info("ns/a")
        assert info is not None and info["bo"] - info["ts"] == expected
        clock.step(expected - 1)
        assert queue.flush_backoff_completed(now_ms=clock.now_ms()) == 0
        assert queue.where("ns/a") == "backoff"
        clock.step(1)
        assert queue.flush_backoff_completed(now_ms=clock.now_ms()) == 1
        assert queue.where("ns/a") == "active"
    assert pop_one(queue, clock).attempts == 7


def park_in_backoff(queue: SchedulingQueue, clock: FakeClock, key: str, priority: int) -> None:
    """A pod a plugin rejected, moved by an event into backoffQ while its backoff runs."""
    queue.add([E(key, "uid-" + key, priority)], now_ms=clock.now_ms())
    pod = pop_one(queue, clock)
    assert fail(queue, clock, pod, frozenset({"X"})) == "unschedulable"
    moved = queue.move_all_to_active_or_backoff(
        "NodeAdd", now_ms=clock.now_ms(), interested_plugins=None, keys=[key]
    )
    assert moved == 1 and queue.where(key) == "backoff"


def only_the_flush_brings(
    queue: SchedulingQueue, clock: FakeClock, key: str, *, after_ms: int
) -> None:
    """Nothing to pop while ``key`` backs off; ``after_ms`` later the backoff flush makes it
    active, and it pops."""
    assert pop_keys(queue, clock) == []
    clock.step(after_ms)
    assert queue.flush_backoff_completed(now_ms=clock.now_ms()) == 1
    assert pop_keys(queue, clock) == [key]


def test_a_pop_that_empties_activeQ_goes_on_into_backoffQ(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    # kube 1.33+'s SchedulerPopFromBackoffQ: by second of backoff expiry, then as activeQ
    # orders (priority, then queue timestamp); a pod backing off after an error waits.
    park_in_backoff(queue, clock, "ns/early-low", 0)  # expires at 1000
    queue.add([E("ns/err", "u", 100)], now_ms=clock.now_ms())
    assert fail(queue, clock, pop_one(queue, clock), error=True) == "backoff"  # at 1000
    clock.step(300)
    park_in_backoff(queue, clock, "ns/late-high", 5)  # at 1300: the same second
    clock.step(900)
    park_in_backoff(queue, clock, "ns/next-second", 9)  # at 2200
    queue.add([E("ns/active", "u", -1)], now_ms=clock.now_ms())
    assert pop_keys(queue, clock, 2) == ["ns/active", "ns/late-high"]
    assert pop_keys(queue, clock) == ["ns/early-low", "ns/next-second"]
    assert queue.where("ns/err") == "backoff"
    only_the_flush_brings(queue, clock, "ns/err", after_ms=10_000)


def test_without_pop_from_backoff_backoffQ_waits_for_its_flush(make_queue: QueueFactory) -> None:
    clock = FakeClock()
    queue = make_queue(config=QueueConfig(pop_from_backoff=False))
    park_in_backoff(queue, clock, "ns/a", 0)
    only_the_flush_brings(queue, clock, "ns/a", after_ms=1_000)


# --- moveRequestCycle and events ----------------------------------------------------------
def test_failure_during_a_move_request_cycle_goes_to_backoff(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    queue.add([E("ns/early", "u", 2), E("ns/late", "u", 1)], now_ms=clock.now_ms())
    early = pop_one(queue, clock)
    moved = queue.move_all_to_active_or_backoff(
        "NodeAdd", now_ms=clock.now_ms(), interested_plugins=None
    )
    assert moved == 0
    late = pop_one(queue, clock)
    assert (early.cycle, late.cycle) == (1, 2)
    # A move request came in while "early" was being scheduled: its failure may be stale.
    assert fail(queue, clock, early) == "backoff"
    assert fail(queue, clock, late) == "unschedulable"
    assert queue.unschedulable_pods() == [("ns/late", frozenset({"NodeResourcesFit"}))]


def test_event_moves_only_pods_whose_plugins_are_interested(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    make_unschedulable(queue, clock, "ns/fit", frozenset({"NodeResourcesFit"}))
    make_unschedulable(queue, clock, "ns/taint", frozenset({"TaintToleration"}))
    make_unschedulable(queue, clock, "ns/both", frozenset({"TaintToleration", "NodePorts"}))
    make_unschedulable(queue, clock, "ns/none", frozenset())
    clock.step(10_000)
    moved = queue.move_all_to_active_or_backoff(
        "NodeTaintChange", now_ms=clock.now_ms(), interested_plugins=frozenset({"NodePorts"})
    )
    assert moved == 2
    assert {k for k, _ in queue.unschedulable_pods()} == {"ns/fit", "ns/taint"}
    assert queue.where("ns/both") == queue.where("ns/none") == "active"
    assert (
        queue.move_all_to_active_or_backoff(
            "Nothing", now_ms=clock.now_ms(), interested_plugins=frozenset()
        )
        == 0
    )
    assert (
        queue.move_all_to_active_or_backoff(
            "UnschedulableTimeout", now_ms=clock.now_ms(), interested_plugins=None
        )
        == 2
    )
    assert queue.counts()["unschedulable"] == 0


def test_moved_pod_still_backing_off_goes_to_backoff(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    make_unschedulable(queue, clock, "ns/a", frozenset({"X"}))
    make_unschedulable(queue, clock, "ns/b", frozenset({"X"}))
    clock.step(999)  # backoff after the first attempt is 1000 ms
    assert (
        queue.move_all_to_active_or_backoff(
            "E", now_ms=clock.now_ms(), interested_plugins=None, keys=["ns/a"]
        )
        == 1
    )
    assert queue.where("ns/a") == "backoff"
    clock.step(1)
    assert (
        queue.move_all_to_active_or_backoff(
            "E", now_ms=clock.now_ms(), interested_plugins=None, keys=["ns/b"]
        )
        == 1
    )
    assert queue.where("ns/b") == "active"


def test_precheck_key_list_limits_the_candidates(queue: SchedulingQueue, clock: FakeClock) -> None:
    for name in ("a", "b", "c"):
        make_unschedulable(queue, clock, f"ns/{name}", frozenset({"NodeAffinity"}))
    queue.add([E("ns/active", "u", 0)], now_ms=clock.now_ms())
    clock.step(60_000)
    moved = queue.move_all_to_active_or_backoff(
        "AssignedPodAdd",
        now_ms=clock.now_ms(),
        interested_plugins=frozenset({"NodeAffinity"}),
        keys=["ns/c", "ns/active", "ns/unknown", "ns/a", "ns/c"],
    )
    assert moved == 2
    assert [k for k, _ in queue.unschedulable_pods()] == ["ns/b"]
    # An empty list moves nothing but still records the move request.
    queue.add([E("ns/d", "u", 100)], now_ms=clock.now_ms())
    d = pop_one(queue, clock)
    assert (
        queue.move_all_to_active_or_backoff(
            "AssignedPodAdd", now_ms=clock.now_ms(), interested_plugins=None, keys=[]
        )
        == 0
    )
    assert fail(queue, clock, d) == "backoff"


def test_leftover_flush_after_five_minutes_not_before(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    # kube's flushUnschedulablePodsLeftover: now - timestamp > 5 min, strictly.
    make_unschedulable(queue, clock, "ns/old", frozenset({"X"}))
    clock.step(60_000)
    make_unschedulable(queue, clock, "ns/young", frozenset({"X"}))
    clock.step(300_000 - 60_000)
    assert queue.flush_unschedulable_leftover(now_ms=clock.now_ms()) == 0
    clock.step(1)
    assert queue.flush_unschedulable_leftover(now_ms=clock.now_ms()) == 1
    assert queue.where("ns/old") == "active"
    assert queue.where("ns/young") == "unschedulable"


def test_leftover_still_backing_off_goes_to_backoff(make_queue: QueueFactory) -> None:
    clock = FakeClock()
    queue = make_queue(config=QueueConfig(unschedulable_max_ms=500))
    make_unschedulable(queue, clock, "ns/a", frozenset({"X"}))
    clock.step(501)
    assert queue.flush_unschedulable_leftover(now_ms=clock.now_ms()) == 1
    assert queue.where("ns/a") == "backoff"
    clock.step(500)
    assert queue.flush_backoff_completed(now_ms=clock.now_ms()) == 1
    assert pop_keys(queue, clock) == ["ns/a"]


def test_leftover_whose_backoff_expires_now_goes_to_active(make_queue: QueueFactory) -> None:
    clock = FakeClock()
    queue = make_queue(config=QueueConfig(unschedulable_max_ms=1_000))
    make_unschedulable(queue, clock, "ns/a", frozenset({"X"}))
    clock.step(1_001)  # the first backoff is 1000 ms: expired
    assert queue.flush_unschedulable_leftover(now_ms=clock.now_ms()) == 1
    assert queue.where("ns/a") == "active"


# --- leases, fencing, dead letters ------------------------------------------------------
def test_expired_lease_is_reclaimed_with_its_attempts(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    queue.add([E("ns/a", "u", 0), E("ns/b", "u", 0)], now_ms=clock.now_ms())
    a = pop_one(queue, clock)
    clock.step(1)
    b = pop_one(queue, clock)
    clock.step(10_000 - 2)
    assert queue.reclaim_expired_leases(now_ms=clock.now_ms()) == []
    clock.step(1)
    assert queue.reclaim_expired_leases(now_ms=clock.now_ms()) == ["ns/a"]
    clock.step(1)
    assert queue.reclaim_expired_leases(now_ms=clock.now_ms()) == ["ns/b"]
    again = queue.pop(2, now_ms=clock.now_ms())
    assert [(p.key, p.attempts) for p in again] == [("ns/a", 2), ("ns/b", 2)]
    assert again[0].timestamp_ms == a.timestamp_ms
    # The reclaimed worker's lease is fenced off.
    assert not queue.done("ns/a", epoch=a.epoch)
    assert fail(queue, clock, b) == "stale"
    assert queue.done("ns/a", epoch=again[0].epoch)


def test_fencing_refuses_stale_epochs(queue: SchedulingQueue, clock: FakeClock) -> None:
    queue.add([E("ns/a", "u", 0)], now_ms=clock.now_ms())
    pod = pop_one(queue, clock)
    assert not queue.done("ns/a", epoch=pod.epoch + 1)
    assert not queue.done("ns/unknown", epoch=pod.epoch)
    assert (
        queue.add_unschedulable_if_not_present(
            "ns/a", epoch=pod.epoch - 1, plugins=[], now_ms=clock.now_ms()
        )
        == "stale"
    )
    assert (
        queue.add_unschedulable_if_not_present(
            "ns/unknown", epoch=pod.epoch, plugins=[], now_ms=clock.now_ms()
        )
        == "stale"
    )
    assert queue.where("ns/a") == "inflight"
    assert queue.done("ns/a", epoch=pod.epoch)
    assert not queue.done("ns/a", epoch=pod.epoch)
    assert queue.where("ns/a") == ""
    # A binding failure after done() requeues with the same epoch, exactly once.
    assert fail(queue, clock, pod, error=True) == "backoff"
    assert fail(queue, clock, pod, error=True) == "present"


def test_done_many_fences_each_lease(queue: SchedulingQueue, clock: FakeClock) -> None:
    queue.add([E(f"ns/p{i}", "u", 0) for i in range(3)], now_ms=clock.now_ms())
    a, b, c = queue.pop(3, now_ms=clock.now_ms())
    leases = [(a.key, a.epoch), (b.key, b.epoch + 7), (c.key, c.epoch), ("ns/x", 1)]
    assert queue.done_many(leases) == [True, False, True, False]
    assert [queue.where(p.key) for p in (a, b, c)] == ["", "inflight", ""]
    assert queue.done_many([]) == []


def test_reclaimed_pod_failure_reports_present(queue: SchedulingQueue, clock: FakeClock) -> None:
    queue.add([E("ns/a", "u", 0)], now_ms=clock.now_ms())
    pod = pop_one(queue, clock)
    clock.step(10_000)
    assert queue.reclaim_expired_leases(now_ms=clock.now_ms()) == ["ns/a"]
    assert fail(queue, clock, pod) == "present"
    assert queue.where("ns/a") == "active"


def test_pod_delivered_too_often_is_dead_lettered(make_queue: QueueFactory) -> None:
    clock = FakeClock()
    queue = make_queue(config=QueueConfig(max_deliveries=2))
    queue.add([E("ns/crasher", "u", 10)], now_ms=clock.now_ms())
    clock.step(1)
    queue.add([E("ns/fine", "u", 0)], now_ms=clock.now_ms())
    for attempt in (1, 2):
        crasher = pop_one(queue, clock)
        assert (crasher.key, crasher.attempts) == ("ns/crasher", attempt)
        clock.step(10_000)
        assert queue.reclaim_expired_leases(now_ms=clock.now_ms()) == ["ns/crasher"]
    # The dead-lettered pod does not use up the batch.
    assert pop_keys(queue, clock, 1) == ["ns/fine"]
    assert queue.where("ns/crasher") == "dead"
    assert queue.counts()["dead"] == 1
    assert queue.heads(5)["dead"] == ["ns/crasher"]
    assert queue.pop(1, now_ms=clock.now_ms()) == []


def test_orderly_outcomes_reset_deliveries(make_queue: QueueFactory) -> None:
    clock = FakeClock()
    queue = make_queue(config=QueueConfig(max_deliveries=1))
    queue.add([E("ns/a", "u", 0)], now_ms=clock.now_ms())
    for _ in range(4):
        pod = pop_one(queue, clock)
        assert fail(queue, clock, pod, error=True) == "backoff"
        clock.step(10_000)
        queue.flush_backoff_completed(now_ms=clock.now_ms())
    pod = pop_one(queue, clock)
    assert pod.attempts == 5
    assert queue.done("ns/a", epoch=pod.epoch)
    assert fail(queue, clock, pod, error=True) == "backoff"


def test_hand_back_returns_an_unattempted_pop_uncounted(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    queue.add([E("ns/a", "u", 0)], now_ms=clock.now_ms())
    clock.step(1)
    queue.add([E("ns/b", "u", 0)], now_ms=clock.now_ms())
    a, b = queue.pop(2, now_ms=clock.now_ms())
    assert queue.hand_back([(a.key, a.epoch), (b.key, b.epoch)]) == ["active", "active"]
    info = queue.info("ns/a")
    assert info is not None and (info["a"], info["d"]) == (0, 0)
    # Back at their old places, and their old leases are worth nothing now.
    again = queue.pop(2, now_ms=clock.now_ms())
    assert [(p.key, p.attempts, p.timestamp_ms) for p in again] == [
        ("ns/a", 1, a.timestamp_ms),
        ("ns/b", 1, b.timestamp_ms),
    ]
    assert queue.hand_back([(a.key, a.epoch)]) == [""]
    assert queue.where("ns/a") == "inflight"
    assert queue.hand_back([]) == []


def test_hand_back_leaves_attempted_and_unknown_pods_alone(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    queue.add([E(f"ns/p{i}", "u", 0) for i in range(3)], now_ms=clock.now_ms())
    failed, done, assumed = queue.pop(3, now_ms=clock.now_ms())
    assert fail(queue, clock, failed) == "unschedulable"
    assert queue.done(done.key, epoch=done.epoch)
    assert queue.assume([(assumed.key, assumed.epoch, "u")]) == [True]
    leases = [(p.key, p.epoch) for p in (failed, done, assumed)] + [("ns/gone", 1)]
    assert queue.hand_back(leases) == ["", "", "", ""]
    assert [queue.where(p.key) for p in (failed, done, assumed)] == ["unschedulable", "", "assumed"]


def test_hand_back_after_the_lease_expired_uncounts_the_delivery(
    make_queue: QueueFactory,
) -> None:
    """A worker that could not reach Redis hands its pods back once it can: by then the
    reaper may have requeued them (counted) or a later pop dead-lettered them."""
    clock = FakeClock()
    queue = make_queue(config=QueueConfig(max_deliveries=2))
    queue.add([E("ns/a", "u", 0)], now_ms=clock.now_ms())
    for _ in range(6):
        pod = pop_one(queue, clock)
        clock.step(10_000)
        assert queue.reclaim_expired_leases(now_ms=clock.now_ms()) == ["ns/a"]
        assert queue.hand_back([(pod.key, pod.epoch)]) == ["active"]
    pop_one(queue, clock)  # the first delivery without an outcome
    clock.step(10_000)
    queue.reclaim_expired_leases(now_ms=clock.now_ms())
    late = pop_one(queue, clock)  # the second delivery without an outcome
    clock.step(10_000)
    queue.reclaim_expired_leases(now_ms=clock.now_ms())
    assert queue.pop(1, now_ms=clock.now_ms()) == []
    assert queue.where("ns/a") == "dead"
    assert queue.hand_back([(late.key, late.epoch)]) == ["active"]
    again = pop_one(queue, clock)
    assert (again.key, again.attempts) == ("ns/a", 2)


# --- gates, updates, deletes ------------------------------------------------------------
def test_gated_pods_wait_until_ungated(queue: SchedulingQueue, clock: FakeClock) -> None:
    queue.add([E("ns/g", "u", 100, gated=True), E("ns/a", "u", 0)], now_ms=clock.now_ms())
    assert queue.heads(3)["gated"] == ["ns/g"]
    assert pop_keys(queue, clock) == ["ns/a"]
    clock.step(5)
    assert queue.update(E("ns/g", "u", 100, gated=True), now_ms=clock.now_ms()) == "gated"
    assert queue.pop(1, now_ms=clock.now_ms()) == []
    assert queue.update(E("ns/g", "u", 100), now_ms=clock.now_ms()) == "active"
    pod = pop_one(queue, clock)
    assert (pod.key, pod.timestamp_ms) == ("ns/g", clock.now_ms() - 5)


def test_update_rescores_active_pods(queue: SchedulingQueue, clock: FakeClock) -> None:
    queue.add([E("ns/a", "u", 1), E("ns/b", "u", 2)], now_ms=clock.now_ms())
    assert queue.update(E("ns/a", "u", 3), now_ms=clock.now_ms()) == "active"
    assert queue.heads(2)["active"] == ["ns/a", "ns/b"]
    assert queue.update(E("ns/a", "u", MIN_PRIORITY), now_ms=clock.now_ms()) == "active"
    assert pop_keys(queue, clock) == ["ns/b", "ns/a"]


def test_update_of_a_failed_pod_retries_it(queue: SchedulingQueue, clock: FakeClock) -> None:
    make_unschedulable(queue, clock, "ns/u", frozenset({"X"}))
    make_unschedulable(queue, clock, "ns/v", frozenset({"X"}))
    queue.add([E("ns/b", "u", 0)], now_ms=clock.now_ms())
    assert fail(queue, clock, pop_one(queue, clock), error=True) == "backoff"
    # Still backing off: an update parks the pod in backoffQ.
    assert queue.update(E("ns/u", "u2", 0), now_ms=clock.now_ms()) == "backoff"
    assert queue.update(E("ns/b", "u2", 0), now_ms=clock.now_ms()) == "backoff"
    clock.step(1_000)
    assert queue.update(E("ns/v", "u2", 4), now_ms=clock.now_ms()) == "active"
    # kube updates a backoffQ pod in place: it waits for the backoff flush, expired or not.
    assert queue.update(E("ns/b", "u2", 5), now_ms=clock.now_ms()) == "backoff"
    assert queue.where("ns/u") == "backoff"
    # activeQ emptied, the pop goes on into backoffQ (SchedulerPopFromBackoffQ): ns/u, which
    # a plugin rejected, not ns/b, which failed with an error.
    assert pop_keys(queue, clock) == ["ns/v", "ns/u"]
    assert queue.flush_backoff_completed(now_ms=clock.now_ms()) == 1
    assert pop_keys(queue, clock) == ["ns/b"]


def test_update_in_flight_sends_the_failed_pod_to_active(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    # kube's Update puts a pod that is in no sub-queue into activeQ; the attempt on the
    # old object then finds it present instead of parking it as unschedulable.
    queue.add([E("ns/a", "u", 0), E("ns/b", "u", 0)], now_ms=clock.now_ms())
    a, b = queue.pop(2, now_ms=clock.now_ms())
    assert queue.update(E("ns/a", "u", 0), now_ms=clock.now_ms()) == "inflight"
    assert fail(queue, clock, a) == "active"
    assert fail(queue, clock, b) == "unschedulable"
    again = pop_one(queue, clock)
    assert again.key == "ns/a"
    # The mark was for that attempt only: the next failure parks the pod as usual.
    assert fail(queue, clock, again) == "unschedulable"


def test_leftover_flush_is_a_move_request(queue: SchedulingQueue, clock: FakeClock) -> None:
    make_unschedulable(queue, clock, "ns/old", frozenset({"X"}))
    queue.add([E("ns/busy", "u", 0)], now_ms=clock.now_ms())
    busy = pop_one(queue, clock)
    clock.step(300_001)
    assert queue.flush_unschedulable_leftover(now_ms=clock.now_ms()) == 1
    # kube's movePodsToActiveOrBackoffQueue sets moveRequestCycle: the pod in flight
    # during the flush goes to backoffQ.
    assert fail(queue, clock, busy) == "backoff"


def test_update_of_leased_or_unknown_pods(queue: SchedulingQueue, clock: FakeClock) -> None:
    queue.add([E("ns/a", "u", 0)], now_ms=clock.now_ms())
    pod = pop_one(queue, clock)
    assert queue.update(E("ns/a", "u", 9), now_ms=clock.now_ms()) == "inflight"
    info = queue.info("ns/a")
    assert info is not None and info["p"] == 9
    assert queue.done("ns/a", epoch=pod.epoch)
    assert queue.update(E("ns/a", "u", 8), now_ms=clock.now_ms()) == ""
    assert queue.update(E("ns/new", "u", 1), now_ms=clock.now_ms()) == "active"
    assert queue.update(E("ns/new-gated", "u", 1, gated=True), now_ms=clock.now_ms()) == "gated"


def test_delete_removes_pods_from_every_place(make_queue: QueueFactory) -> None:
    clock = FakeClock()
    queue = make_queue(config=QueueConfig(max_deliveries=1))
    now = clock.now_ms()
    queue.add([E("ns/dead", "u", 9)], now_ms=now)
    pop_one(queue, clock)
    queue.reclaim_expired_leases(now_ms=now + 10_000)
    assert queue.pop(1, now_ms=now) == []
    make_unschedulable(queue, clock, "ns/unsched", frozenset({"X"}))
    queue.add([E("ns/backoff", "u", 9)], now_ms=now)
    fail(queue, clock, pop_one(queue, clock), error=True)
    queue.add([E("ns/handed", "u", 9)], now_ms=now)
    handed = pop_one(queue, clock)
    queue.done("ns/handed", epoch=handed.epoch)
    queue.add([E("ns/inflight", "u", 9)], now_ms=now)
    pop_one(queue, clock)
    queue.add([E("ns/active", "u", 0), E("ns/gated", "u", 0, gated=True)], now_ms=now)
    places = ["dead", "unsched", "backoff", "handed", "inflight", "active", "gated"]
    assert {queue.where(f"ns/{p}") for p in places} == {
        "dead",
        "unschedulable",
        "backoff",
        "",
        "inflight",
        "active",
        "gated",
    }
    assert queue.delete([f"ns/{p}" for p in places] + ["ns/unknown"], now_ms=now) == 7
    assert all(n == 0 for n in queue.counts().values())
    assert all(queue.info(f"ns/{p}") is None for p in places)
    assert queue.delete(["ns/active"], now_ms=now) == 0
    assert queue.delete([], now_ms=now) == 0


def test_forget_drops_only_pods_outside_waiting_queues(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    queue.add([E("ns/bound", "u", 1), E("ns/leased", "u", 1)], now_ms=clock.now_ms())
    bound, _ = queue.pop(2, now_ms=clock.now_ms())
    assert queue.done(bound.key, epoch=bound.epoch)
    queue.add([E("ns/waiting", "u", 0)], now_ms=clock.now_ms())
    assert queue.forget(["ns/bound", "ns/leased", "ns/waiting", "ns/unknown"]) == 2
    assert queue.info("ns/bound") is None and queue.info("ns/leased") is None
    assert queue.where("ns/waiting") == "active"
    assert queue.counts()["inflight"] == 0
    assert queue.forget([]) == 0


def test_reads_describe_the_queue(queue: SchedulingQueue, clock: FakeClock) -> None:
    make_unschedulable(queue, clock, "ns/u1", frozenset({"B", "A"}))
    make_unschedulable(queue, clock, "ns/u2", frozenset())
    queue.add([E(f"ns/a{i}", "u", i) for i in range(4)], now_ms=clock.now_ms())
    assert queue.unschedulable_pods() == [("ns/u1", frozenset({"A", "B"})), ("ns/u2", frozenset())]
    info = queue.info("ns/u1")
    assert info is not None and info["pl"] == "A,B"
    heads = queue.heads(2)
    assert heads["active"] == ["ns/a3", "ns/a2"]
    assert heads["unschedulable"] == ["ns/u1", "ns/u2"]
    assert queue.counts()["active"] == 4
    assert queue.where("ns/none") is None and queue.info("ns/none") is None
    with pytest.raises(ValueError):
        queue.add_unschedulable_if_not_present(
            "ns/u1", epoch=1, plugins=["A,B"], now_ms=clock.now_ms()
        )


# --- hand-offs with the cache (reservation, release without binding) -----------------------
def test_assume_takes_only_pods_leased_under_the_epoch_and_uid(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    queue.add([E(f"ns/p{i}", f"uid-{i}", 0) for i in range(4)], now_ms=clock.now_ms())
    p0, p1, p2, p3 = queue.pop(4, now_ms=clock.now_ms())
    leases = [
        (p0.key, p0.epoch, "uid-0"),
        (p1.key, p1.epoch + 1, "uid-1"),  # a newer lease than the pop gave
        (p2.key, p2.epoch, "uid-other"),  # the pod was re-created under another uid
        ("ns/unknown", 1, "u"),
    ]
    assert queue.assume(leases) == [True, False, False, False]
    assert queue.where(p0.key) == "assumed"
    assert queue.counts()["inflight"] == 3
    # Assumed is outside every sub-queue: a second assume, a lease reclaim, a failure
    # from another epoch leave it alone.
    assert queue.assume([(p0.key, p0.epoch, "uid-0")]) == [False]
    assert p0.key not in queue.reclaim_expired_leases(now_ms=clock.now_ms() + 10**9)
    assert fail(queue, clock, p0) == "unschedulable"  # its own epoch: the failure handler
    del p3
    assert queue.assume([]) == []


def test_released_assumed_pods_requeue_with_their_backoff(make_queue: QueueFactory) -> None:
    clock = FakeClock()
    queue = make_queue(config=QueueConfig(initial_backoff_ms=400, max_backoff_ms=1000))
    queue.add([E("ns/once", "u", 3), E("ns/thrice", "u", 2)], now_ms=clock.now_ms())
    once = pop_one(queue, clock)
    thrice = pop_one(queue, clock)
    for _ in range(2):  # two earlier failed attempts
        assert fail(queue, clock, thrice, error=True) == "backoff"
        clock.step(2_000)
        queue.flush_backoff_completed(now_ms=clock.now_ms())
        thrice = pop_one(queue, clock)
    assert queue.assume([(once.key, once.epoch, "u"), (thrice.key, thrice.epoch, "u")]) == [
        True,
        True,
    ]
    clock.step(5)
    now = clock.now_ms()
    where = queue.requeue_released([once.key, thrice.key, "ns/unknown"], now_ms=now)
    assert where == ["backoff", "backoff", ""]
    assert queue.info(once.key)["bo"] == now + 400  # type: ignore[index]
    assert queue.info(thrice.key)["bo"] == now + 1000  # type: ignore[index]  # capped
    assert queue.info(thrice.key)["ts"] == now  # type: ignore[index]
    # Deliveries stay counted (a pod that keeps killing binders gets dead-lettered).
    assert queue.info(thrice.key)["d"] == 1  # type: ignore[index]
    assert queue.requeue_released([once.key], now_ms=now) == [""]  # no longer assumed
    clock.step(400)
    assert queue.flush_backoff_completed(now_ms=clock.now_ms()) == 1
    assert pop_keys(queue, clock) == [once.key]


def test_a_released_pod_backs_off_as_after_an_error(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    # Rejected by a plugin once, then reserved and released without a binding: that
    # requeue is an error (kube clears the rejector plugins), so no pop takes it from
    # backoffQ before its backoff ends.
    queue.add([E("ns/a", "u", 0)], now_ms=clock.now_ms())
    assert fail(queue, clock, pop_one(queue, clock), error=False) == "unschedulable"
    queue.move_all_to_active_or_backoff(
        "NodeAdd", now_ms=clock.now_ms() + 1_000, interested_plugins=None
    )
    pod = pop_one(queue, clock)
    assert queue.assume([(pod.key, pod.epoch, "u")]) == [True]
    assert queue.requeue_released([pod.key], now_ms=clock.now_ms()) == ["backoff"]
    assert queue.info(pod.key)["pl"] == ""  # type: ignore[index]
    only_the_flush_brings(queue, clock, "ns/a", after_ms=2_000)


def test_released_pod_without_backoff_goes_straight_to_active(make_queue: QueueFactory) -> None:
    clock = FakeClock()
    queue = make_queue(config=QueueConfig(initial_backoff_ms=0, max_backoff_ms=0))
    queue.add([E("ns/a", "u", 0)], now_ms=clock.now_ms())
    pod = pop_one(queue, clock)
    assert queue.assume([(pod.key, pod.epoch, "u")]) == [True]
    assert queue.requeue_released([pod.key], now_ms=clock.now_ms()) == ["active"]
    assert pop_keys(queue, clock) == [pod.key]


# --- gangs (GangScheduling's PreEnqueue and a whole-gang pop) ------------------------------
def gang(n: int, group: str = "ns/train", *, priority: int = 0) -> list[E]:
    return [E(f"ns/train-{i}", f"uid-{i}", priority, group=group) for i in range(n)]


def test_gang_members_are_held_until_the_group_has_its_minimum(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    queue.add(gang(2), now_ms=clock.now_ms())
    assert queue.counts()["gated"] == 2  # no PodGroup yet
    assert queue.set_gang_minimums({"ns/train": 3}) == 0  # 2 of 3 members
    assert pop_keys(queue, clock) == []
    queue.add([E("ns/train-2", "uid-2", 0, group="ns/train")], now_ms=clock.now_ms())
    assert queue.counts()["gated"] == 0
    assert sorted(pop_keys(queue, clock, 1)) == ["ns/train-0", "ns/train-1", "ns/train-2"]
    assert queue.gang_members("ns/train") == ["ns/train-0", "ns/train-1", "ns/train-2"]


def test_a_podgroup_that_arrives_last_releases_its_members(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    queue.add(gang(3), now_ms=clock.now_ms())
    assert queue.set_gang_minimums({"ns/train": 3}) == 3
    assert queue.where("ns/train-0") == "active"
    assert queue.gang_minimums() == {"ns/train": 3}


def test_a_member_with_scheduling_gates_stays_gated_when_the_gang_is_complete(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    queue.set_gang_minimums({"ns/train": 2})
    queue.add([E("ns/train-0", "u0", 0, gated=True, group="ns/train")], now_ms=clock.now_ms())
    queue.add([E("ns/train-1", "u1", 0, group="ns/train")], now_ms=clock.now_ms())
    assert queue.where("ns/train-0") == "gated"
    assert queue.where("ns/train-1") == "active"
    # Its gates removed, it joins the complete gang.
    assert queue.update(E("ns/train-0", "u0", 0, group="ns/train"), now_ms=clock.now_ms()) == (
        "active"
    )


def test_an_update_does_not_release_a_member_of_an_incomplete_gang(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    queue.set_gang_minimums({"ns/train": 3})
    queue.add(gang(2), now_ms=clock.now_ms())
    assert queue.update(gang(1)[0], now_ms=clock.now_ms()) == "gated"
    assert queue.counts()["gated"] == 2


def test_a_deleted_member_leaves_its_gang(queue: SchedulingQueue, clock: FakeClock) -> None:
    queue.set_gang_minimums({"ns/train": 3})
    queue.add(gang(2), now_ms=clock.now_ms())
    queue.delete(["ns/train-1"], now_ms=clock.now_ms(), uids=["uid-1"])
    assert queue.gang_members("ns/train") == ["ns/train-0"]
    queue.add(gang(3)[1:], now_ms=clock.now_ms())
    assert queue.counts()["gated"] == 0


def test_a_pop_takes_the_whole_gang_from_every_waiting_sub_queue(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    queue.set_gang_minimums({"ns/train": 3})
    queue.add([E("ns/other", "uo", 0)], now_ms=clock.now_ms())
    clock.step(1)
    queue.add(gang(3), now_ms=clock.now_ms())
    first = queue.pop(2, now_ms=clock.now_ms())
    assert [p.key for p in first] == ["ns/other", "ns/train-0", "ns/train-1", "ns/train-2"]
    # The gang fails as a unit; one member becomes active again by an event, its
    # siblings wait in backoffQ and the unschedulable set: one pop takes them all.
    by_key = {p.key: p for p in first}
    assert fail(queue, clock, by_key["ns/train-0"], error=True) == "backoff"
    assert fail(queue, clock, by_key["ns/train-1"]) == "unschedulable"
    assert fail(queue, clock, by_key["ns/train-2"]) == "unschedulable"
    clock.step(2_000)  # past train-2's backoff, not flushed: train-0 stays in backoffQ
    queue.move_all_to_active_or_backoff(
        "NodeAdd", now_ms=clock.now_ms(), interested_plugins=None, keys=["ns/train-2"]
    )
    assert queue.where("ns/train-2") == "active"
    again = queue.pop(1, now_ms=clock.now_ms())
    assert sorted(p.key for p in again) == ["ns/train-0", "ns/train-1", "ns/train-2"]
    assert len({p.epoch for p in again}) == 3
    assert queue.counts()["inflight"] == 4


def test_a_gang_member_popped_from_backoffQ_brings_its_siblings(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    queue.set_gang_minimums({"ns/train": 2})
    queue.add(gang(2), now_ms=clock.now_ms())
    first = queue.pop(1, now_ms=clock.now_ms())
    assert [p.key for p in first] == ["ns/train-0", "ns/train-1"]
    assert fail(queue, clock, first[0]) == "unschedulable"
    assert fail(queue, clock, first[1], error=True) == "backoff"
    queue.move_all_to_active_or_backoff(
        "NodeAdd", now_ms=clock.now_ms(), interested_plugins=None, keys=["ns/train-0"]
    )
    assert queue.where("ns/train-0") == "backoff"
    # activeQ is empty: train-0 comes from backoffQ (a plugin rejected it), and with it
    # its sibling, though that one backs off after an error.
    again = queue.pop(1, now_ms=clock.now_ms())
    assert [p.key for p in again] == ["ns/train-0", "ns/train-1"]


def test_placed_and_gated_siblings_stay_where_they_are(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    queue.set_gang_minimums({"ns/train": 2})
    queue.add(gang(2), now_ms=clock.now_ms())
    (a, b) = queue.pop(10, now_ms=clock.now_ms())
    assert queue.done(a.key, epoch=a.epoch)  # bound: forgotten
    queue.forget([a.key])
    queue.add([E("ns/train-9", "u9", 0, gated=True, group="ns/train")], now_ms=clock.now_ms())
    assert fail(queue, clock, b, error=True) == "backoff"
    clock.step(10_000)
    queue.flush_backoff_completed(now_ms=clock.now_ms())
    assert [p.key for p in queue.pop(10, now_ms=clock.now_ms())] == [b.key]
    assert queue.where("ns/train-9") == "gated"
