"""Workloads of kube-scheduler's scheduler_perf (test/integration/scheduler_perf).

Every workload creates ``nodes`` nodes from scheduler_perf's node template (110 pods,
4 cpu, 32Gi memory), then ``init`` pods (waited for unless they are meant to stay
pending), then the ``measured`` pods whose scheduling is timed. Pods are Kubernetes dicts
as ``distsched apply`` would store them.

The workloads named as upstream's are upstream's: the same pod templates, the same zone
layout (no zone label for SchedulingBasic and the anti-affinity case; every node in
``zone1`` for SchedulingPodAffinity and SchedulingNodeAffinity, whose pods ask for
``zone1``/``zone2``; ``moon-1..3`` for TopologySpreading, maxSkew 5) and, by default, the
same ratio of init pods to nodes as upstream's 5000-node cases. Figures from them compare
with published scheduler_perf figures. One addition: every node carries the
``kubernetes.io/hostname`` label, as a kubelet sets it.

Harder variants chosen for this project keep their own names: ``...ThreeZones`` spread
nodes over three zones (node affinity then excludes a third of the nodes; pod affinity
has domains to choose from), ``TopologySpreadingMaxSkew1`` is maxSkew 1 with 1,000 init
pods per 5,000 nodes. Unschedulable and MixedChurn are this project's (MixedChurn also
deletes bound pods).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from distsched.model.objects import LABEL_HOSTNAME

Obj = dict[str, Any]

ZONE_KEY = "topology.kubernetes.io/zone"
ZONES = ("zone-0", "zone-1", "zone-2")  # the ...ThreeZones variants and churn nodes
UPSTREAM_ONE_ZONE = ("zone1",)
UPSTREAM_SPREAD_ZONES = ("moon-1", "moon-2", "moon-3")
NODE_AFFINITY = ("zone1", "zone2")  # pod-with-node-affinity.yaml
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"

INIT_NAMESPACE = "sched-0"
MEASURED_NAMESPACE = "sched-1"


def node(name: str, zone: str | None) -> Obj:
    """scheduler_perf's node-default.yaml with a hostname label and, if given, a zone."""
    resources = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    labels = {LABEL_HOSTNAME: name}
    if zone is not None:
        labels[ZONE_KEY] = zone
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {},
        "status": {"capacity": dict(resources), "allocatable": dict(resources)},
    }


def pod(
    name: str,
    namespace: str,
    *,
    cpu: str = "100m",
    memory: str = "500Mi",
    labels: dict[str, str] | None = None,
    priority: int | None = None,
    spec: Obj | None = None,
) -> Obj:
    """scheduler_perf's pod-default.yaml (a pause container, requests = limits) plus extras."""
    resources = {"cpu": cpu, "memory": memory}
    body: Obj = {
        "containers": [
            {
                "name": "pause",
                "image": PAUSE_IMAGE,
                "ports": [{"containerPort": 80}],
                "resources": {"requests": dict(resources), "limits": dict(resources)},
            }
        ],
        **(spec or {}),
    }
    if priority is not None:
        body["priority"] = priority
    meta: Obj = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body}


def _pod_term(color: str, topology_key: str, namespaces: Sequence[str]) -> Obj:
    return {
        "labelSelector": {"matchLabels": {"color": color}},
        "topologyKey": topology_key,
        "namespaces": list(namespaces),
    }


@dataclass(frozen=True)
class Names:
    """Object names of one run; ``prefix`` keeps runs against a live deployment apart."""

    prefix: str = ""

    def node(self, i: int) -> str:
        return f"{self.prefix}node-{i:05d}"

    def churn_node(self, i: int) -> str:
        return f"{self.prefix}churn-node-{i:05d}"

    @property
    def init_ns(self) -> str:
        return self.prefix + INIT_NAMESPACE

    @property
    def measured_ns(self) -> str:
        return self.prefix + MEASURED_NAMESPACE

    def init_key(self, i: int) -> str:
        return f"{self.init_ns}/init-{i:06d}"

    def measured_key(self, i: int) -> str:
        return f"{self.measured_ns}/pod-{i:06d}"


