"""Kubernetes v1 JSON (camelCase dicts) to Pod and Node, with defaulting and validation.

Defaults applied, as the API server would: pod namespace "default", schedulerName
"default-scheduler", preemptionPolicy "PreemptLowerPriority", toleration operator
"Equal", port protocol "TCP", spread policies Honor/Ignore, container requests default
to limits per resource, node allocatable defaults to capacity when absent. Node
namespaces are cleared. Everything else keeps its zero value; pod priority stays None
(the priorityClassName is resolved later).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import fields, replace
from operator import attrgetter
from typing import Any

import msgpack

from distsched.model import names
from distsched.model.decode_common import (
    decode_affinity,
    decode_label_selector,
    decode_meta,
    decode_resource_list,
    decode_taint,
    decode_toleration,
)
from distsched.model.errors import ManifestError
from distsched.model.fields import INT64_MAX, Fields, expect_object, fail, quote, type_name
from distsched.model.objects import (
    DEFAULT_NAMESPACE,
    DEFAULT_SCHEDULER_NAME,
    Container,
    ContainerImage,
    ContainerPort,
    Node,
    NodeCondition,
    NodeSpec,
    NodeStatus,
    Pod,
    PodCondition,
    PodSpec,
    PodStatus,
    ResourceRequirements,
    TopologySpreadConstraint,
)
from distsched.model.quantity import CPU, MAX_AMOUNT, MEMORY, amount_limit, format_quantity
from distsched.model.resources import aggregate_container_requests, spec_requests
from distsched.model.volumes import decode_pod_volumes

API_VERSION = "v1"
KINDS = ("Pod", "Node", "List")
PROTOCOLS = ("TCP", "UDP", "SCTP")
PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")
WHEN_UNSATISFIABLE = ("DoNotSchedule", "ScheduleAnyway")
NODE_INCLUSION_POLICIES = ("Honor", "Ignore")
POD_PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
CONDITION_STATUSES = ("True", "False", "Unknown")
PORT_MAX = 65535


def describe(data: Any, kind: str) -> str:
    """Best-effort ``namespace/name`` (pods) or ``name`` (nodes) of a raw object."""
    meta = data.get("metadata") if isinstance(data, dict) else None
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        return ""
    if kind != "Pod":
        return meta["name"]
    namespace = meta.get("namespace")
    if not isinstance(namespace, str) or not namespace:
        namespace = DEFAULT_NAMESPACE
    return f"{namespace}/{meta['name']}"


def check_header(root: Fields, kind: str, *, required: bool) -> None:
    """apiVersion must be "v1" and kind must be ``kind`` (both may be absent unless
    ``required``: objects handed to ``from_dict`` often omit them)."""
    api_version = root.get_str("apiVersion", required=required)
    if api_version and api_version != API_VERSION:
        root.fail("apiVersion", f'unsupported apiVersion {quote(api_version)}: expected "v1"')
    found = root.get_str("kind", required=required)
    if found and found != kind:
        root.fail("kind", f"expected {quote(kind)}, got {quote(found)}")


def pod_from_dict(data: Any) -> Pod:
    try:
        root = expect_object(data, "")
        check_header(root, "Pod", required=False)
        meta = root.get_obj("metadata", required=True)
        spec = root.get_obj("spec", required=True)
        assert meta is not None and spec is not None
        status = root.get_obj("status")
        return Pod(
            metadata=decode_meta(meta, namespaced=True),
            spec=_pod_spec(spec),
            status=_decode_pod_status(status) if status is not None else PodStatus(),
        )
    except ManifestError as exc:
        raise exc.located(kind="Pod", name=describe(data, "Pod")) from None


def node_from_dict(data: Any) -> Node:
    try:
        root = expect_object(data, "")
        check_header(root, "Node", required=False)
        meta = root.get_obj("metadata", required=True)
        assert meta is not None
        spec = root.get_obj("spec")
        status = root.get_obj("status")
        return Node(
            metadata=decode_meta(meta, namespaced=False),
            spec=_decode_node_spec(spec) if spec is not None else NodeSpec(),
            status=_decode_node_status(status) if status is not None else NodeStatus(),
        )
    except ManifestError as exc:
        raise exc.located(kind="Node", name=describe(data, "Node")) from None


class SpecCache:
    """Pod specs already decoded, by the msgpack bytes of their JSON without nodeName.

    Pods made from one template (a Deployment's, a Job's, a benchmark's) carry the same
    spec; validating it again for every pod was most of a scheduling worker's CPU. Only
    successes are kept, so an invalid spec fails every time with the same error; the
    least recently used entry goes when ``size`` entries are held, and specs larger than
    ``max_bytes`` are not kept. Equal bytes mean equal decoding: msgpack keeps every
    distinction the decoder makes (str, int, bool, float, null, list, map; tuples pack
    as lists, which the decoder also takes alike); a spec msgpack cannot pack is decoded
    every time.

    The cached PodSpec is shared by every pod of its template: like every parsed
    object it must not be mutated (its dict fields are plain dicts).
    """

    def __init__(self, size: int = 1024, max_bytes: int = 32 * 1024) -> None:
        self.size = size
        self.max_bytes = max_bytes
        self._specs: dict[bytes, PodSpec] = {}
        self.hits = 0
        self.misses = 0

    def clear(self) -> None:
        self._specs.clear()
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._specs)

    def decode(self, f: Fields) -> PodSpec:
        """``_decode_pod_spec(f)``, from the cache when the spec was seen before."""
        data = f.data
        template = data
        if "nodeName" in data:  # a bound pod: its template is the spec without nodeName
            template = {k: v for k, v in data.items() if k != "nodeName"}
        try:
            key = msgpack.packb(template, use_bin_type=True)
        except (TypeError, ValueError, OverflowError):  # not msgpack-able (a YAML date...)
            return _decode_pod_spec(f)
        specs = self._specs
        cached = specs.pop(key, None)
        if cached is None:
            self.misses += 1
            spec = _decode_pod_spec(f)  # raises for an invalid spec: nothing is cached
            if len(key) <= self.max_bytes:
                specs[key] = replace(spec, node_name="") if spec.node_name else spec
                if len(specs) > self.size:
                    for oldest in specs:  # the least recently used
                        specs.pop(oldest, None)
                        break
            return spec
        self.hits += 1
        specs[key] = cached  # most recently used last
        # The rest of the spec is valid, so nodeName is the only field left to check
        # (the one error _decode_pod_spec would report for this spec).
        node_name = f.get_str("nodeName")
        if not node_name:
            return cached
        f.check_str("nodeName", node_name, names.dns1123_subdomain)
        return spec_with_node_name(cached, node_name)


_SPEC_FIELDS = tuple(f.name for f in fields(PodSpec))
_NODE_NAME_AT = _SPEC_FIELDS.index("node_name")
_spec_values = attrgetter(*_SPEC_FIELDS)


def spec_with_node_name(spec: PodSpec, node_name: str) -> PodSpec:
    """``replace(spec, node_name=node_name)`` at half the cost (bound pods in the informer)."""
    values = list(_spec_values(spec))
    values[_NODE_NAME_AT] = node_name
    return PodSpec(*values)


SPEC_CACHE = SpecCache()


def _pod_spec(f: Fields) -> PodSpec:
    return SPEC_CACHE.decode(f)


def _decode_pod_spec(f: Fields) -> PodSpec:
    containers = tuple(_decode_container(c, init=False) for c in f.get_objs("containers"))
    if not containers:
        f.fail("containers", "at least one container is required")
    init_containers = tuple(_decode_container(c, init=True) for c in f.get_objs("initContainers"))
    _check_container_names(f, containers, init_containers)
    _check_host_ports(f, "containers", containers)
    for i, c in enumerate(init_containers):
        _check_host_ports(f, f"initContainers[{i}]", (c,))

    scheduler_name = f.get_str("schedulerName") or DEFAULT_SCHEDULER_NAME
    f.check_str("schedulerName", scheduler_name, names.dns1123_subdomain)
    priority_class = f.get_str("priorityClassName")
    if priority_class:
        f.check_str("priorityClassName", priority_class, names.dns1123_subdomain)
    preemption = f.get_str("preemptionPolicy") or "PreemptLowerPriority"
    f.check_one_of("preemptionPolicy", preemption, PREEMPTION_POLICIES)
    node_name = f.get_str("nodeName")
    if node_name:
        f.check_str("nodeName", node_name, names.dns1123_subdomain)
    affinity = f.get_obj("affinity")
    spec = PodSpec(
        containers=containers,
        init_containers=init_containers,
        scheduler_name=scheduler_name,
        priority=f.get_int("priority"),
        priority_class_name=priority_class,
        preemption_policy=preemption,
        overhead=decode_resource_list(f, "overhead", container=True),
        node_selector=f.get_str_map("nodeSelector", names.qualified_name, names.label_value),
        affinity=decode_affinity(affinity) if affinity is not None else None,
        tolerations=tuple(decode_toleration(t) for t in f.get_objs("tolerations")),
        topology_spread_constraints=_decode_spread_constraints(f),
        node_name=node_name,
        scheduling_gates=_decode_scheduling_gates(f),
        resources=_decode_pod_resources(f, containers, init_containers),
        pod_group_name=_decode_scheduling_group(f),
        resource_claims=_decode_resource_claims(f),
        volumes=decode_pod_volumes(f),
        kept=_kept(f, KEPT_SPEC_FIELDS),
    )
    _check_total_requests(f, spec)
    return spec


# Pod spec fields the scheduler reads only in part, kept whole (PodSpec.kept).
KEPT_SPEC_FIELDS = ("volumes", "resourceClaims")


def _kept(spec: Fields, fields: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    return tuple(
        (name, json.dumps(spec.data[name], sort_keys=True, separators=(",", ":"), default=str))
        for name in fields
        if spec.data.get(name)
    )


def _check_total_requests(f: Fields, spec: PodSpec) -> None:
    """Every quantity is within MAX_AMOUNT (decode_resource_list); so must be what the
    pod asks of a node in all (containers, init containers, overhead), as the ledger
    accounts it."""
    for resource, amount in spec_requests(spec).items():
        if amount > MAX_AMOUNT:
            shown = format_quantity(amount, resource)
            f.fail(
                None,
                f"the pod's {resource} requests add up to {shown}, more than the largest "
                f"amount distsched can account ({amount_limit(resource)})",
            )


POD_LEVEL_RESOURCES = (CPU, MEMORY)


def _decode_pod_resources(
    f: Fields, containers: tuple[Container, ...], init_containers: tuple[Container, ...]
) -> ResourceRequirements | None:
    """spec.resources, validated and defaulted like kube's PodLevelResources: cpu and memory
    only, requests <= limits, requests >= the containers' aggregate requests; a resource
    with a limit and no request gets the containers' aggregate when some container
    requests it, else the limit (kube's defaultPodRequests)."""
    resources = f.get_obj("resources")
    if resources is None:
        return None
    limits = decode_resource_list(resources, "limits", container=True)
    requests = decode_resource_list(resources, "requests", container=True)
    for key, group in (("requests", requests), ("limits", limits)):
        for resource in group:
            if resource not in POD_LEVEL_RESOURCES:
                resources.fail(
                    f"{key}.{resource}",
                    "unsupported pod-level resource: supported values: "
                    + ", ".join(quote(r) for r in POD_LEVEL_RESOURCES),
                )
    aggregate = aggregate_container_requests(containers, init_containers)
    for resource, limit in limits.items():
        if resource not in requests and resource not in aggregate:
            requests[resource] = limit
        if resource in requests and requests[resource] > limit:
            shown = format_quantity(limit, resource)
            resources.fail(
                f"requests.{resource}",
                f"must be less than or equal to pod-level {resource} limit of {shown}",
            )
    for resource, amount in requests.items():
        if amount < aggregate.get(resource, 0):
            shown = format_quantity(aggregate[resource], resource)
            resources.fail(
                f"requests.{resource}",
                f"must be greater than or equal to the containers' aggregate request of {shown}",
            )
    return ResourceRequirements(requests=requests, limits=limits)


def _check_container_names(
    f: Fields, containers: tuple[Container, ...], init_containers: tuple[Container, ...]
) -> None:
    seen: set[str] = set()
    for key, group in (("containers", containers), ("initContainers", init_containers)):
        for i, c in enumerate(group):
            if c.name in seen:
                f.fail(f"{key}[{i}].name", f"duplicate container name {quote(c.name)}")
            seen.add(c.name)


def _check_host_ports(f: Fields, key: str, containers: tuple[Container, ...]) -> None:
    """A pod may not ask twice for the same (protocol, hostIP, hostPort)."""
    seen: set[tuple[str, str, int]] = set()
    for c in containers:
        for p in c.ports:
            if p.host_port == 0:
                continue
            ident = (p.protocol, p.host_ip, p.host_port)
            if ident in seen:
                f.fail(key, f"duplicate hostPort {p.host_port}/{p.protocol} on {p.host_ip or '*'}")
            seen.add(ident)


def _decode_container(f: Fields, *, init: bool) -> Container:
    name = f.get_str("name", required=True)
    f.check_str("name", name, names.dns1123_label)
    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    resources = f.get_obj("resources")
    if resources is not None:
        limits = decode_resource_list(resources, "limits", container=True)
        requests = decode_resource_list(resources, "requests", container=True)
        for resource, limit in limits.items():
            requests.setdefault(resource, limit)  # the API server defaults requests to limits
            if requests[resource] > limit:
                shown = format_quantity(limit, resource)
                resources.fail(
                    "requests",
                    f"{resource}: must be less than or equal to {resource} limit of {shown}",
                )
    restart_policy = f.get_str("restartPolicy")
    if restart_policy:
        if not init:
            f.fail("restartPolicy", "may only be set on init containers")
        f.check_one_of("restartPolicy", restart_policy, ("Always",))
    return Container(
        name=name,
        image=f.get_str("image"),
        resources=ResourceRequirements(requests=requests, limits=limits),
        ports=tuple(_decode_port(p) for p in f.get_objs("ports")),
        restart_policy=restart_policy,
    )


def _decode_port(f: Fields) -> ContainerPort:
    container_port = f.get_int("containerPort", required=True)
    assert container_port is not None
    if not 1 <= container_port <= PORT_MAX:
        f.fail("containerPort", f"must be between 1 and {PORT_MAX}, got {container_port}")
    host_port = f.get_int("hostPort") or 0
    if not 0 <= host_port <= PORT_MAX:
        f.fail("hostPort", f"must be between 0 and {PORT_MAX}, got {host_port}")
    protocol = f.get_str("protocol") or "TCP"
    f.check_one_of("protocol", protocol, PROTOCOLS)
    host_ip = f.get_str("hostIP")
    if host_ip:
        f.check_str("hostIP", host_ip, names.ip_address)
    return ContainerPort(
        container_port=container_port, host_port=host_port, protocol=protocol, host_ip=host_ip
    )


def _decode_spread_constraints(spec: Fields) -> tuple[TopologySpreadConstraint, ...]:
    out: list[TopologySpreadConstraint] = []
    seen: set[tuple[str, str]] = set()
    for f in spec.get_objs("topologySpreadConstraints"):
        max_skew = f.get_int("maxSkew", required=True)
        assert max_skew is not None
        if max_skew < 1:
            f.fail("maxSkew", f"must be greater than or equal to 1, got {max_skew}")
        topology_key = f.get_str("topologyKey", required=True)
        f.check_str("topologyKey", topology_key, names.qualified_name)
        when = f.get_str("whenUnsatisfiable", required=True)
        f.check_one_of("whenUnsatisfiable", when, WHEN_UNSATISFIABLE)
        if (topology_key, when) in seen:
            f.fail(None, f"duplicate constraint for topologyKey {quote(topology_key)} and {when}")
        seen.add((topology_key, when))
        min_domains = f.get_int("minDomains")
        if min_domains is not None:
            if min_domains < 1:
                f.fail("minDomains", f"must be greater than or equal to 1, got {min_domains}")
            if when != "DoNotSchedule":
                f.fail("minDomains", f"requires whenUnsatisfiable=DoNotSchedule, not {when}")
        selector_fields = f.get_obj("labelSelector")
        selector = decode_label_selector(selector_fields) if selector_fields is not None else None
        match_label_keys = f.get_strs("matchLabelKeys", names.qualified_name)
        if match_label_keys:
            if selector is None:
                f.fail("matchLabelKeys", "may not be set when labelSelector is not set")
            selector_keys = set(selector.match_labels)
            selector_keys.update(e.key for e in selector.match_expressions)
            for i, key in enumerate(match_label_keys):
                if key in selector_keys:
                    f.fail(f"matchLabelKeys[{i}]", f"{quote(key)} is also in labelSelector")
        affinity_policy = f.get_str("nodeAffinityPolicy") or "Honor"
        f.check_one_of("nodeAffinityPolicy", affinity_policy, NODE_INCLUSION_POLICIES)
        taints_policy = f.get_str("nodeTaintsPolicy") or "Ignore"
        f.check_one_of("nodeTaintsPolicy", taints_policy, NODE_INCLUSION_POLICIES)
        out.append(
            TopologySpreadConstraint(
                max_skew=max_skew,
                topology_key=topology_key,
                when_unsatisfiable=when,
                label_selector=selector,
                min_domains=min_domains,
                match_label_keys=tuple(match_label_keys),
                node_affinity_policy=affinity_policy,
                node_taints_policy=taints_policy,
            )
        )
    return tuple(out)


def _decode_scheduling_gates(spec: Fields) -> tuple[str, ...]:
    return _decode_names(spec, "schedulingGates", names.qualified_name, "scheduling gate")


def _decode_resource_claims(spec: Fields) -> tuple[str, ...]:
    return _decode_names(spec, "resourceClaims", names.dns1123_label, "resource claim")


def _decode_names(
    spec: Fields, field: str, syntax: Callable[[str], str | None], what: str
) -> tuple[str, ...]:
    """The ``name`` of each entry of the list ``field``: required, of ``syntax``, unique."""
    found: list[str] = []
    for f in spec.get_objs(field):
        name = f.get_str("name", required=True)
        f.check_str("name", name, syntax)
        if name in found:
            f.fail("name", f"duplicate {what} {quote(name)}")
        found.append(name)
    return tuple(found)


def _decode_scheduling_group(spec: Fields) -> str:
    """spec.schedulingGroup.podGroupName (kube 1.36's PodSchedulingGroup: exactly one field,
    today only podGroupName, a DNS-1123 subdomain)."""
    group = spec.get_obj("schedulingGroup")
    if group is None:
        return ""
    name = group.get_str("podGroupName", required=True)
    group.check_str("podGroupName", name, names.dns1123_subdomain)
    return name


def _decode_pod_status(f: Fields) -> PodStatus:
    phase = f.get_str("phase") or "Pending"
    f.check_one_of("phase", phase, POD_PHASES)
    conditions = []
    for c in f.get_objs("conditions"):
        status = c.get_str("status", required=True)
        c.check_one_of("status", status, CONDITION_STATUSES)
        conditions.append(
            PodCondition(
                type=c.get_str("type", required=True),
                status=status,
                reason=c.get_str("reason"),
                message=c.get_str("message"),
                last_transition_time=c.get_str("lastTransitionTime"),
            )
        )
    nominated = f.get_str("nominatedNodeName")
    if nominated:
        f.check_str("nominatedNodeName", nominated, names.dns1123_subdomain)
    return PodStatus(phase=phase, conditions=tuple(conditions), nominated_node_name=nominated)


def _decode_node_spec(f: Fields) -> NodeSpec:
    taints = []
    seen: set[tuple[str, str]] = set()
    for i, t in enumerate(f.get_objs("taints")):
        taint = decode_taint(t)
        if (taint.key, taint.effect) in seen:
            f.fail(f"taints[{i}]", f"duplicate taint {quote(taint.key)} with effect {taint.effect}")
        seen.add((taint.key, taint.effect))
        taints.append(taint)
    return NodeSpec(unschedulable=f.get_bool("unschedulable"), taints=tuple(taints))


def _decode_node_status(f: Fields) -> NodeStatus:
    capacity = decode_resource_list(f, "capacity", container=False)
    if f.has("allocatable"):
        allocatable = decode_resource_list(f, "allocatable", container=False)
    else:
        allocatable = dict(capacity)
    conditions = []
    for c in f.get_objs("conditions"):
        status = c.get_str("status", required=True)
        c.check_one_of("status", status, CONDITION_STATUSES)
        conditions.append(NodeCondition(type=c.get_str("type", required=True), status=status))
    images = []
    for image in f.get_objs("images"):
        image_names = image.get_strs("names")
        size = image.get_int("sizeBytes", low=0, high=INT64_MAX) or 0
        images.append(ContainerImage(names=tuple(image_names), size_bytes=size))
    return NodeStatus(
        capacity=capacity,
        allocatable=allocatable,
        conditions=tuple(conditions),
        images=tuple(images),
    )


def object_from_dict(data: Any) -> Pod | Node:
    """A Pod or a Node, chosen by ``kind`` (required here)."""
    if not isinstance(data, dict):
        fail("", f"expected an object, got {type_name(data)}")
    root = Fields(data)
    kind = root.get_str("kind", required=True)
    if kind == "Pod":
        return pod_from_dict(data)
    if kind == "Node":
        return node_from_dict(data)
    root.fail("kind", f'unsupported kind {quote(kind)}: supported kinds: "Pod", "Node"')
