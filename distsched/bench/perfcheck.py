"""Throughput check of one scheduling worker's hot loop (no Redis, no binding).

Builds a snapshot of ``--nodes`` labelled nodes (a few percent tainted), then schedules
``--pods`` SchedulingBasic-shaped pods (cpu/memory requests only) with the default
profile, adding each placed pod to the snapshot as the worker does when it assumes one.
``--batched`` schedules with the profile's signature cache (``framework/batching.py``,
as the worker does); ``--compare`` runs both, alternating, and checks they place every
pod on the same node.

    python -m distsched.bench.perfcheck [--nodes 5000] [--pods 2000] [--batched | --compare]
                                        [--profile]
"""

from __future__ import annotations

import argparse
import random
import time
from dataclasses import dataclass

from distsched.framework.batching import batch_scheduler
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


@dataclass(frozen=True, slots=True)
class Timing:
    pods: int
    wall_s: float
    cpu_s: float  # the whole loop: scheduling and assuming
    schedule_cpu_s: float  # the scheduling calls alone
    placements: tuple[str, ...]
    batched: int  # pods decided on cached answers (batched runs)

    @property
    def schedule_us_per_pod(self) -> float:
        return self.schedule_cpu_s / self.pods * 1e6


def run(num_nodes: int, num_pods: int, *, seed: int = 1, batched: bool = False) -> Timing:
    """Schedule ``num_pods`` pods on a fresh snapshot; CPU time of the loop and of the
    scheduling calls (``schedule_pod`` or the batching scheduler) alone."""
    rng = random.Random(seed)
    snapshot = Snapshot(capacity=num_nodes)
    for node in make_nodes(num_nodes, rng):
        snapshot.add_node(node)
    framework = build_profiles(default_config(), rng=random.Random(seed))["default-scheduler"]
    scheduler = batch_scheduler(framework)
    pods = [make_pod(i) for i in range(num_pods)]
    placements: list[str] = []
    clock = time.process_time
    in_schedule = 0.0
    start = time.perf_counter()
    cpu_start = clock()
    for pod in pods:
        state = CycleState()
        before = clock()
        if batched:
            result = scheduler.schedule(state, pod, snapshot)
        else:
            result = schedule_pod(framework, state, pod, snapshot)
        in_schedule += clock() - before
        snapshot.add_pod(pod, result.suggested_host, info=state.get(POD_INFO_STATE_KEY))
        placements.append(result.suggested_host)
    elapsed = time.perf_counter() - start
    cpu = clock() - cpu_start
    return Timing(num_pods, elapsed, cpu, in_schedule, tuple(placements), scheduler.batched)


def _line(label: str, t: Timing) -> str:
    return (
        f"{label}: {t.pods} pods: {t.pods / t.wall_s:,.0f} pods/s "
        f"({t.pods / t.cpu_s:,.0f} pods per CPU-second), "
        f"schedule {t.schedule_us_per_pod:.1f} us CPU per pod"
        + (f", {t.batched} batched" if t.batched else "")
    )


def compare(num_nodes: int, num_pods: int, rounds: int) -> None:
    """Alternate schedule_pod and batched runs; print each and the per-pod ratio."""
    full: list[float] = []
    batched: list[float] = []
    for i in range(rounds):
        a = run(num_nodes, num_pods)
        b = run(num_nodes, num_pods, batched=True)
        if a.placements != b.placements:
            raise SystemExit("batched placements differ from schedule_pod's")
        print(_line(f"round {i + 1} schedule_pod", a))
        print(_line(f"round {i + 1} batched     ", b))
        full.append(a.schedule_us_per_pod)
        batched.append(b.schedule_us_per_pod)
    print(
        f"schedule CPU per pod on {num_nodes} nodes: schedule_pod "
        f"{min(full):.1f}-{max(full):.1f} us, batched {min(batched):.1f}-{max(batched):.1f} us, "
        f"{sum(full) / sum(batched):.1f}x lower (same placements)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=2000)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--batched", action="store_true", help="use the signature cache")
    mode.add_argument(
        "--compare", type=int, nargs="?", const=3, metavar="ROUNDS", help="alternate both"
    )
    parser.add_argument("--profile", action="store_true", help="profile with pyinstrument")
    args = parser.parse_args()
    if args.compare:
        compare(args.nodes, args.pods, args.compare)
        return
    if args.profile:
        from pyinstrument import Profiler

        profiler = Profiler()
        profiler.start()
        timing = run(args.nodes, args.pods, batched=args.batched)
        profiler.stop()
        print(profiler.output_text(unicode=True, color=False))
    else:
        timing = run(args.nodes, args.pods, batched=args.batched)
    print(_line(f"{args.nodes} nodes", timing))


if __name__ == "__main__":
    main()
