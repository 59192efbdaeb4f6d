"""Hypothesis strategies for valid Pods and Nodes (valid as the validator defines it)."""

from __future__ import annotations

from hypothesis import strategies as st

from distsched.model import (
    Affinity,
    Container,
    ContainerImage,
    ContainerPort,
    LabelSelector,
    LabelSelectorRequirement,
    Node,
    NodeAffinity,
    NodeCondition,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    NodeSpec,
    NodeStatus,
    ObjectMeta,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    PodCondition,
    PodSpec,
    PodStatus,
    PreferredSchedulingTerm,
    ResourceRequirements,
    Taint,
    Toleration,
    TopologySpreadConstraint,
    WeightedPodAffinityTerm,
)

INT32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
INT64_NONNEG = st.integers(min_value=0, max_value=2**63 - 1)
TEXT = st.text(max_size=8)

_LOWER_ALNUM = "abcdefghijklmnopqrstuvwxyz0123456789"
_ALNUM = _LOWER_ALNUM + "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _bracketed(ends: str, middle: str) -> st.SearchStrategy[str]:
    """Strings of ``ends`` characters at both ends and ``ends + middle`` inside."""
    end = st.sampled_from(ends)
    inner = st.text(alphabet=ends + middle, max_size=8)
    return st.one_of(end, st.builds(lambda a, m, z: a + m + z, end, inner, end))


dns_labels = _bracketed(_LOWER_ALNUM, "-")
dns_subdomains = st.lists(dns_labels, min_size=1, max_size=3).map(".".join)
_name_parts = _bracketed(_ALNUM, "-_.")
qualified_names = st.one_of(
    _name_parts, st.tuples(dns_subdomains, _name_parts).map(lambda t: f"{t[0]}/{t[1]}")
)
label_values = st.one_of(st.just(""), _name_parts)
label_maps = st.dictionaries(qualified_names, label_values, max_size=3)

CONTAINER_RESOURCES = ["cpu", "memory", "ephemeral-storage", "hugepages-2Mi", "example.com/gpu"]
NODE_RESOURCES = [*CONTAINER_RESOURCES, "pods"]
amounts = st.integers(min_value=0, max_value=10**15)


def resource_lists(names: list[str]) -> st.SearchStrategy[dict[str, int]]:
    return st.dictionaries(st.sampled_from(names), amounts, max_size=len(names))


@st.composite
def requirements(draw: st.DrawFn) -> ResourceRequirements:
    """Limits only for requested resources and never below the request (the decoder
    defaults missing requests to limits and rejects requests above limits)."""
    requests = draw(resource_lists(CONTAINER_RESOURCES))
    limits = {
        name: amount + draw(st.integers(min_value=0, max_value=10**6))
        for name, amount in requests.items()
        if draw(st.booleans())
    }
    return ResourceRequirements(requests=requests, limits=limits)


ports = st.builds(
    ContainerPort,
    container_port=st.integers(min_value=1, max_value=65535),
    host_port=st.one_of(st.just(0), st.integers(min_value=1, max_value=65535)),
    protocol=st.sampled_from(["TCP", "UDP", "SCTP"]),
    host_ip=st.sampled_from(["", "10.0.0.1", "0.0.0.0", "::1"]),
)


def _unique_host_ports(port_list: list[ContainerPort]) -> tuple[ContainerPort, ...]:
    seen: set[tuple[str, str, int]] = set()
    out = []
    for p in port_list:
        ident = (p.protocol, p.host_ip, p.host_port)
        if p.host_port and ident in seen:
            continue
        seen.add(ident)
        out.append(p)
    return tuple(out)


def containers(name: str, *, init: bool) -> st.SearchStrategy[Container]:
    return st.builds(
        Container,
        name=st.just(name),
        image=st.sampled_from(["", "nginx:1.25", "registry.example.com/app@sha256:abc"]),
        resources=requirements(),
        ports=st.lists(ports, max_size=3).map(_unique_host_ports),
        restart_policy=st.sampled_from(["", "Always"]) if init else st.just(""),
    )


@st.composite
def label_requirements(draw: st.DrawFn) -> LabelSelectorRequirement:
    operator = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]))
    values: tuple[str, ...] = ()
    if operator in ("In", "NotIn"):
        values = tuple(draw(st.lists(label_values, min_size=1, max_size=3)))
    return LabelSelectorRequirement(key=draw(qualified_names), operator=operator, values=values)


