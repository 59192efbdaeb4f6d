"""Invariant checks shared by the queue tests."""

from __future__ import annotations

from distsched.queue_types import SchedulingQueue, queue_invariant_violations


def assert_every_pod_in_one_place(queue: SchedulingQueue) -> None:
    """Every known pod is in exactly one sub-queue (or handed off), with consistent scores."""
    problems = queue_invariant_violations(queue.dump())
    assert not problems, "\n".join(problems)
