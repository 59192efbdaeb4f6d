"""Throughput check of one scheduling worker's hot loop (no Redis, no binding).

Builds a snapshot of ``--nodes`` labelled nodes (a few percent tainted), then schedules
``--pods`` SchedulingBasic-shaped pods (cpu/memory requests only) with the default
profile, adding each placed pod to the snapshot as the worker does when it assumes one.

    python -m distsched.bench.perfcheck [--nodes 5000] [--pods 2000] [--profile]
"""

from __future__ import annotations

import argparse
import random
import time

from distsched.framework.cycle_state import CycleState
from distsched.framework.podinfo import POD_INFO_STATE_KEY
from distsched.framework.profile import build_profiles, default_config
from distsched.framework.schedule import schedule_pod
from distsched.framework.snapshot import Snapshot
from distsched.model.objects import (
    Container,
    Node,
    NodeSpec,
    NodeStatus,
    ObjectMeta,
    Pod,
    PodSpec,
    ResourceRequirements,
    Taint,
)

GI = 1024**3
MI = 1024**2


def make_nodes(count: int, rng: random.Random) -> list[Node]:
    nodes = []
    for i in range(count):
        taints: tuple[Taint, ...] = ()
        roll = rng.random()
        if roll < 0.02:
            taints = (Taint("dedicated", "NoSchedule", "gpu"),)
        elif roll < 0.05:
            taints = (Taint("spot", "PreferNoSchedule", "true"),)
        labels = {
            "kubernetes.io/hostname": f"node-{i}",
            "topology.kubernetes.io/zone": f"zone-{i % 3}",
            "topology.kubernetes.io/rack": f"rack-{i % 50}",
            "node.kubernetes.io/instance-type": rng.choice(["m5.xlarge", "m5.2xlarge"]),
        }
        nodes.append(
            Node(
                ObjectMeta(name=f"node-{i}", namespace="", labels=labels),
                NodeSpec(taints=taints),
                NodeStatus(allocatable={"cpu": 32_000, "memory": 128 * GI, "pods": 110}),
            )
        )
    return nodes


def make_pod(i: int) -> Pod:
    requests = {"cpu": 100, "memory": 500 * MI}
    container = Container("c", image="registry.k8s.io/pause:3.10")
    container = Container(container.name, container.image, ResourceRequirements(requests=requests))
    return Pod(ObjectMeta(name=f"pod-{i}", uid=f"uid-{i}"), PodSpec(containers=(container,)))


def run(num_nodes: int, num_pods: int, *, seed: int = 1) -> tuple[float, float]:
    """Schedule ``num_pods`` pods; returns pods per second of wall time and of CPU time."""
    rng = random.Random(seed)
    snapshot = Snapshot(capacity=num_nodes)
    for node in make_nodes(num_nodes, rng):
        snapshot.add_node(node)
    framework = build_profiles(default_config(), rng=random.Random(seed))["default-scheduler"]
    pods = [make_pod(i) for i in range(num_pods)]
    start = time.perf_counter()
    cpu_start = time.process_time()
    for pod in pods:
        state = CycleState()
        result = schedule_pod(framework, state, pod, snapshot)
        snapshot.add_pod(pod, result.suggested_host, info=state.get(POD_INFO_STATE_KEY))
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    return num_pods / elapsed, num_pods / cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--profile", action="store_true", help="profile with pyinstrument")
    args = parser.parse_args()
    if args.profile:
        from pyinstrument import Profiler

        profiler = Profiler()
        profiler.start()
        wall, cpu = run(args.nodes, args.pods)
        profiler.stop()
        print(profiler.output_text(unicode=True, color=False))
    else:
        wall, cpu = run(args.nodes, args.pods)
    print(
        f"{args.pods} pods on {args.nodes} nodes: {wall:,.0f} pods/s "
        f"({cpu:,.0f} pods per CPU-second)"
    )


if __name__ == "__main__":
    main()