label_selectors = st.builds(
    LabelSelector,
    match_labels=label_maps,
    match_expressions=st.lists(label_requirements(), max_size=2).map(tuple),
)


@st.composite
def node_requirements(draw: st.DrawFn) -> NodeSelectorRequirement:
    operator = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]))
    values: tuple[str, ...] = ()
    if operator in ("In", "NotIn"):
        values = tuple(draw(st.lists(label_values, min_size=1, max_size=3)))
    elif operator in ("Gt", "Lt"):
        values = (str(draw(st.integers(min_value=-(2**63), max_value=2**63 - 1))),)
    return NodeSelectorRequirement(key=draw(qualified_names), operator=operator, values=values)


field_requirements = st.builds(
    NodeSelectorRequirement,
    key=st.just("metadata.name"),
    operator=st.sampled_from(["In", "NotIn"]),
    values=dns_subdomains.map(lambda v: (v,)),
)
node_selector_terms = st.builds(
    NodeSelectorTerm,
    match_expressions=st.lists(node_requirements(), max_size=2).map(tuple),
    match_fields=st.lists(field_requirements, max_size=1).map(tuple),
)
weights = st.integers(min_value=1, max_value=100)
node_affinities = st.builds(
    NodeAffinity,
    required=st.one_of(st.none(), st.lists(node_selector_terms, min_size=1, max_size=2).map(tuple)),
    preferred=st.lists(
        st.builds(PreferredSchedulingTerm, weight=weights, preference=node_selector_terms),
        max_size=2,
    ).map(tuple),
)
pod_affinity_terms = st.builds(
    PodAffinityTerm,
    topology_key=qualified_names,
    label_selector=st.one_of(st.none(), label_selectors),
    namespaces=st.lists(dns_labels, max_size=2).map(tuple),
    namespace_selector=st.one_of(st.none(), label_selectors),
)
pod_affinities = st.builds(
    PodAffinity,
    required=st.lists(pod_affinity_terms, max_size=2).map(tuple),
    preferred=st.lists(
        st.builds(WeightedPodAffinityTerm, weight=weights, term=pod_affinity_terms), max_size=2
    ).map(tuple),
)
affinities = st.builds(
    Affinity,
    node_affinity=st.one_of(st.none(), node_affinities),
    pod_affinity=st.one_of(st.none(), pod_affinities),
    pod_anti_affinity=st.one_of(st.none(), pod_affinities),
)

EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"]


@st.composite
def tolerations(draw: st.DrawFn) -> Toleration:
    key = draw(st.one_of(st.just(""), qualified_names))
    operator = "Exists" if not key else draw(st.sampled_from(["Equal", "Exists"]))
    value = draw(label_values) if operator == "Equal" else ""
    effect = draw(st.sampled_from(["", *EFFECTS]))
    seconds = None
    if effect == "NoExecute":
        seconds = draw(st.one_of(st.none(), st.integers(min_value=-(2**63), max_value=2**63 - 1)))
    return Toleration(
        key=key, operator=operator, value=value, effect=effect, toleration_seconds=seconds
    )


@st.composite
def spread_constraints(draw: st.DrawFn) -> TopologySpreadConstraint:
    when = draw(st.sampled_from(["DoNotSchedule", "ScheduleAnyway"]))
    selector = draw(st.one_of(st.none(), label_selectors))
    match_label_keys: tuple[str, ...] = ()
    if selector is not None:
        taken = set(selector.match_labels) | {e.key for e in selector.match_expressions}
        match_label_keys = tuple(
            k for k in draw(st.lists(qualified_names, max_size=2, unique=True)) if k not in taken
        )
    min_domains = None
    if when == "DoNotSchedule":
        min_domains = draw(st.one_of(st.none(), st.integers(min_value=1, max_value=2**31 - 1)))
    return TopologySpreadConstraint(
        max_skew=draw(st.integers(min_value=1, max_value=2**31 - 1)),
        topology_key=draw(qualified_names),
        when_unsatisfiable=when,
        label_selector=selector,
        min_domains=min_domains,
        match_label_keys=match_label_keys,
        node_affinity_policy=draw(st.sampled_from(["Honor", "Ignore"])),
        node_taints_policy=draw(st.sampled_from(["Honor", "Ignore"])),
    )


