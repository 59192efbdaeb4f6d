"""Moves per event and attempts per pod, with and without QueueingHints, in process.

A short, deterministic stand-in for scheduler_perf's Unschedulable and MixedChurn
workloads on the in-process harness (real Redis, FakeClock, the real worker and binder),
so the count of queue moves is exact and does not depend on a shared machine's speed:

    DISTSCHED_TEST_REDIS_URL=redis://127.0.0.1:6379/11 python -m tests.workers.moves

Unschedulable: 200 9-cpu pods that fit nowhere, then plain pods flow. MixedChurn: each
step deletes a bound pod, adds a node, deletes the node added two steps ago and adds a
9-cpu pod, while plain pods flow; ``+affinity`` also parks 50 pods whose required pod
affinity nothing satisfies (the pods a move storm sends round for nothing).
PodChurn+affinity: each step only deletes a bound pod (no node changes), with the 50
affinity pods parked.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import redis

from distsched.clock import FakeClock
from distsched.keys import Keys
from tests.support.objects import HOSTNAME, node, pod
from tests.workers.harness import InProcessCluster


class Counting:
    """Wraps the worker's queue: move requests, pods moved, pods popped (attempts)."""

    def __init__(self, cluster: InProcessCluster) -> None:
        self.requests = self.moved = self.popped = 0
        queue = cluster.queue
        move, pop = queue.move_all_to_active_or_backoff, queue.pop

        def counting_move(event: str, **kwargs: Any) -> int:
            n = move(event, **kwargs)
            self.requests += 1
            self.moved += n
            return n

        def counting_pop(n: int, **kwargs: Any) -> list[Any]:
            popped = pop(n, **kwargs)
            self.popped += len(popped)
            return popped

        queue.move_all_to_active_or_backoff = counting_move  # type: ignore[method-assign]
        queue.pop = counting_pop  # type: ignore[method-assign]


def affinity_pod(name: str) -> dict[str, Any]:
    obj = pod(name)
    term = {"labelSelector": {"matchLabels": {"app": "absent"}}, "topologyKey": HOSTNAME}
    obj["spec"]["affinity"] = {
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    }
    return obj


def run(workload: str, hints: bool, r: redis.Redis, steps: int) -> dict[str, float]:
    r.flushdb()
    clock = FakeClock()
    cluster = InProcessCluster(r, Keys("moves"), clock, queueing_hints=hints)
    cluster.create(*(node(f"n{i}", cpu="4") for i in range(20)))
    cluster.create(
        *(pod(f"big-{i}", cpu="9") for i in range(200 if workload == "Unschedulable" else 20))
    )
    if workload.endswith("+affinity"):
        cluster.create(*(affinity_pod(f"aff-{i}") for i in range(50)))
    cluster.create(*(pod(f"init-{i}", cpu="100m", nodeName=f"n{i % 20}") for i in range(100)))
    cluster.settle(40)
    counting = Counting(cluster)
    events = 0
    for step in range(steps):
        # Each operation is handled (and its moved pods retried) before the next one.
        cluster.create(*(pod(f"p-{step}-{j}", cpu="100m") for j in range(10)))
        events += 10  # ten pods that will be bound: AssignedPodAdd each
        cluster.settle(40)
        if workload.startswith("PodChurn"):
            cluster.store.delete("Pod", f"default/init-{step}")
            cluster.settle(40)
            events += 1
        if workload.startswith("MixedChurn"):
            cluster.store.delete("Pod", f"default/init-{step}")
            cluster.settle(40)
            cluster.create(node(f"churn-{step}", cpu="4"), pod(f"churn-{step}", cpu="9"))
            cluster.settle(40)
            events += 2
            if step >= 2:
                cluster.store.delete("Node", f"churn-{step - 2}")
                cluster.settle(40)
                events += 1
        clock.step(1_100)  # past every backoff
        cluster.flush()
        cluster.settle(40)
    cluster.settle(40)
    plain = 10 * steps  # attempts of every pod, per measured (plain) pod bound
    return {
        "move_requests": counting.requests,
        "moved_per_event": round(counting.moved / events, 3),
        "attempts_per_pod": round(counting.popped / plain, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    url = os.environ.get("DISTSCHED_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
    r = redis.Redis.from_url(url)
    for workload in ("Unschedulable", "MixedChurn", "MixedChurn+affinity", "PodChurn+affinity"):
        for hints in (False, True):
            print(workload, "hints" if hints else "seed ", run(workload, hints, r, args.steps))
    r.flushdb()


if __name__ == "__main__":
    main()
