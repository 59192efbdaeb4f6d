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
deletes bound pods). PreemptionAsync is upstream's: while the measured plain pods
arrive, a priority-10 pod every 0.2 s must preempt (its churn op in "create" mode).

Gangs (issue 22): ``GangScheduling`` is upstream's gangscheduling/performance-config.yaml
(kube 1.36): PodGroups ``gang-<k>`` of ``scheduling.k8s.io/v1alpha2`` with gang minCount 3
are created before the measured pods, pod ``test-gang-scheduling-<i>`` joins ``gang-<i // 3>``
through ``spec.schedulingGroup``; ``--pods 3000 --nodes 5000`` is upstream's
5000Nodes_1000Gangs_3000Pods. ``GangContention`` is this project's: two gangs that each
need the whole cluster arrive together (one store write each, back to back); one is
placed, the other stays pending whole.
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
GANG_PAUSE_IMAGE = "registry.k8s.io/pause:3.10.1"  # gangscheduling/templates/gang-pod.yaml
PODS_PER_GANG = 3  # upstream's podsPerGroup
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"

INIT_NAMESPACE = "sched-0"
MEASURED_NAMESPACE = "sched-1"
GANG_NAMESPACE = "gang-0"  # upstream's namespace for the gang workloads


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


EBS_CSI_DRIVER = "ebs.csi.aws.com"
EBS_ATTACH_LIMIT = 39  # the volume workloads' csiNodeAllocatable


def _volume_pod(name: str, namespace: str) -> Obj:
    """scheduler_perf's createPods with a PV/PVC template: the default pod with one volume
    naming its own claim (``pvc-<pod>``)."""
    volume = {"name": "vol", "persistentVolumeClaim": {"claimName": f"pvc-{name}"}}
    return pod(name, namespace, spec={"volumes": [volume]})


def volume_pair(pod_obj: Obj, source: str) -> list[Obj]:
    """The claim and the PV bound to it that scheduler_perf's
    CreatePodWithPersistentVolume makes for a pod (templates pvc.yaml and pv-csi.yaml or
    pv-aws.yaml: 1Gi, ReadOnlyMany, the claim annotated bind-completed; the PV's name
    prefixed with the namespace, a CSI PV's handle its name)."""
    namespace = pod_obj["metadata"]["namespace"]
    claim = pod_obj["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"]
    pv_name = f"{namespace}-pv-{pod_obj['metadata']['name']}"
    spec: Obj = {
        "accessModes": ["ReadOnlyMany"],
        "capacity": {"storage": "1Gi"},
        "persistentVolumeReclaimPolicy": "Retain",
        "claimRef": {"kind": "PersistentVolumeClaim", "namespace": namespace, "name": claim},
    }
    if source == "csi":
        spec["csi"] = {"driver": EBS_CSI_DRIVER, "volumeHandle": pv_name}
    else:
        spec["awsElasticBlockStore"] = {"volumeID": "<volume-id>"}
    return [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {
                "name": claim,
                "namespace": namespace,
                "annotations": {"pv.kubernetes.io/bind-completed": "true"},
            },
            "spec": {
                "accessModes": ["ReadOnlyMany"],
                "resources": {"requests": {"storage": "1Gi"}},
                "volumeName": pv_name,
            },
            "status": {"phase": "Bound"},
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": pv_name},
            "spec": spec,
            "status": {"phase": "Bound"},
        },
    ]


def csi_node(name: str) -> Obj:
    """The CSINode of scheduler_perf's nodeAllocatableStrategy (csiNodeAllocatable)."""
    driver = {"name": EBS_CSI_DRIVER, "nodeID": name, "allocatable": {"count": EBS_ATTACH_LIMIT}}
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": name},
        "spec": {"drivers": [driver]},
    }


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

    @property
    def gang_ns(self) -> str:
        return self.prefix + GANG_NAMESPACE

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


def namespace(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def kube_pod_group(name: str, namespace: str, min_count: int) -> Obj:
    """gangscheduling/templates/podgroup.yaml: kube 1.36's PodGroup with a gang policy."""
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    }


def plugins_pod_group(name: str, namespace: str, min_member: int) -> Obj:
    """scheduler-plugins' PodGroup (``scheduling.x-k8s.io/v1alpha1``, spec.minMember)."""
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minMember": min_member},
    }


