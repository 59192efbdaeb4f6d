"""Typed Kubernetes v1 Pod and Node objects (the subset the scheduler reads).

Objects are frozen dataclasses. ``from_dict`` / ``to_dict`` convert to and from the
Kubernetes JSON shape (camelCase keys), which is also what the store keeps (msgpack).
Resource amounts are kept as integers in canonical units: cpu in millicores, memory and
ephemeral-storage in bytes, every other resource (pods, extended resources) in units
(see quantity.py). A ``ResourceList`` is ``dict[str, int]`` in those units.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from distsched.model.volumes import PodVolume

ResourceList = dict[str, int]

DEFAULT_SCHEDULER_NAME = "default-scheduler"
DEFAULT_NAMESPACE = "default"
LABEL_HOSTNAME = "kubernetes.io/hostname"  # kube's v1.LabelHostname: the kubelet sets it


@dataclass(frozen=True, slots=True)
class ObjectMeta:
    name: str
    namespace: str = DEFAULT_NAMESPACE  # "" for cluster-scoped objects (nodes)
    uid: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    creation_timestamp: str = ""  # RFC 3339, set by the store
    resource_version: str = ""  # set by the store


@dataclass(frozen=True, slots=True)
class LabelSelectorRequirement:
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class LabelSelector:
    match_labels: dict[str, str] = field(default_factory=dict)
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist, Gt, Lt
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()  # only metadata.name


@dataclass(frozen=True, slots=True)
class PreferredSchedulingTerm:
    weight: int
    preference: NodeSelectorTerm


@dataclass(frozen=True, slots=True)
class NodeAffinity:
    # requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms (ORed); None = absent
    required: tuple[NodeSelectorTerm, ...] | None = None
    preferred: tuple[PreferredSchedulingTerm, ...] = ()


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    topology_key: str
    label_selector: LabelSelector | None = None
    namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None


@dataclass(frozen=True, slots=True)
class WeightedPodAffinityTerm:
    weight: int
    term: PodAffinityTerm


@dataclass(frozen=True, slots=True)
class PodAffinity:
    required: tuple[PodAffinityTerm, ...] = ()
    preferred: tuple[WeightedPodAffinityTerm, ...] = ()


@dataclass(frozen=True, slots=True)
class Affinity:
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"  # Equal, Exists
    value: str = ""
    effect: str = ""  # "", NoSchedule, PreferNoSchedule, NoExecute
    toleration_seconds: int | None = None


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    effect: str  # NoSchedule, PreferNoSchedule, NoExecute
    value: str = ""


@dataclass(frozen=True, slots=True)
class TopologySpreadConstraint:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str  # DoNotSchedule, ScheduleAnyway
    label_selector: LabelSelector | None = None
    min_domains: int | None = None
    match_label_keys: tuple[str, ...] = ()
    node_affinity_policy: str = "Honor"  # Honor, Ignore
    node_taints_policy: str = "Ignore"  # Honor, Ignore


@dataclass(frozen=True, slots=True)
class ContainerPort:
    container_port: int
    host_port: int = 0
    protocol: str = "TCP"
    host_ip: str = ""


@dataclass(frozen=True, slots=True)
class ResourceRequirements:
    requests: ResourceList = field(default_factory=dict)
    limits: ResourceList = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Container:
    name: str
    image: str = ""
    resources: ResourceRequirements = field(default_factory=ResourceRequirements)
    ports: tuple[ContainerPort, ...] = ()
    restart_policy: str = ""  # init containers only: "Always" makes a sidecar


@dataclass(frozen=True, slots=True)
class PodSpec:
    containers: tuple[Container, ...] = ()
    init_containers: tuple[Container, ...] = ()
    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    priority: int | None = None
    priority_class_name: str = ""
    preemption_policy: str = "PreemptLowerPriority"  # or Never
    overhead: ResourceList = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    affinity: Affinity | None = None
    tolerations: tuple[Toleration, ...] = ()
    topology_spread_constraints: tuple[TopologySpreadConstraint, ...] = ()
    node_name: str = ""
    scheduling_gates: tuple[str, ...] = ()
    # Pod-level resources (kube's PodLevelResources, cpu and memory): requests already
    # defaulted as the API server does; None when the pod sets none.
    resources: ResourceRequirements | None = None
    # spec.schedulingGroup.podGroupName (kube 1.36, GenericWorkload): the PodGroup of the
    # pod's namespace it belongs to ("" when none); immutable. model/podgroups.py reads it
    # and, failing it, scheduler-plugins' label.
    pod_group_name: str = ""
    # spec.resourceClaims' names (DynamicResources, which distsched does not model: such a
    # pod is not scheduled, see framework/plugins/dynamic_resources.py).
    resource_claims: tuple[str, ...] = ()
    # spec.volumes, as far as the volume plugins read them (model/volumes.py).
    volumes: tuple[PodVolume, ...] = ()
    # Spec fields read in part but kept whole, so that a pod written back (apply, the
    # encoder) keeps them as given: (field, its value as canonical JSON).
    kept: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class PodCondition:
    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: str = ""  # RFC 3339, "" when not given


@dataclass(frozen=True, slots=True)
class PodStatus:
    phase: str = "Pending"
    conditions: tuple[PodCondition, ...] = ()
    nominated_node_name: str = ""


@dataclass(frozen=True, slots=True)
class PodRef:
    """A pod named, not described (kube's ObjectReference to a Pod): what a write back to
    the cluster needs when the writer has no parsed pod. ``uid`` "" names whichever
    incarnation of ``key`` the cluster holds."""

    key: str  # namespace/name
    uid: str = ""


@dataclass(frozen=True, slots=True)
class Pod:
    metadata: ObjectMeta
    spec: PodSpec = field(default_factory=PodSpec)
    status: PodStatus = field(default_factory=PodStatus)
    kind = "Pod"

    @property
    def key(self) -> str:
        """``namespace/name``: the pod's name in queues, the store and the cache."""
        return f"{self.metadata.namespace}/{self.metadata.name}"

    def ref(self) -> PodRef:
        return PodRef(self.key, self.metadata.uid)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Pod:
        """Decode, default and validate Kubernetes v1 Pod JSON (ManifestError if invalid)."""
        from distsched.model.decode import pod_from_dict

        return pod_from_dict(data)

    def to_dict(self) -> dict[str, Any]:
        """Kubernetes v1 Pod JSON; ``Pod.from_dict(p.to_dict()) == p``."""
        from distsched.model.encode import pod_to_dict

        return pod_to_dict(self)


@dataclass(frozen=True, slots=True)
class NodeCondition:
    type: str
    status: str


@dataclass(frozen=True, slots=True)
class ContainerImage:
    names: tuple[str, ...]
    size_bytes: int = 0


@dataclass(frozen=True, slots=True)
class NodeSpec:
    unschedulable: bool = False
    taints: tuple[Taint, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeStatus:
    capacity: ResourceList = field(default_factory=dict)
    allocatable: ResourceList = field(default_factory=dict)
    conditions: tuple[NodeCondition, ...] = ()
    images: tuple[ContainerImage, ...] = ()


@dataclass(frozen=True, slots=True)
class Node:
    metadata: ObjectMeta
    spec: NodeSpec = field(default_factory=NodeSpec)
    status: NodeStatus = field(default_factory=NodeStatus)
    kind = "Node"

    @property
    def key(self) -> str:
        """The node's name (nodes are cluster-scoped)."""
        return self.metadata.name

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Node:
        """Decode, default and validate Kubernetes v1 Node JSON (ManifestError if invalid)."""
        from distsched.model.decode import node_from_dict

        return node_from_dict(data)

    def to_dict(self) -> dict[str, Any]:
        """Kubernetes v1 Node JSON; ``Node.from_dict(n.to_dict()) == n``."""
        from distsched.model.encode import node_to_dict

        return node_to_dict(self)