PodFactory = Callable[[Names, int], Obj]


def _default_init(names: Names, i: int) -> Obj:
    return pod(f"init-{i:06d}", names.init_ns)


def _default_measured(names: Names, i: int) -> Obj:
    return pod(f"pod-{i:06d}", names.measured_ns)


def _anti_affinity(names: Names, name: str, namespace: str) -> Obj:
    term = _pod_term("green", LABEL_HOSTNAME, [names.init_ns, names.measured_ns])
    spec = {
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    }
    return pod(name, namespace, labels={"color": "green"}, spec=spec)


def _affinity(names: Names, name: str, namespace: str) -> Obj:
    term = _pod_term("blue", ZONE_KEY, [names.init_ns, names.measured_ns])
    spec = {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}
    return pod(name, namespace, labels={"color": "blue"}, spec=spec)


def _node_affinity(names: Names, name: str, namespace: str, zones: Sequence[str]) -> Obj:
    requirement = {"key": ZONE_KEY, "operator": "In", "values": list(zones)}
    required = {"nodeSelectorTerms": [{"matchExpressions": [requirement]}]}
    spec = {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}
    }
    return pod(name, namespace, spec=spec)


def _spreading(names: Names, i: int, max_skew: int) -> Obj:
    constraint = {
        "maxSkew": max_skew,
        "topologyKey": ZONE_KEY,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"color": "blue"}},
    }
    spec = {"topologySpreadConstraints": [constraint]}
    return pod(f"pod-{i:06d}", names.measured_ns, labels={"color": "blue"}, spec=spec)


def _one_fifth(nodes: int, _pods: int) -> int:
    return nodes // 5


def _one_per_node(nodes: int, _pods: int) -> int:
    return nodes