def gang_pod(names: Names, i: int) -> Obj:
    """gangscheduling/templates/gang-pod.yaml: requests only (100m cpu, 100Mi memory),
    member of ``gang-<i // podsPerGroup>`` through spec.schedulingGroup."""
    container = {
        "name": "pause",
        "image": GANG_PAUSE_IMAGE,
        "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"test-gang-scheduling-{i}", "namespace": names.gang_ns},
        "spec": {
            "containers": [container],
            "schedulingGroup": {"podGroupName": f"gang-{i // PODS_PER_GANG}"},
        },
    }


def _gang_groups(names: Names, _nodes: int, pods: int) -> list[Obj]:
    gangs = pods // PODS_PER_GANG
    return [namespace(names.gang_ns)] + [
        kube_pod_group(f"gang-{k}", names.gang_ns, PODS_PER_GANG) for k in range(gangs)
    ]


def _gang_pods_check(_nodes: int, pods: int) -> str:
    if pods % PODS_PER_GANG:
        return f"--pods {pods}: GangScheduling needs a multiple of {PODS_PER_GANG} (pods per gang)"
    return ""


CONTENTION_GROUPS = ("contention-a", "contention-b")


def contention_pod(names: Names, group: int, member: int) -> Obj:
    """Member ``member`` of the contention gang ``group``: a whole node's cpu (4) and
    scheduler-plugins' label naming the group."""
    name = CONTENTION_GROUPS[group]
    labels = {POD_GROUP_LABEL: name}
    return pod(f"{name}-{member:05d}", names.gang_ns, cpu="4", memory="100Mi", labels=labels)


def _contention_pods(names: Names, count: int) -> list[Obj]:
    """The first gang's members, then the second's: the bench creates each gang in one
    store write (``arrival_chunk``), the two writes back to back."""
    half = count // 2
    return [contention_pod(names, g, j) for g in range(2) for j in range(half)]


