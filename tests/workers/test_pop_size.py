"""The worker's pop size follows the last batch's pace (WorkerConfig.batch_budget_s)."""

from __future__ import annotations

import pytest
import redis

from distsched.clock import FakeClock
from distsched.keys import Keys
from distsched.queue_types import QueuedPod
from distsched.workers import schedule_one
from distsched.workers.schedule_one import WorkerConfig, next_pop_size
from tests.support.objects import node, pod
from tests.workers.harness import InProcessCluster

CONFIG = WorkerConfig(batch=256, batch_budget_s=0.25)


def test_fast_full_batches_keep_the_configured_size() -> None:
    assert next_pop_size(CONFIG, popped=256, current=256, elapsed_s=0.03) == 256


def test_a_slow_batch_shrinks_the_next_pop_to_the_budget() -> None:
    # 256 preemptions at 60 ms each: about four fit in 250 ms.
    assert next_pop_size(CONFIG, popped=256, current=256, elapsed_s=256 * 0.06) == 4
    # Slower than the whole budget for one pod: still one at a time, never zero.
    assert next_pop_size(CONFIG, popped=3, current=3, elapsed_s=1.5) == 1


def test_the_size_grows_back_at_most_twofold_per_batch() -> None:
    sizes = [1]
    while sizes[-1] < 256:
        sizes.append(next_pop_size(CONFIG, popped=sizes[-1], current=sizes[-1], elapsed_s=1e-4))
    assert sizes == [1, 2, 4, 8, 16, 32, 64, 128, 256]


def test_a_short_queue_says_nothing_about_the_pace() -> None:
    # Two pods popped of four asked for, quickly: the size stays.
    assert next_pop_size(CONFIG, popped=2, current=4, elapsed_s=0.001) == 4
    # ... but a short batch that was slow still shrinks it.
    assert next_pop_size(CONFIG, popped=2, current=64, elapsed_s=0.5) == 1


def test_the_worker_pops_fewer_pods_after_a_slow_batch(
    r: redis.Redis, keys: Keys, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In process: a batch of 8 that took 1 s (the worker's wall clock, faked) makes the
    next pop take 2 pods (250 ms at 125 ms a pod)."""
    cluster = InProcessCluster(r, keys, clock, batch=8)
    cluster.create(node("big", cpu="64", pods="110"))
    cluster.create(*(pod(f"p{i}", cpu="100m") for i in range(20)))
    cluster.handle_events()
    now = [100.0]
    monkeypatch.setattr(schedule_one.time, "monotonic", lambda: now[0])
    decide = cluster.worker.schedule_one_batch

    def slow_batch(popped: list[QueuedPod]) -> None:
        decide(popped)
        now[0] += 1.0

    monkeypatch.setattr(cluster.worker, "schedule_one_batch", slow_batch)
    assert cluster.turn() == 8
    assert cluster.worker.pop_size == 2
    assert cluster.turn() == 2


def test_a_short_pop_holds_the_next_turn_for_the_pop_linger(
    r: redis.Redis, keys: Keys, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With pop_linger_s, a turn whose pop emptied the queue waits until that long after
    it began (pods arriving meanwhile are decided together); a full pop goes on at once."""
    cluster = InProcessCluster(r, keys, clock, batch=8)
    worker = cluster.worker
    worker.config.pop_linger_s = 0.05
    waits: list[float] = []
    worker.sleep = waits.append
    now = [100.0]
    monkeypatch.setattr(schedule_one.time, "monotonic", lambda: now[0])
    decide = worker.schedule_one_batch

    def batch_of_10ms(popped: list[QueuedPod]) -> None:
        decide(popped)
        now[0] += 0.01

    monkeypatch.setattr(worker, "schedule_one_batch", batch_of_10ms)
    cluster.create(node("big", cpu="64", pods="110"))
    cluster.create(*(pod(f"p{i}", cpu="100m") for i in range(11)))
    cluster.handle_events()
    assert cluster.turn() == 8  # a full pop: no wait
    assert waits == []
    assert cluster.turn() == 3  # the queue's last three: wait out the linger
    assert waits == [pytest.approx(0.04)]
    assert cluster.turn() == 0  # nothing popped: the idle wait, not the linger
    assert waits == [pytest.approx(0.04)]
