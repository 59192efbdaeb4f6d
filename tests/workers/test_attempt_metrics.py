"""The worker's per-attempt metrics count every pod once, although their series are bound
once and the scheduled counter is updated once per batch (issue 14)."""

from __future__ import annotations

import redis

from distsched import metrics
from distsched.clock import FakeClock
from distsched.keys import Keys
from tests.support.objects import node, pod
from tests.workers.harness import InProcessCluster

PROFILE = "default-scheduler"


def sample(name: str, **labels: str) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


def test_each_attempt_is_counted_and_timed_once(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    scheduled = {"result": "scheduled", "profile": PROFILE}
    unschedulable = {"result": "unschedulable", "profile": PROFILE}
    before = (
        sample("distsched_schedule_attempts_total", **scheduled),
        sample("distsched_scheduling_attempt_duration_seconds_count", **scheduled),
        sample("distsched_schedule_attempts_total", **unschedulable),
        sample("distsched_scheduling_attempt_duration_seconds_count", **unschedulable),
        sample(
            "distsched_queue_incoming_pods_total",
            queue="unschedulable",
            event="ScheduleAttemptFailure",
        ),
    )
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(
        node("n1", cpu="1"), *(pod(f"p{i}", cpu="200m") for i in range(4)), pod("huge", cpu="64")
    )
    cluster.handle_events()
    cluster.turn()
    after = (
        sample("distsched_schedule_attempts_total", **scheduled),
        sample("distsched_scheduling_attempt_duration_seconds_count", **scheduled),
        sample("distsched_schedule_attempts_total", **unschedulable),
        sample("distsched_scheduling_attempt_duration_seconds_count", **unschedulable),
        sample(
            "distsched_queue_incoming_pods_total",
            queue="unschedulable",
            event="ScheduleAttemptFailure",
        ),
    )
    assert [a - b for a, b in zip(after, before, strict=True)] == [4, 4, 1, 1, 1]