def _contention_groups(names: Names, _nodes: int, pods: int) -> list[Obj]:
    return [namespace(names.gang_ns)] + [
        plugins_pod_group(group, names.gang_ns, pods // 2) for group in CONTENTION_GROUPS
    ]


def _contention_check(nodes: int, pods: int) -> str:
    if pods != 2 * nodes:
        return (
            f"--pods {pods}: GangContention needs --pods = 2 x --nodes ({2 * nodes}): "
            "two gangs of one 4-cpu pod per node"
        )
    return ""


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
    runner recreates objects every ``churn_interval_s`` while measured pods schedule
    (MixedChurn); with ``churn_creates`` it creates one more such pod every
    ``churn_interval_s`` and deletes nothing (scheduler_perf's churn op in "create" mode);
    ``measured_evictable``: a measured pod may be preempted, and one deleted counts as done;
    ``needs`` names the plugins without which the workload cannot pass; ``zones`` are the
    zone labels given to nodes in turn (empty: no zone label).

    Gang workloads (``gangs``): ``setup_objects(names, nodes, pods)`` are created after the
    init pods and before measuring (namespace, PodGroups); ``expected_bound(nodes, pods)``
    measured pods bound end the measured phase, whose ``expected_outcome`` is then
    "complete" or, for GangContention, "one-gang-bound" (one gang bound, the other
    pending whole); ``check_counts(nodes, pods)`` says why counts cannot make a run ("").
    ``measured_all(names, count)``, when given, builds all measured pods at once (instead
    of ``measured_pod`` one by one); ``arrival_chunk(pods)`` is how many measured pods
    one store write creates (None: the bench's default, 1,000).
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
    churn_creates: PodFactory | None = None
    measured_evictable: bool = False
    needs: tuple[str, ...] = ()
    zones: tuple[str, ...] = ()
    gangs: bool = False
    setup_objects: Callable[[Names, int, int], list[Obj]] = lambda _names, _nodes, _pods: []
    expected_bound: Callable[[int, int], int] = lambda _nodes, pods: pods
    expected_outcome: str = "complete"
    check_counts: Callable[[int, int], str] = lambda _nodes, _pods: ""
    measured_all: Callable[[Names, int], list[Obj]] | None = None
    arrival_chunk: Callable[[int], int] | None = None
    # "csi" / "aws": every pod has a claim bound to a PV of that source (volume_pair),
    # created before the pods; csi_nodes: every node has a CSINode with the attach limit.
    volume_source: str = ""
    csi_nodes: bool = False

    def volume_objects(self, pods: Sequence[Obj]) -> list[Obj]:
        """The claims and PVs ``pods`` use (none unless ``volume_source``)."""
        if not self.volume_source:
            return []
        return [obj for p in pods for obj in volume_pair(p, self.volume_source)]

    def nodes(self, names: Names, count: int) -> list[Obj]:
        zones = self.zones
        return [node(names.node(i), zones[i % len(zones)] if zones else None) for i in range(count)]

    def init_pods(self, names: Names, count: int) -> list[Obj]:
        return [self.init_pod(names, i) for i in range(count)]

    def measured_pods(self, names: Names, start: int, count: int) -> list[Obj]:
        if self.measured_all is not None:
            return self.measured_all(names, start + count)[start:]
        return [self.measured_pod(names, i) for i in range(start, start + count)]


def _low_priority(names: Names, i: int) -> Obj:
    """scheduler_perf's pod-low-priority.yaml: 900m, deleted at once (no grace period)."""
    no_grace = {"terminationGracePeriodSeconds": 0}
    return pod(f"init-{i:06d}", names.init_ns, cpu="900m", spec=no_grace)


def _high_priority(name: str, namespace: str) -> Obj:
    """scheduler_perf's pod-high-priority.yaml: priority 10, 3 cpu."""
    return pod(name, namespace, cpu="3", priority=10)


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
            init_pod=_low_priority,
            measured_pod=lambda n, i: _high_priority(f"pod-{i:06d}", n.measured_ns),
            default_init=lambda nodes, _pods: 4 * nodes,
            init_evictable=True,
            max_measured=lambda nodes, _init: nodes,
            needs=("DefaultPreemption",),
        ),
        Workload(
            "PreemptionAsync",
            "nodes full of low-priority 900m pods; a priority-10 3-cpu pod every 0.2 s "
            "preempts while plain pods are measured",
            init_pod=_low_priority,
            default_init=lambda nodes, _pods: 4 * nodes,
            init_evictable=True,
            max_measured=lambda nodes, _init: nodes,
            needs=("DefaultPreemption",),
            churn_creates=lambda n, i: _high_priority(f"preemptor-{i:06d}", n.init_ns),
            churn_interval_s=0.2,
            measured_evictable=True,
        ),
        Workload(
            "SchedulingCSIPVs",
            "every pod has a claim bound to its own CSI PV; nodes allow 39 EBS volumes",
            init_pod=lambda n, i: _volume_pod(f"init-{i:06d}", n.init_ns),
            measured_pod=lambda n, i: _volume_pod(f"pod-{i:06d}", n.measured_ns),
            default_init=_one_per_node,
            needs=("VolumeBinding", "NodeVolumeLimits"),
            volume_source="csi",
            csi_nodes=True,
        ),
        Workload(
            "SchedulingInTreePVs",
            "every pod has a claim bound to its own in-tree AWS EBS PV",
            init_pod=lambda n, i: _volume_pod(f"init-{i:06d}", n.init_ns),
            measured_pod=lambda n, i: _volume_pod(f"pod-{i:06d}", n.measured_ns),
            default_init=_one_per_node,
            needs=("VolumeBinding",),
            volume_source="aws",
        ),
        Workload(
            "Unschedulable",
            "9-cpu pods that fit nowhere stay pending while plain pods flow",
            init_pod=lambda n, i: pod(f"init-{i:06d}", n.init_ns, cpu="9"),
            default_init=lambda _nodes, _pods: 200,
            init_schedulable=False,
        ),
        Workload(
            "GangScheduling",
            "upstream's gang workload: PodGroups of 3 (v1alpha2 minCount), 100m/100Mi members",
            measured_pod=gang_pod,
            default_init=lambda _nodes, _pods: 0,
            gangs=True,
            setup_objects=_gang_groups,
            check_counts=_gang_pods_check,
        ),
        Workload(
            "GangContention",
            "two gangs that each need every node's 4 cpu arrive together; one is placed",
            measured_all=_contention_pods,
            arrival_chunk=lambda pods: pods // 2,
            default_init=lambda _nodes, _pods: 0,
            gangs=True,
            setup_objects=_contention_groups,
            expected_bound=lambda _nodes, pods: pods // 2,
            expected_outcome="one-gang-bound",
            check_counts=_contention_check,
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