def metas(*, namespaced: bool) -> st.SearchStrategy[ObjectMeta]:
    return st.builds(
        ObjectMeta,
        name=dns_subdomains,
        namespace=dns_labels if namespaced else st.just(""),
        uid=TEXT,
        labels=label_maps,
        annotations=st.dictionaries(qualified_names, st.text(max_size=20), max_size=3),
        creation_timestamp=st.sampled_from(["", "2024-05-01T10:00:00Z"]),
        resource_version=st.sampled_from(["", "1", "123456"]),
    )


@st.composite
def pod_specs(draw: st.DrawFn) -> PodSpec:
    names = draw(st.lists(dns_labels, min_size=1, max_size=5, unique=True))
    split = draw(st.integers(min_value=1, max_value=len(names)))
    regular = [draw(containers(n, init=False)) for n in names[:split]]
    # The pod as a whole may not ask twice for the same host port.
    seen: set[tuple[str, str, int]] = set()
    deduped = []
    for c in regular:
        kept = []
        for p in c.ports:
            ident = (p.protocol, p.host_ip, p.host_port)
            if p.host_port and ident in seen:
                continue
            seen.add(ident)
            kept.append(p)
        deduped.append(
            Container(
                name=c.name,
                image=c.image,
                resources=c.resources,
                ports=tuple(kept),
                restart_policy=c.restart_policy,
            )
        )
    return PodSpec(
        containers=tuple(deduped),
        init_containers=tuple(draw(containers(n, init=True)) for n in names[split:]),
        scheduler_name=draw(st.one_of(st.just("default-scheduler"), dns_subdomains)),
        priority=draw(st.one_of(st.none(), INT32)),
        priority_class_name=draw(st.one_of(st.just(""), dns_subdomains)),
        preemption_policy=draw(st.sampled_from(["PreemptLowerPriority", "Never"])),
        overhead=draw(resource_lists(CONTAINER_RESOURCES)),
        node_selector=draw(label_maps),
        affinity=draw(st.one_of(st.none(), affinities)),
        tolerations=tuple(draw(st.lists(tolerations(), max_size=3))),
        topology_spread_constraints=tuple(
            draw(
                st.lists(
                    spread_constraints(),
                    max_size=3,
                    unique_by=lambda c: (c.topology_key, c.when_unsatisfiable),
                )
            )
        ),
        node_name=draw(st.one_of(st.just(""), dns_subdomains)),
        scheduling_gates=tuple(draw(st.lists(qualified_names, max_size=2, unique=True))),
        pod_group_name=draw(st.one_of(st.just(""), dns_subdomains)),
    )


STATUSES = st.sampled_from(["True", "False", "Unknown"])
pod_statuses = st.builds(
    PodStatus,
    phase=st.sampled_from(["Pending", "Running", "Succeeded", "Failed", "Unknown"]),
    conditions=st.lists(
        st.builds(
            PodCondition,
            type=st.text(min_size=1, max_size=8),
            status=STATUSES,
            reason=TEXT,
            message=TEXT,
        ),
        max_size=2,
    ).map(tuple),
    nominated_node_name=st.one_of(st.just(""), dns_subdomains),
)
pods = st.builds(Pod, metadata=metas(namespaced=True), spec=pod_specs(), status=pod_statuses)

taints = st.lists(
    st.builds(Taint, key=qualified_names, effect=st.sampled_from(EFFECTS), value=label_values),
    max_size=3,
    unique_by=lambda t: (t.key, t.effect),
).map(tuple)
node_statuses = st.builds(
    NodeStatus,
    capacity=resource_lists(NODE_RESOURCES),
    allocatable=resource_lists(NODE_RESOURCES),
    conditions=st.lists(
        st.builds(NodeCondition, type=st.text(min_size=1, max_size=8), status=STATUSES),
        max_size=2,
    ).map(tuple),
    images=st.lists(
        st.builds(
            ContainerImage,
            names=st.lists(TEXT, max_size=2).map(tuple),
            size_bytes=INT64_NONNEG,
        ),
        max_size=2,
    ).map(tuple),
)
nodes = st.builds(
    Node,
    metadata=metas(namespaced=False),
    spec=st.builds(NodeSpec, unschedulable=st.booleans(), taints=taints),
    status=node_statuses,
)