@dataclass(frozen=True)
class Workload:
    """One scheduler_perf-like scenario.

    ``init_pod``/``measured_pod`` build pod ``i``; ``default_init`` gives the number of init
    pods when none is asked for; ``init_schedulable`` says whether init pods are waited
    for (and expected bound at the end unless ``init_evictable``); ``max_measured`` is
    how many measured pods can all be scheduled (None: no limit); with ``churn`` the
    runner recreates objects every ``churn_interval_s`` while measured pods schedule;
    ``needs`` names the plugins without which the workload cannot pass; ``zones`` are the
    zone labels given to nodes in turn (empty: no zone label).
    """

    name: str
    summary: str
    init_pod: PodFactory = _default_init
    measured_pod: PodFactory = _default_measured
    default_init: Callable[[int, int], int] = _one_fifth
    init_schedulable: bool = True
    init_evictable: bool = False
    max_measured: Callable[[int, int], int | None] = lambda _nodes, _init: None
    churn: bool = False
    churn_interval_s: float = 0.25
    needs: tuple[str, ...] = ()
    zones: tuple[str, ...] = ()

    def nodes(self, names: Names, count: int) -> list[Obj]:
        zones = self.zones
        return [node(names.node(i), zones[i % len(zones)] if zones else None) for i in range(count)]

    def init_pods(self, names: Names, count: int) -> list[Obj]:
        return [self.init_pod(names, i) for i in range(count)]

    def measured_pods(self, names: Names, start: int, count: int) -> list[Obj]:
        return [self.measured_pod(names, i) for i in range(start, start + count)]


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload(
            "SchedulingBasic",
            "pods requesting 100m cpu / 500Mi memory",
        ),
        Workload(
            "SchedulingPodAntiAffinity",
            "required anti-affinity on kubernetes.io/hostname within one label group",
            init_pod=lambda n, i: _anti_affinity(n, f"init-{i:06d}", n.init_ns),
            measured_pod=lambda n, i: _anti_affinity(n, f"pod-{i:06d}", n.measured_ns),
            max_measured=lambda nodes, init: max(0, nodes - init),
            needs=("InterPodAffinity",),
        ),
        Workload(
            "SchedulingPodAffinity",
            "required affinity on topology.kubernetes.io/zone; every node in zone1",
            init_pod=lambda n, i: _affinity(n, f"init-{i:06d}", n.init_ns),
            measured_pod=lambda n, i: _affinity(n, f"pod-{i:06d}", n.measured_ns),
            default_init=_one_per_node,
            needs=("InterPodAffinity",),
            zones=UPSTREAM_ONE_ZONE,
        ),
        Workload(
            "SchedulingPodAffinityThreeZones",
            "required affinity on topology.kubernetes.io/zone; nodes over three zones",
            init_pod=lambda n, i: _affinity(n, f"init-{i:06d}", n.init_ns),
            measured_pod=lambda n, i: _affinity(n, f"pod-{i:06d}", n.measured_ns),
            needs=("InterPodAffinity",),
            zones=ZONES,
        ),
        Workload(
            "SchedulingNodeAffinity",
            "required node affinity to zone1/zone2; every node in zone1",
            init_pod=lambda n, i: _node_affinity(n, f"init-{i:06d}", n.init_ns, NODE_AFFINITY),
            measured_pod=lambda n, i: _node_affinity(
                n, f"pod-{i:06d}", n.measured_ns, NODE_AFFINITY
            ),
            default_init=_one_per_node,
            zones=UPSTREAM_ONE_ZONE,
        ),
        Workload(
            "SchedulingNodeAffinityThreeZones",
            "required node affinity to two of three zones",
            init_pod=lambda n, i: _node_affinity(n, f"init-{i:06d}", n.init_ns, ZONES[:2]),
            measured_pod=lambda n, i: _node_affinity(n, f"pod-{i:06d}", n.measured_ns, ZONES[:2]),
            zones=ZONES,
        ),
        Workload(
            "TopologySpreading",
            "maxSkew 5 over zones moon-1..3, DoNotSchedule; init pods are plain",
            measured_pod=lambda n, i: _spreading(n, i, 5),
            default_init=_one_per_node,
            needs=("PodTopologySpread",),
            zones=UPSTREAM_SPREAD_ZONES,
        ),
        Workload(
            "TopologySpreadingMaxSkew1",
            "maxSkew 1 over three zones, DoNotSchedule; init pods are plain",
            measured_pod=lambda n, i: _spreading(n, i, 1),
            needs=("PodTopologySpread",),
            zones=ZONES,
        ),
        Workload(
            "PreemptionBasic",
            "low-priority 900m pods fill every node; priority-10 3-cpu pods preempt",
            init_pod=lambda n, i: pod(f"init-{i:06d}", n.init_ns, cpu="900m"),
            measured_pod=lambda n, i: pod(f"pod-{i:06d}", n.measured_ns, cpu="3", priority=10),
            default_init=lambda nodes, _pods: 4 * nodes,
            init_evictable=True,
            max_measured=lambda nodes, _init: nodes,
            needs=("DefaultPreemption",),
        ),
        Workload(
            "Unschedulable",
            "9-cpu pods that fit nowhere stay pending while plain pods flow",
            init_pod=lambda n, i: pod(f"init-{i:06d}", n.init_ns, cpu="9"),
            default_init=lambda _nodes, _pods: 200,
            init_schedulable=False,
        ),
        Workload(
            "MixedChurn",
            "every 0.25 s a node and an unschedulable pod are recreated and a bound pod deleted",
            init_evictable=True,
            churn=True,
        ),
    )
}


def churn_pod(names: Names, step: int) -> Obj:
    """scheduler_perf's churn pod: high priority, too large for any node."""
    return pod(f"churn-{step:06d}", names.init_ns, cpu="9", priority=10)
