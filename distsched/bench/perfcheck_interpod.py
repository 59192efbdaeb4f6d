"""Throughput of the default profile on inter-pod workloads (one process, no Redis).

Shapes from kube's scheduler_perf: ``anti-affinity`` (SchedulingPodAntiAffinity: pods
labelled color=green with a required anti-affinity to color=green on
kubernetes.io/hostname, namespaces sched-0/sched-1), ``spread`` (TopologySpreading:
DoNotSchedule maxSkew 1 over topology.kubernetes.io/zone), ``spread-soft`` (the same as
ScheduleAnyway) and ``affinity`` (SchedulingPodAffinity: required affinity to
color=blue pods in the same zone). ``--init-pods`` pods are scheduled first (not
measured), then ``--pods`` are timed; each placed pod is added to the snapshot as the
worker does when it assumes one.

    python -m distsched.bench.perfcheck_interpod --workload anti-affinity [--nodes 5000]
        [--init-pods 1000] [--pods 1000] [--profile]
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable

from distsched.bench.perfcheck import make_nodes
from distsched.framework.cycle_state import CycleState
from distsched.framework.diagnosis import FitError
from distsched.framework.podinfo import POD_INFO_STATE_KEY
from distsched.framework.profile import build_profiles, default_config
from distsched.framework.runtime import Framework
from distsched.framework.schedule import schedule_pod
from distsched.framework.snapshot import Snapshot
from distsched.model.objects import (
    LABEL_HOSTNAME,
    Affinity,
    Container,
    LabelSelector,
    ObjectMeta,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    PodSpec,
    ResourceRequirements,
    TopologySpreadConstraint,
)

MI = 1024**2
ZONE = "topology.kubernetes.io/zone"


def _spec(**kwargs: object) -> PodSpec:
    requests = {"cpu": 100, "memory": 500 * MI}
    container = Container(
        "pause", "registry.k8s.io/pause:3.10", ResourceRequirements(requests=requests)
    )
    return PodSpec(containers=(container,), **kwargs)  # type: ignore[arg-type]


def plain_pod(i: int, namespace: str = "default") -> Pod:
    return Pod(ObjectMeta(f"pod-{i}", namespace, f"uid-{namespace}-{i}"), _spec())


def anti_affinity_pod(i: int, namespace: str) -> Pod:
    term = PodAffinityTerm(
        LABEL_HOSTNAME, LabelSelector({"color": "green"}), namespaces=("sched-1", "sched-0")
    )
    affinity = Affinity(pod_anti_affinity=PodAffinity(required=(term,)))
    labels = {"color": "green", "name": "test"}
    meta = ObjectMeta(f"anti-{i}", namespace, f"uid-{namespace}-{i}", labels)
    return Pod(meta, _spec(affinity=affinity))


def affinity_pod(i: int, namespace: str) -> Pod:
    term = PodAffinityTerm(
        ZONE, LabelSelector({"color": "blue"}), namespaces=("sched-1", "sched-0")
    )
    affinity = Affinity(pod_affinity=PodAffinity(required=(term,)))
    labels = {"color": "blue", "name": "test"}
    meta = ObjectMeta(f"aff-{i}", namespace, f"uid-{namespace}-{i}", labels)
    return Pod(meta, _spec(affinity=affinity))


def spread_pod(i: int, namespace: str, *, soft: bool = False) -> Pod:
    constraint = TopologySpreadConstraint(
        max_skew=1,
        topology_key=ZONE,
        when_unsatisfiable="ScheduleAnyway" if soft else "DoNotSchedule",
        label_selector=LabelSelector({"color": "blue"}),
    )
    meta = ObjectMeta(f"spread-{i}", namespace, f"uid-{namespace}-{i}", {"color": "blue"})
    return Pod(meta, _spec(topology_spread_constraints=(constraint,)))


# workload -> (init pod factory, measured pod factory)
WORKLOADS: dict[str, tuple[Callable[[int], Pod], Callable[[int], Pod]]] = {
    "anti-affinity": (
        lambda i: anti_affinity_pod(i, "sched-0"),
        lambda i: anti_affinity_pod(i, "sched-1"),
    ),
    "affinity": (lambda i: affinity_pod(i, "sched-0"), lambda i: affinity_pod(i, "sched-1")),
    "spread": (plain_pod, lambda i: spread_pod(i, "default")),
    "spread-soft": (plain_pod, lambda i: spread_pod(i, "default", soft=True)),
}


def _schedule(framework: Framework, snapshot: Snapshot, pods: list[Pod]) -> int:
    placed = 0
    for pod in pods:
        state = CycleState()
        try:
            result = schedule_pod(framework, state, pod, snapshot)
        except FitError:  # an unschedulable pod just stays pending here
            continue
        snapshot.add_pod(pod, result.suggested_host, info=state.get(POD_INFO_STATE_KEY))
        placed += 1
    return placed


def run(
    workload: str, num_nodes: int, num_init: int, num_pods: int, *, seed: int = 1
) -> tuple[float, float, int]:
    """(pods/s of wall time, pods per CPU-second, pods placed) for the measured pods."""
    rng = random.Random(seed)
    snapshot = Snapshot(capacity=num_nodes)
    for node in make_nodes(num_nodes, rng):
        snapshot.add_node(node)
    framework = build_profiles(default_config(), rng=random.Random(seed))["default-scheduler"]
    make_init, make_measured = WORKLOADS[workload]
    _schedule(framework, snapshot, [make_init(i) for i in range(num_init)])
    pods = [make_measured(i) for i in range(num_pods)]
    start = time.perf_counter()
    cpu_start = time.process_time()
    placed = _schedule(framework, snapshot, pods)
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    return num_pods / elapsed, num_pods / cpu, placed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="anti-affinity")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--init-pods", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--profile", action="store_true", help="profile with pyinstrument")
    args = parser.parse_args()
    if args.profile:
        from pyinstrument import Profiler

        profiler = Profiler()
        profiler.start()
        wall, cpu, placed = run(args.workload, args.nodes, args.init_pods, args.pods)
        profiler.stop()
        print(profiler.output_text(unicode=True, color=False))
    else:
        wall, cpu, placed = run(args.workload, args.nodes, args.init_pods, args.pods)
    print(
        f"{args.workload}: {args.pods} pods ({placed} placed) on {args.nodes} nodes after "
        f"{args.init_pods} init pods: {wall:,.0f} pods/s ({cpu:,.0f} pods per CPU-second)"
    )


if __name__ == "__main__":
    main()
