"""The columns and cells of ``distsched get``, as kubectl's printers make them
(k8s.io/kubernetes pkg/printers/internalversion/printers.go): the same column names, the
same cells for the same object, ``-o wide`` adding the same columns. Where a cell needs
what a kubelet or a controller would have written, :mod:`distsched.cli.observed` stands in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from distsched.cli import observed
from distsched.cli.observed import (
    NONE,
    UNKNOWN,
    Related,
    age,
    deployment_counts,
    format_taint,
    job_cells,
    node_address,
    node_roles,
    node_status_cell,
    pod_is_ready,
    pod_node,
    pod_ready_cell,
    pod_restarts,
    pod_status_reason,
    readiness_gates_cell,
    replicas_of,
    since,
    status_of,
)
from distsched.model.kinds import API_VERSIONS, group_of
from distsched.model.volumes import BETA_STORAGE_CLASS_ANNOTATION, DEFAULT_CLASS_ANNOTATIONS

Obj = dict[str, Any]


# --- labels and selectors as kubectl formats them -----------------------------------------


def format_labels(labels: Mapping[str, Any] | None) -> str:
    """labels.FormatLabels: ``k=v,k2=v2`` sorted by key, ``<none>`` when empty."""
    if not labels:
        return NONE
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels))


def format_label_selector(selector: Mapping[str, Any] | None) -> str:
    """metav1.FormatLabelSelector: requirements sorted by key, ``<none>`` when empty."""
    if not isinstance(selector, Mapping):
        return NONE
    parts: list[tuple[str, str]] = []
    for key, value in (selector.get("matchLabels") or {}).items():
        parts.append((key, f"{key}={value}"))
    for expr in selector.get("matchExpressions") or ():
        key, op = expr.get("key", ""), expr.get("operator", "")
        values = ",".join(sorted(str(v) for v in expr.get("values") or ()))
        text = {
            "In": f"{key} in ({values})",
            "NotIn": f"{key} notin ({values})",
            "Exists": key,
            "DoesNotExist": f"!{key}",
        }.get(op, f"{key} {op} ({values})")
        parts.append((key, text))
    return ",".join(text for _, text in sorted(parts, key=lambda p: p[0])) or NONE


def containers_and_images(spec: Mapping[str, Any] | None) -> tuple[str, str]:
    """layoutContainerCells: container names and images, comma-joined."""
    containers = (spec or {}).get("containers") or ()
    names = ",".join(str(c.get("name", "")) for c in containers)
    images = ",".join(str(c.get("image", "")) for c in containers)
    return names, images


def template_spec(obj: Obj) -> Mapping[str, Any]:
    return (((obj.get("spec") or {}).get("template") or {}).get("spec")) or {}


# --- the printers -------------------------------------------------------------------------


@dataclass(frozen=True)
class Printer:
    columns: tuple[str, ...]
    cells: Callable[[Obj, Related], Sequence[Any]]
    wide_columns: tuple[str, ...] = ()
    wide_cells: Callable[[Obj, Related], Sequence[Any]] = lambda _o, _r: ()
    wide_is_whole_row: bool = False  # the wide columns replace the row (kubectl reorders)


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _pod(o: Obj, r: Related) -> list[Any]:
    return [_name(o), pod_ready_cell(o), pod_status_reason(o), pod_restarts(o), age(o, r.now)]


def _pod_wide(o: Obj, _r: Related) -> list[Any]:
    ips = status_of(o).get("podIPs") or ()
    ip = (ips[0].get("ip") if ips else "") or status_of(o).get("podIP") or NONE
    nominated = status_of(o).get("nominatedNodeName") or NONE
    return [ip, pod_node(o) or NONE, nominated, readiness_gates_cell(o)]


def _node(o: Obj, r: Related) -> list[Any]:
    version = (status_of(o).get("nodeInfo") or {}).get("kubeletVersion", "")
    roles = ",".join(node_roles(o)) or NONE
    return [_name(o), node_status_cell(o), roles, age(o, r.now), version]


def _node_wide(o: Obj, _r: Related) -> list[Any]:
    info = status_of(o).get("nodeInfo") or {}
    taints = [format_taint(t) for t in (o.get("spec") or {}).get("taints") or ()]
    return [
        node_address(o, "InternalIP"),
        node_address(o, "ExternalIP"),
        info.get("osImage") or UNKNOWN,
        info.get("kernelVersion") or UNKNOWN,
        info.get("containerRuntimeVersion") or UNKNOWN,
        ",".join(taints) or NONE,
    ]


def _template_wide(o: Obj, _r: Related) -> list[Any]:
    return [
        *containers_and_images(template_spec(o)),
        format_label_selector((o.get("spec") or {}).get("selector")),
    ]


def _deployment(o: Obj, r: Related) -> list[Any]:
    ready, updated, available = deployment_counts(o, r)
    return [_name(o), f"{ready}/{replicas_of(o)}", updated, available, age(o, r.now)]


def _replica_set(o: Obj, r: Related) -> list[Any]:
    pods = r.active_pods(o)
    ready = sum(1 for p in pods if pod_is_ready(p))
    return [_name(o), replicas_of(o), len(pods), ready, age(o, r.now)]


def _stateful_set(o: Obj, r: Related) -> list[Any]:
    ready = sum(1 for p in r.active_pods(o) if pod_is_ready(p))
    return [_name(o), f"{ready}/{replicas_of(o)}", age(o, r.now)]


def _daemon_set(o: Obj, r: Related) -> list[Any]:
    pods = r.active_pods(o)
    current = sum(1 for p in pods if pod_node(p))
    ready = sum(1 for p in pods if pod_is_ready(p))
    selector = format_labels(template_spec(o).get("nodeSelector"))
    return [_name(o), len(pods), current, ready, current, ready, selector, age(o, r.now)]


def _job(o: Obj, r: Related) -> list[Any]:
    return [_name(o), *job_cells(o, r), age(o, r.now)]


def _int_or_string(value: Any) -> str:
    return "N/A" if value is None else str(value)


def _pdb(o: Obj, r: Related) -> list[Any]:
    spec = o.get("spec") or {}
    allowed = int(status_of(o).get("disruptionsAllowed") or 0)
    return [
        _name(o),
        _int_or_string(spec.get("minAvailable")),
        _int_or_string(spec.get("maxUnavailable")),
        allowed,
        age(o, r.now),
    ]


def _namespace(o: Obj, r: Related) -> list[Any]:
    return [_name(o), status_of(o).get("phase") or "Active", age(o, r.now)]


def _priority_class(o: Obj, r: Related) -> list[Any]:
    default = "true" if o.get("globalDefault") else "false"
    policy = o.get("preemptionPolicy") or "PreemptLowerPriority"
    return [_name(o), o.get("value", 0), default, age(o, r.now), policy]


def _pod_group(o: Obj, r: Related) -> list[Any]:
    from distsched.model.errors import ManifestError
    from distsched.model.podgroups import PodGroup

    status = status_of(o)
    try:
        min_member: Any = PodGroup.from_dict(o).min_member
    except ManifestError:
        min_member = "?"
    counts = [status.get(n, 0) for n in ("scheduled", "running", "succeeded", "failed")]
    return [_name(o), status.get("phase", ""), min_member, *counts, age(o, r.now)]


def _service(o: Obj, r: Related) -> list[Any]:
    spec = o.get("spec") or {}
    kind = spec.get("type") or "ClusterIP"
    ips = spec.get("clusterIPs") or ([spec["clusterIP"]] if spec.get("clusterIP") else [])
    external = ",".join(spec.get("externalIPs") or ())
    if kind == "LoadBalancer" and not external:
        external = "<pending>"
    elif kind == "ExternalName":
        external = spec.get("externalName", "")
    ports = []
    for port in spec.get("ports") or ():
        protocol = port.get("protocol") or "TCP"
        node_port = port.get("nodePort")
        ports.append(
            f"{port.get('port')}:{node_port}/{protocol}"
            if node_port
            else f"{port.get('port')}/{protocol}"
        )
    return [
        _name(o),
        kind,
        ips[0] if ips else NONE,
        external or NONE,
        ",".join(ports) or NONE,
        age(o, r.now),
    ]


def _event(o: Obj, r: Related) -> list[Any]:
    last = since(observed.event_last_seen(o), r.now)
    return [
        last,
        o.get("type", ""),
        o.get("reason", ""),
        observed.event_target(o),
        observed.event_message(o),
    ]


def _event_wide(o: Obj, r: Related) -> list[Any]:
    return [
        since(observed.event_last_seen(o), r.now),
        o.get("type", ""),
        o.get("reason", ""),
        observed.event_target(o),
        observed.event_object(o).get("fieldPath", ""),
        observed.event_source(o),
        observed.event_message(o),
        since(observed.event_first_seen(o), r.now),
        observed.event_count(o),
        _name(o),
    ]


_ACCESS_MODES = (
    ("ReadWriteOnce", "RWO"), ("ReadOnlyMany", "ROX"), ("ReadWriteMany", "RWX"),
    ("ReadWriteOncePod", "RWOP"),
)  # fmt: skip


def _claim(o: Obj, r: Related) -> list[Any]:
    """printPersistentVolumeClaim: capacity and access modes once bound to a volume."""
    spec, status = o.get("spec") or {}, status_of(o)
    volume = spec.get("volumeName") or ""
    capacity = modes = ""
    if volume:
        capacity = str((status.get("capacity") or {}).get("storage") or "")
        modes = _modes(status.get("accessModes"))
    storage_class = _class_name(o)
    attributes = spec.get("volumeAttributesClassName") or "<unset>"
    phase = status.get("phase") or ""
    return [_name(o), phase, volume, capacity, modes, storage_class, attributes, age(o, r.now)]


def _class_name(o: Obj) -> str:
    """A claim's or PV's storage class: spec.storageClassName, else the beta annotation
    (kube's GetPersistentVolumeClaimClass / GetPersistentVolumeClass)."""
    name = (o.get("spec") or {}).get("storageClassName")
    if name is None:
        annotations = (o.get("metadata") or {}).get("annotations") or {}
        name = annotations.get(BETA_STORAGE_CLASS_ANNOTATION, "")
    return str(name)


def _modes(modes: Any) -> str:
    """kube's GetAccessModesAsString: RWO,ROX,RWX,RWOP, in that order, once each."""
    held = set(modes or ())
    return ",".join(short for mode, short in _ACCESS_MODES if mode in held)


def _volume(o: Obj, r: Related) -> list[Any]:
    """printPersistentVolume."""
    spec, status = o.get("spec") or {}, status_of(o)
    ref = spec.get("claimRef") or {}
    claim = f"{ref.get('namespace', '')}/{ref.get('name', '')}" if ref else ""
    storage_class = _class_name(o)
    phase = status.get("phase") or ""
    if (o.get("metadata") or {}).get("deletionTimestamp"):
        phase = "Terminating"
    return [
        _name(o),
        str((spec.get("capacity") or {}).get("storage") or "0"),
        _modes(spec.get("accessModes")),
        spec.get("persistentVolumeReclaimPolicy") or "",
        phase,
        claim,
        storage_class,
        spec.get("volumeAttributesClassName") or "<unset>",
        status.get("reason") or "",
        age(o, r.now),
    ]


def _storage_class(o: Obj, r: Related) -> list[Any]:
    """printStorageClass: "(default)" after the default class's name."""
    annotations = (o.get("metadata") or {}).get("annotations") or {}
    default = any(annotations.get(k) == "true" for k in DEFAULT_CLASS_ANNOTATIONS)
    return [
        _name(o) + (" (default)" if default else ""),
        o.get("provisioner") or "",
        o.get("reclaimPolicy") or "Delete",
        o.get("volumeBindingMode") or "Immediate",
        "true" if o.get("allowVolumeExpansion") else "false",
        age(o, r.now),
    ]


def _generic(o: Obj, r: Related) -> list[Any]:
    return [_name(o), age(o, r.now)]


_POD_TEMPLATE_WIDE = ("CONTAINERS", "IMAGES", "SELECTOR")
_EVENT_WIDE = (
    "LAST SEEN", "TYPE", "REASON", "OBJECT", "SUBOBJECT", "SOURCE", "MESSAGE",
    "FIRST SEEN", "COUNT", "NAME",
)  # fmt: skip

PRINTERS: dict[str, Printer] = {
    "Pod": Printer(
        ("NAME", "READY", "STATUS", "RESTARTS", "AGE"),
        _pod,
        ("IP", "NODE", "NOMINATED NODE", "READINESS GATES"),
        _pod_wide,
    ),
    "Node": Printer(
        ("NAME", "STATUS", "ROLES", "AGE", "VERSION"),
        _node,
        ("INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME", "TAINTS"),
        _node_wide,
    ),
    "Namespace": Printer(("NAME", "STATUS", "AGE"), _namespace),
    "PriorityClass": Printer(
        ("NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"), _priority_class
    ),
    "PodDisruptionBudget": Printer(
        ("NAME", "MIN AVAILABLE", "MAX UNAVAILABLE", "ALLOWED DISRUPTIONS", "AGE"), _pdb
    ),
    "Deployment": Printer(
        ("NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"),
        _deployment,
        _POD_TEMPLATE_WIDE,
        _template_wide,
    ),
    "ReplicaSet": Printer(
        ("NAME", "DESIRED", "CURRENT", "READY", "AGE"),
        _replica_set,
        _POD_TEMPLATE_WIDE,
        _template_wide,
    ),
    "StatefulSet": Printer(
        ("NAME", "READY", "AGE"),
        _stateful_set,
        ("CONTAINERS", "IMAGES"),
        lambda o, _r: list(containers_and_images(template_spec(o))),
    ),
    "DaemonSet": Printer(
        ("NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE", "NODE SELECTOR", "AGE"),
        _daemon_set,
        _POD_TEMPLATE_WIDE,
        _template_wide,
    ),
    "Job": Printer(
        ("NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"),
        _job,
        _POD_TEMPLATE_WIDE,
        _template_wide,
    ),
    # scheduler-plugins' printer columns, and SCHEDULED (its phase of before v0.27)
    "PodGroup": Printer(
        ("NAME", "PHASE", "MIN", "SCHEDULED", "RUNNING", "SUCCEEDED", "FAILED", "AGE"), _pod_group
    ),
    "Service": Printer(
        ("NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"),
        _service,
        ("SELECTOR",),
        lambda o, _r: [format_labels((o.get("spec") or {}).get("selector"))],
    ),
    "ConfigMap": Printer(
        ("NAME", "DATA", "AGE"),
        lambda o, r: [
            _name(o),
            len(o.get("data") or {}) + len(o.get("binaryData") or {}),
            age(o, r.now),
        ],
    ),
    "Secret": Printer(
        ("NAME", "TYPE", "DATA", "AGE"),
        lambda o, r: [
            _name(o),
            o.get("type") or "Opaque",
            len(o.get("data") or {}) + len(o.get("stringData") or {}),
            age(o, r.now),
        ],
    ),
    "ServiceAccount": Printer(
        ("NAME", "SECRETS", "AGE"),
        lambda o, r: [_name(o), len(o.get("secrets") or ()), age(o, r.now)],
    ),
    # kubectl's event columns (-o wide: its order, not the table's plus extra columns)
    "Event": Printer(
        ("LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"),
        _event,
        _EVENT_WIDE,
        _event_wide,
        wide_is_whole_row=True,
    ),
    "PersistentVolumeClaim": Printer(
        (
            "NAME",
            "STATUS",
            "VOLUME",
            "CAPACITY",
            "ACCESS MODES",
            "STORAGECLASS",
            "VOLUMEATTRIBUTESCLASS",
            "AGE",
        ),
        _claim,
        ("VOLUMEMODE",),
        lambda o, _r: [(o.get("spec") or {}).get("volumeMode") or "<unset>"],
    ),
    "PersistentVolume": Printer(
        (
            "NAME",
            "CAPACITY",
            "ACCESS MODES",
            "RECLAIM POLICY",
            "STATUS",
            "CLAIM",
            "STORAGECLASS",
            "VOLUMEATTRIBUTESCLASS",
            "REASON",
            "AGE",
        ),
        _volume,
        ("VOLUMEMODE",),
        lambda o, _r: [(o.get("spec") or {}).get("volumeMode") or "<unset>"],
    ),
    "StorageClass": Printer(
        (
            "NAME",
            "PROVISIONER",
            "RECLAIMPOLICY",
            "VOLUMEBINDINGMODE",
            "ALLOWVOLUMEEXPANSION",
            "AGE",
        ),
        _storage_class,
    ),
    "CSINode": Printer(
        ("NAME", "DRIVERS", "AGE"),
        lambda o, r: [_name(o), len((o.get("spec") or {}).get("drivers") or ()), age(o, r.now)],
    ),
    "NetworkPolicy": Printer(
        ("NAME", "POD-SELECTOR", "AGE"),
        lambda o, r: [
            _name(o),
            format_label_selector((o.get("spec") or {}).get("podSelector")),
            age(o, r.now),
        ],
    ),
}
GENERIC = Printer(("NAME", "AGE"), _generic)
"""Every other kind, as kubectl prints a custom resource without printer columns."""

RELATED_KINDS: Mapping[str, tuple[str, ...]] = {
    "Deployment": ("ReplicaSet", "Pod"),
    "ReplicaSet": ("Pod",),
    "StatefulSet": ("Pod",),
    "DaemonSet": ("Pod",),
    "Job": ("Pod",),
}
"""The kinds whose objects a kind's rows count (listed with it, in its namespaces)."""


def printer_of(kind: str) -> Printer:
    return PRINTERS.get(kind, GENERIC)


def columns(kind: str, *, wide: bool = False) -> list[str]:
    printer = printer_of(kind)
    if wide and printer.wide_is_whole_row:
        return list(printer.wide_columns)
    return [*printer.columns, *(printer.wide_columns if wide else ())]


def cells(kind: str, obj: Obj, related: Related, *, wide: bool = False) -> list[str]:
    printer = printer_of(kind)
    if wide and printer.wide_is_whole_row:
        row = list(printer.wide_cells(obj, related))
    else:
        row = list(printer.cells(obj, related))
        if wide:
            row += list(printer.wide_cells(obj, related))
    return ["" if c is None else str(c) for c in row]


def resource_name(kind: str, obj: Obj | None = None) -> str:
    """kubectl's qualified resource of a store kind: ``pods``, ``deployments.apps``,
    ``certificates.cert-manager.io``."""
    name, _, group = kind.partition(".")
    if not group:
        version = (obj or {}).get("apiVersion") or API_VERSIONS.get(kind, "v1")
        group = group_of(str(version))
    plural_name = _plural(name)
    return f"{plural_name}.{group}" if group else plural_name


def kind_prefix(kind: str, obj: Obj | None = None) -> str:
    """What ``-o name`` and a multi-kind table put before ``/name``: ``pod``,
    ``deployment.apps``, ``poddisruptionbudget.policy``."""
    name, _, group = kind.partition(".")
    if not group:
        version = (obj or {}).get("apiVersion") or API_VERSIONS.get(kind, "v1")
        group = group_of(str(version))
    return f"{name.lower()}.{group}" if group else name.lower()


def _plural(kind: str) -> str:
    from distsched.model.kinds import plural

    return plural(kind)
