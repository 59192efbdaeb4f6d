"""Contract: each queue counts the pods its own moves put into a sub-queue
(queue_incoming_pods_total{queue, event}), with the event labels of framework/events.py,
on the memory twin and on Redis alike."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from distsched import metrics
from distsched.clock import FakeClock
from distsched.framework import events
from distsched.queue_types import PodEntry as E
from distsched.queue_types import QueueConfig, QueuedPod, SchedulingQueue
from tests.queue.conftest import QueueFactory

Counts = dict[tuple[str, str], float]


def incoming() -> Counts:
    counts: Counts = {}
    for family in metrics.REGISTRY.collect():
        if family.name != "distsched_queue_incoming_pods":
            continue
        for sample in family.samples:
            if sample.name.endswith("_total"):
                labels = sample.labels
                counts[(labels["queue"], labels["event"])] = sample.value
    return counts


@contextmanager
def counted() -> Iterator[Callable[[], Counts]]:
    """What the block added to queue_incoming_pods_total, by (queue, event), zeros left out."""
    before = incoming()

    def delta() -> Counts:
        after = incoming()
        diff = {key: value - before.get(key, 0.0) for key, value in after.items()}
        return {key: value for key, value in diff.items() if value}

    yield delta


def moved(event: str, **queues: int) -> Counts:
    """The expected counts of one event: sub-queue -> pods."""
    return {(queue, event): pods for queue, pods in queues.items()}


def popped(queue: SchedulingQueue, clock: FakeClock, n: int = 10) -> list[QueuedPod]:
    return queue.pop(n, now_ms=clock.now_ms())


def fail(queue: SchedulingQueue, clock: FakeClock, pod: QueuedPod, *, error: bool = False) -> str:
    return queue.add_unschedulable_if_not_present(
        pod.key, epoch=pod.epoch, plugins=["NodeResourcesFit"], now_ms=clock.now_ms(), error=error
    )


def test_adds_count_active_and_gated_apart(queue: SchedulingQueue, clock: FakeClock) -> None:
    with counted() as delta:
        added = queue.add(
            [E("ns/a", "u", 0), E("ns/g", "u", 0, gated=True), E("ns/b", "u", 0)],
            now_ms=clock.now_ms(),
        )
        queue.add([E("ns/a", "u", 0)], now_ms=clock.now_ms())  # known: no move
    assert added == 3
    assert delta() == moved("PodAdd", active=2, gated=1)


def test_updates_count_only_the_pods_they_move(queue: SchedulingQueue, clock: FakeClock) -> None:
    now = clock.now_ms()
    queue.add([E("ns/parked", "u", 0), E("ns/failed", "u", 0)], now_ms=now)
    parked, failed = popped(queue, clock)
    assert fail(queue, clock, parked) == "unschedulable"
    assert fail(queue, clock, failed, error=True) == "backoff"
    queue.add([E("ns/active", "u", 0), E("ns/gated", "u", 0, gated=True)], now_ms=now)
    with counted() as delta:
        assert queue.update(E("ns/active", "u", 0), now_ms=now) == "active"  # stays
        assert queue.update(E("ns/gated", "u", 0), now_ms=now) == "active"  # gates gone
        assert queue.update(E("ns/parked", "u", 5), now_ms=now) == "backoff"
        assert queue.update(E("ns/failed", "u", 5), now_ms=now) == "backoff"  # stays
        assert queue.update(E("ns/new", "u", 0, gated=True), now_ms=now) == "gated"
    assert delta() == moved("PodUpdate", active=1, backoff=1, gated=1)


def test_failures_count_where_the_pod_went_and_stale_ones_not(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    queue.add([E("ns/a", "u", 0), E("ns/b", "u", 0)], now_ms=clock.now_ms())
    a, b = popped(queue, clock)
    with counted() as delta:
        assert fail(queue, clock, a) == "unschedulable"
        assert fail(queue, clock, b, error=True) == "backoff"
        assert fail(queue, clock, a) == "present"
        newer = b.epoch + 100  # the failure of a lease the pod no longer holds
        stale = queue.add_unschedulable_if_not_present(
            b.key, epoch=newer, plugins=[], now_ms=clock.now_ms()
        )
        assert stale == "stale"
    assert delta() == moved("ScheduleAttemptFailure", unschedulable=1, backoff=1)


def test_flushes_and_move_requests_count_their_moves(
    make_queue: QueueFactory, clock: FakeClock
) -> None:
    queue = make_queue(config=QueueConfig(unschedulable_max_ms=60_000))
    queue.add([E(f"ns/p{i}", "u", 0) for i in range(4)], now_ms=clock.now_ms())
    pods = popped(queue, clock)
    assert fail(queue, clock, pods[0], error=True) == "backoff"
    for pod in pods[1:]:
        assert fail(queue, clock, pod) == "unschedulable"
    clock.step(1_001)
    with counted() as delta:
        assert queue.flush_backoff_completed(now_ms=clock.now_ms()) == 1
        by_event = queue.move_all_to_active_or_backoff(
            events.NODE_ADD.label,
            now_ms=clock.now_ms(),
            interested_plugins=None,
            keys=["ns/p1"],
        )
        assert by_event == 1
        clock.step(60_001)
        assert queue.flush_unschedulable_leftover(now_ms=clock.now_ms()) == 2
    assert delta() == {
        **moved("BackoffComplete", active=1),
        **moved("NodeAdd", active_or_backoff=1),
        **moved("UnschedulableTimeout", active_or_backoff=2),
    }


def test_expired_leases_and_hand_backs_count_as_returns_to_active(
    make_queue: QueueFactory, clock: FakeClock
) -> None:
    queue = make_queue(config=QueueConfig(lease_ms=1_000))
    queue.add([E("ns/a", "u", 0), E("ns/b", "u", 0), E("ns/c", "u", 0)], now_ms=clock.now_ms())
    a, b, c = popped(queue, clock)
    with counted() as delta:
        assert queue.hand_back([(a.key, a.epoch), ("ns/none", 1)]) == ["active", ""]
        clock.step(1_001)
        assert sorted(queue.reclaim_expired_leases(now_ms=clock.now_ms())) == [b.key, c.key]
    assert delta() == {**moved("Unattempted", active=1), **moved("LeaseExpired", active=2)}


def test_pops_from_backoff_count_as_entries_to_active(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    queue.add([E("ns/a-rejected", "u", 0), E("ns/b-failed", "u", 0)], now_ms=clock.now_ms())
    rejected, failed = popped(queue, clock)
    assert fail(queue, clock, rejected) == "unschedulable"
    assert fail(queue, clock, failed, error=True) == "backoff"
    queue.move_all_to_active_or_backoff("NodeAdd", now_ms=clock.now_ms(), interested_plugins=None)
    queue.add([E("ns/new", "u", 0)], now_ms=clock.now_ms())
    with counted() as delta:
        assert [pod.key for pod in popped(queue, clock)] == ["ns/new", "ns/a-rejected"]
    assert delta() == moved(events.POP_FROM_BACKOFF, active=1)
