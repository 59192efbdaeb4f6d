"""Small builders for nodes, pods and snapshots, and helpers that run one plugin the way
the framework does and report per-node results by node name (like kube's plugin tests)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from distsched.framework.cycle_state import CycleState
from distsched.framework.interface import FilterPlugin, Plugin, PreFilterPlugin, ScorePlugin
from distsched.framework.interface import PreScorePlugin as PreScorePluginBase
from distsched.framework.snapshot import Snapshot
from distsched.framework.status import Code, Status
from distsched.model.objects import (
    DEFAULT_SCHEDULER_NAME,
    Affinity,
    Container,
    ContainerImage,
    ContainerPort,
    Node,
    NodeAffinity,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    NodeSpec,
    NodeStatus,
    ObjectMeta,
    Pod,
    PodSpec,
    PodStatus,
    PreferredSchedulingTerm,
    ResourceRequirements,
    Taint,
    Toleration,
)

GI = 1024**3
MI = 1024**2


def make_node(
    name: str,
    *,
    cpu: int = 4000,
    memory: int = 8 * GI,
    pods: int = 110,
    extra: Mapping[str, int] | None = None,
    labels: Mapping[str, str] | None = None,
    taints: Iterable[Taint] = (),
    unschedulable: bool = False,
    images: Iterable[tuple[tuple[str, ...], int]] = (),
) -> Node:
    allocatable = {"cpu": cpu, "memory": memory, "pods": pods, **(extra or {})}
    return Node(
        ObjectMeta(name=name, namespace="", labels=dict(labels or {})),
        NodeSpec(unschedulable=unschedulable, taints=tuple(taints)),
        NodeStatus(
            allocatable=allocatable,
            images=tuple(ContainerImage(names, size) for names, size in images),
        ),
    )


def container(
    name: str = "c",
    *,
    image: str = "",
    requests: Mapping[str, int] | None = None,
    ports: Iterable[ContainerPort] = (),
    restart_policy: str = "",
) -> Container:
    return Container(
        name,
        image=image,
        resources=ResourceRequirements(requests=dict(requests or {})),
        ports=tuple(ports),
        restart_policy=restart_policy,
    )


def make_pod(
    name: str = "p",
    *,
    namespace: str = "default",
    requests: Mapping[str, int] | None = None,
    containers: Iterable[Container] | None = None,
    init_containers: Iterable[Container] = (),
    overhead: Mapping[str, int] | None = None,
    node_name: str = "",
    node_selector: Mapping[str, str] | None = None,
    affinity: Affinity | None = None,
    tolerations: Iterable[Toleration] = (),
    priority: int | None = None,
    nominated: str = "",
    gates: Iterable[str] = (),
    labels: Mapping[str, str] | None = None,
    ports: Iterable[ContainerPort] = (),
    scheduler_name: str = DEFAULT_SCHEDULER_NAME,
) -> Pod:
    if containers is None:
        containers = (container(requests=requests, ports=ports),)
    return Pod(
        ObjectMeta(name=name, namespace=namespace, uid=f"uid-{name}", labels=dict(labels or {})),
        PodSpec(
            containers=tuple(containers),
            init_containers=tuple(init_containers),
            overhead=dict(overhead or {}),
            node_name=node_name,
            node_selector=dict(node_selector or {}),
            affinity=affinity,
            tolerations=tuple(tolerations),
            priority=priority,
            scheduling_gates=tuple(gates),
            scheduler_name=scheduler_name,
        ),
        PodStatus(nominated_node_name=nominated),
    )


def host_port(spec: str) -> ContainerPort:
    """``"TCP/127.0.0.1/8080"`` (kube's nodeports test notation)."""
    protocol, ip, port = spec.split("/")
    return ContainerPort(
        container_port=int(port), host_port=int(port), protocol=protocol, host_ip=ip
    )


def req(key: str, operator: str, *values: str) -> NodeSelectorRequirement:
    return NodeSelectorRequirement(key, operator, tuple(values))


def required_affinity(*terms: NodeSelectorTerm) -> Affinity:
    return Affinity(node_affinity=NodeAffinity(required=tuple(terms)))


def preferred_affinity(*terms: tuple[int, NodeSelectorTerm]) -> Affinity:
    return Affinity(
        node_affinity=NodeAffinity(preferred=tuple(PreferredSchedulingTerm(w, t) for w, t in terms))
    )


def snapshot_of(nodes: Iterable[Node], pods: Iterable[Pod] = ()) -> Snapshot:
    snapshot = Snapshot(capacity=4)
    for node in nodes:
        snapshot.add_node(node)
    for pod in pods:
        snapshot.add_pod(pod)
    return snapshot


def run_filter(
    plugin: Plugin, pod: Pod, snapshot: Snapshot, state: CycleState | None = None
) -> dict[str, Status | None]:
    """Node name -> the plugin's status for that node (None = passes), PreFilter first."""
    state = state if state is not None else CycleState()
    if isinstance(plugin, PreFilterPlugin):
        _, status = plugin.pre_filter(state, pod, snapshot)
        if status is not None and status.code == Code.SKIP:
            return {snapshot.node_name(int(i)): None for i in snapshot.node_indices()}
        assert status is None or status.is_success(), status
    assert isinstance(plugin, FilterPlugin)
    indices = snapshot.node_indices()
    result = plugin.filter(state, pod, snapshot, indices)
    out: dict[str, Status | None] = {}
    for position, index in enumerate(indices):
        reasons = [f.reason for f in result.failures if f.mask[position]]
        name = snapshot.node_name(int(index))
        if not reasons:
            out[name] = None
            continue
        unresolvable = any(f.unresolvable for f in result.failures if f.mask[position])
        code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if unresolvable else Code.UNSCHEDULABLE
        out[name] = Status(code, *reasons)
    return out


def run_score(
    plugin: Plugin, pod: Pod, snapshot: Snapshot, *, normalize: bool = True
) -> dict[str, int]:
    """Node name -> score (after NormalizeScore unless ``normalize`` is False), PreScore
    first; a PreScore Skip yields an empty dict."""
    state = CycleState()
    indices = snapshot.node_indices()
    if isinstance(plugin, PreScorePluginBase):
        status = plugin.pre_score(state, pod, snapshot, indices)
        if status is not None and status.code == Code.SKIP:
            return {}
    assert isinstance(plugin, ScorePlugin)
    scores = plugin.score(state, pod, snapshot, indices)
    if normalize:
        scores = plugin.normalize_score(state, pod, scores)
    assert isinstance(scores, np.ndarray) and scores.dtype == np.int64
    return {snapshot.node_name(int(i)): int(s) for i, s in zip(indices, scores, strict=True)}
