"""``distsched describe KIND NAME``: kubectl describe's sections for what the store
holds (k8s.io/kubectl pkg/describe/describe.go: describePod, describeNode,
describeNodeResource), laid out by the same tabwriter; every other kind is described by
:mod:`distsched.cli.describe_kinds`.

A pod's events are the scheduler's (distsched/event_log.py): ``FailedScheduling`` with
kube's "0/N nodes are available: ..." message, ``Scheduled`` ("Successfully assigned
NS/NAME to NODE"), ``Preempted``; when it has none recorded (a store written before
events were kept, or a pod whose events went to an API server), what its explain record
and its PodScheduled condition tell. A node's
"Non-terminated Pods" and "Allocated resources" are the pods the store has bound to it.
Sections about what only a kubelet knows (System Info, Lease, container state and
restarts) are left out, and so are the containers' probes.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import click

from distsched import event_log
from distsched.cli import observed, printers
from distsched.cli.common import EXIT_RUNTIME, bad_input, make_context, redis_options
from distsched.cli.get import Reader, current_namespace, namespace_option, not_found
from distsched.cli.kindnames import KindNames
from distsched.model.quantity import CPU, MEMORY, is_byte_resource, parse_quantity
from distsched.output import DESCRIBE_MINWIDTH, DESCRIBE_PADDING, tabwrite

Obj = dict[str, Any]
DEFAULT_SCHEDULER = "default-scheduler"
EPHEMERAL_STORAGE = "ephemeral-storage"
STANDARD_RESOURCES = frozenset({CPU, MEMORY, EPHEMERAL_STORAGE, "pods", "storage"})


class Writer:
    """kubectl's PrefixWriter into a tabwriter: lines with an indentation level, and
    flushes (each flushed segment is aligned on its own)."""

    def __init__(self) -> None:
        self._segments: list[str] = []
        self._text: list[str] = []

    def write(self, level: int, text: str) -> None:
        self._text.append("  " * level + text)

    def flush(self) -> None:
        if self._text:
            self._segments.append(self._tabbed("".join(self._text)))
            self._text = []

    def value(self) -> str:
        self.flush()
        return "".join(self._segments)

    @staticmethod
    def _tabbed(text: str) -> str:
        return tabwrite(text, minwidth=DESCRIBE_MINWIDTH, padding=DESCRIBE_PADDING)


def rfc1123z(value: Any) -> str:
    """Go's time.RFC1123Z of a timestamp, in local time as kubectl prints it."""
    at = observed.parse_timestamp(value)
    if at is None:
        return "<unknown>"
    return time.strftime("%a, %d %b %Y %H:%M:%S %z", time.localtime(at))


def write_multiline(w: Writer, title: str, lines: Sequence[str]) -> None:
    """printLabelsMultiline / printTolerationsMultiline: the first value beside the title,
    the others aligned under it, ``<none>`` when there is none."""
    w.write(0, f"{title}:\t")
    if not lines:
        w.write(0, "<none>\n")
        return
    for i, line in enumerate(lines):
        w.write(0, ("" if i == 0 else "\t") + line + "\n")


def label_lines(labels: Mapping[str, Any] | None) -> list[str]:
    return [f"{k}={(labels or {})[k]}" for k in sorted(labels or {})]


def toleration_text(t: Mapping[str, Any]) -> str:
    text = str(t.get("key") or "")
    if t.get("value"):
        text += f"={t['value']}"
    if t.get("effect"):
        text += f":{t['effect']}"
    if t.get("operator") == "Exists" and not t.get("value"):
        text += " op=Exists" if t.get("key") or t.get("effect") else "op=Exists"
    if t.get("tolerationSeconds") is not None:
        text += f" for {t['tolerationSeconds']}s"
    return text


# --- quantities as kube's Quantity.String() writes them ------------------------------------

_DECIMAL = (("E", 18), ("P", 15), ("T", 12), ("G", 9), ("M", 6), ("k", 3))
_BINARY = (("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10))


def quantity(amount: int, resource: str) -> str:
    """An amount in canonical units as kube prints a quantity: cpu ``250m`` or ``2``,
    bytes with the largest exact binary (``128Mi``) or else decimal (``1G``) suffix."""
    if resource == CPU:
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if amount == 0:
        return "0"
    if is_byte_resource(resource):
        for suffix, shift in _BINARY:
            if amount % (1 << shift) == 0:
                return f"{amount >> shift}{suffix}"
    for suffix, exp in _DECIMAL:
        if amount % 10**exp == 0:
            return f"{amount // 10**exp}{suffix}"
    return str(amount)


def _amounts(resources: Mapping[str, Any] | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, value in (resources or {}).items():
        try:
            out[name] = parse_quantity(value, name)
        except ValueError:
            continue
    return out


def pod_requests_and_limits(pod: Obj) -> tuple[dict[str, int], dict[str, int]]:
    """resourcehelper.PodRequestsAndLimits: containers summed, each init container's
    amount taken when larger (a sidecar's added), pod-level resources replacing the
    containers', overhead on top."""
    spec = pod.get("spec") or {}
    totals: list[dict[str, int]] = []
    for part in ("requests", "limits"):
        total: dict[str, int] = {}
        for c in spec.get("containers") or ():
            for name, amount in _amounts((c.get("resources") or {}).get(part)).items():
                total[name] = total.get(name, 0) + amount
        sidecars: dict[str, int] = {}
        for c in spec.get("initContainers") or ():
            amounts = _amounts((c.get("resources") or {}).get(part))
            if c.get("restartPolicy") == "Always":
                for name, amount in amounts.items():
                    sidecars[name] = sidecars.get(name, 0) + amount
                    total[name] = total.get(name, 0) + amount
            else:
                for name, amount in amounts.items():
                    total[name] = max(total.get(name, 0), amount + sidecars.get(name, 0))
        total.update(_amounts((spec.get("resources") or {}).get(part)))
        for name, amount in _amounts(spec.get("overhead")).items():
            total[name] = total.get(name, 0) + amount
        totals.append(total)
    return totals[0], totals[1]


def qos_class(pod: Obj) -> str:
    """v1 qos.GetPodQOS."""
    spec = pod.get("spec") or {}
    containers = [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]
    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    guaranteed = True
    for c in containers:
        resources = c.get("resources") or {}
        c_requests = {
            k: v for k, v in _amounts(resources.get("requests")).items() if k in (CPU, MEMORY) and v
        }
        c_limits = {
            k: v for k, v in _amounts(resources.get("limits")).items() if k in (CPU, MEMORY) and v
        }
        requests.update(c_requests)
        limits.update(c_limits)
        if set(c_limits) != {CPU, MEMORY}:
            guaranteed = False
        if any(c_limits.get(k) != v for k, v in c_requests.items()):
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def write_containers(
    w: Writer, spec: Mapping[str, Any], space: str = "", pod: Obj | None = None
) -> None:
    """describeContainers of a pod (``space`` "", ``pod`` for its field references) or a
    pod template (``space`` "  ": the titles indented, names by one more space). What only
    a kubelet reports (container state, restarts, probes' results) is left out."""
    name_indent = " " if space else ""
    for title, key in (("Init Containers", "initContainers"), ("Containers", "containers")):
        containers = spec.get(key) or ()
        if key == "initContainers" and not containers:
            continue
        w.write(0, f"{space}{title}:{'' if containers else ' <none>'}\n")
        for c in containers:
            w.write(1, f"{name_indent}{c.get('name')}:\n")
            w.write(2, f"Image:\t{c.get('image', '')}\n")
            ports, host_ports = _ports(c, "containerPort"), _ports(c, "hostPort")
            w.write(2, f"Ports:\t{ports}\n" if "," in ports else f"Port:\t{ports or '<none>'}\n")
            w.write(
                2,
                f"Host Ports:\t{host_ports}\n"
                if "," in host_ports
                else f"Host Port:\t{host_ports or '<none>'}\n",
            )
            _command(w, c)
            _resources(w, c.get("resources"), 2)
            _environment(w, c, pod)
            _mounts(w, c)


def _command(w: Writer, container: Mapping[str, Any]) -> None:
    """describeContainerCommand: Command and Args, one line each (split at newlines)."""
    for title, key in (("Command", "command"), ("Args", "args")):
        if container.get(key):
            w.write(2, f"{title}:\n")
            for item in container[key]:
                for line in str(item).split("\n"):
                    w.write(3, f"{line}\n")


_POD_FIELDS = {
    "metadata.name": lambda p: p["metadata"].get("name", ""),
    "metadata.namespace": lambda p: p["metadata"].get("namespace", ""),
    "metadata.uid": lambda p: p["metadata"].get("uid", ""),
    "spec.nodeName": lambda p: (p.get("spec") or {}).get("nodeName", ""),
    "spec.serviceAccountName": lambda p: (p.get("spec") or {}).get("serviceAccountName", ""),
    "status.podIP": lambda p: (p.get("status") or {}).get("podIP", ""),
    "status.hostIP": lambda p: (p.get("status") or {}).get("hostIP", ""),
}


def _environment(w: Writer, container: Mapping[str, Any], pod: Obj | None) -> None:
    """describeContainerEnvFrom and describeContainerEnvVars (a pod template resolves no
    field reference, as kubectl's)."""
    sources = container.get("envFrom") or ()
    if sources:
        w.write(2, "Environment Variables from:\n")
        for source in sources:
            kind, ref = (
                ("ConfigMap", source.get("configMapRef"))
                if source.get("configMapRef")
                else ("Secret", source.get("secretRef") or {})
            )
            optional = "true" if (ref or {}).get("optional") else "false"
            prefix = f" with prefix '{source['prefix']}'" if source.get("prefix") else ""
            w.write(3, f"{(ref or {}).get('name', '')}\t{kind}{prefix}\tOptional: {optional}\n")
    env = container.get("env") or ()
    w.write(2, "Environment:\n" if env else "Environment:\t<none>\n")
    for var in env:
        name, source = var.get("name", ""), var.get("valueFrom")
        if not source:
            for i, line in enumerate(str(var.get("value", "")).split("\n")):
                w.write(3, f"{name}:\t{line}\n" if i == 0 else f"\t{line}\n")
        elif source.get("fieldRef"):
            ref = source["fieldRef"]
            path = ref.get("fieldPath", "")
            value = _POD_FIELDS.get(path, lambda _p: "")(pod) if pod is not None else ""
            w.write(3, f"{name}:\t{value} ({ref.get('apiVersion', 'v1')}:{path})\n")
        elif source.get("resourceFieldRef"):
            w.write(3, f"{name}:\t ({source['resourceFieldRef'].get('resource', '')})\n")
        elif source.get("secretKeyRef") or source.get("configMapKeyRef"):
            secret = source.get("secretKeyRef")
            ref = secret or source["configMapKeyRef"]
            where = (
                f"in secret '{ref.get('name', '')}'"
                if secret
                else (f"of config map '{ref.get('name', '')}'")
            )
            optional = "true" if ref.get("optional") else "false"
            w.write(
                3,
                f"{name}:\t<set to the key '{ref.get('key', '')}' {where}>\tOptional: {optional}\n",
            )


def _mounts(w: Writer, container: Mapping[str, Any]) -> None:
    """describeContainerVolumes: the volume mounts, sorted by mount path."""
    mounts = sorted(container.get("volumeMounts") or (), key=lambda m: str(m.get("mountPath")))
    w.write(2, "Mounts:\n" if mounts else "Mounts:\t<none>\n")
    for mount in mounts:
        flags = ["ro" if mount.get("readOnly") else "rw"]
        if mount.get("subPath"):
            flags.append(f'path="{mount["subPath"]}"')
        w.write(3, f"{mount.get('mountPath')} from {mount.get('name')} ({','.join(flags)})\n")


def write_volumes(w: Writer, spec: Mapping[str, Any], space: str = "") -> None:
    """describeVolumes (only a claim's details; other sources by name)."""
    volumes = spec.get("volumes") or ()
    if not volumes:
        w.write(0, f"{space}Volumes:\t<none>\n")
        return
    name_indent = " " if space else ""
    w.write(0, f"{space}Volumes:\n")
    for volume in volumes:
        w.write(1, f"{name_indent}{volume.get('name')}:\n")
        claim = volume.get("persistentVolumeClaim")
        if claim:
            what = "a reference to a PersistentVolumeClaim in the same namespace"
            w.write(2, f"Type:\tPersistentVolumeClaim ({what})\n")
            w.write(2, f"ClaimName:\t{claim.get('claimName', '')}\n")
            w.write(2, f"ReadOnly:\t{'true' if claim.get('readOnly') else 'false'}\n")
        else:
            w.write(2, "<unknown>\n")


# --- describe pod ------------------------------------------------------------------------


def pod_events(pod: Obj, explanation: Any, now: float) -> list[tuple[float, list[str]]]:
    """(time, [type, reason, age, from, message]) of the scheduler's events for a pod."""
    spec = pod.get("spec") or {}
    source = spec.get("schedulerName") or DEFAULT_SCHEDULER
    events: list[tuple[float, list[str]]] = []
    bound_at: float | None = None
    node = spec.get("nodeName")
    if node:
        for condition in (pod.get("status") or {}).get("conditions") or ():
            if condition.get("type") == "PodScheduled" and condition.get("status") == "True":
                bound_at = observed.parse_timestamp(condition.get("lastTransitionTime"))
    if explanation is not None and explanation.message and explanation.at_ms is not None:
        at = explanation.at_ms / 1000
        if not node or (bound_at is not None and at <= bound_at):
            source_name = explanation.profile or source
            age = observed.human_duration(now - at)
            events.append(
                (at, ["Warning", "FailedScheduling", age, source_name, explanation.message])
            )
    if node:
        meta = pod.get("metadata") or {}
        key = f"{meta.get('namespace', 'default')}/{meta.get('name')}"
        message = event_log.scheduled_message(key, node)
        age = observed.UNKNOWN if bound_at is None else observed.human_duration(now - bound_at)
        events.append((bound_at or now, ["Normal", "Scheduled", age, source, message]))
    return sorted(events, key=lambda e: e[0])


def event_rows(events: Iterable[Obj], now: float) -> list[tuple[float, list[str]]]:
    """(time, [type, reason, age, from, message]) of stored or recorded events, their age
    as kubectl describe writes a series: ``2m (x3 over 5m)``."""
    rows = []
    for event in events:
        last = observed.parse_timestamp(observed.event_last_seen(event))
        first = observed.since(observed.event_first_seen(event), now)
        count = observed.event_count(event)
        age = observed.since(observed.event_last_seen(event), now)
        if count > 1:
            age = f"{age} (x{count} over {first})"
        cells = [
            str(event.get("type") or ""),
            str(event.get("reason") or ""),
            age,
            observed.event_source(event),
            observed.event_message(event),
        ]
        rows.append((last or 0.0, cells))
    return sorted(rows, key=lambda row: row[0])


def write_events(w: Writer, events: Sequence[tuple[float, list[str]]]) -> None:
    """DescribeEvents."""
    if not events:
        w.write(0, "Events:\t<none>\n")
        return
    w.flush()
    w.write(0, "Events:\n  Type\tReason\tAge\tFrom\tMessage\n")
    w.write(1, "----\t------\t----\t----\t-------\n")
    for _, cells in events:
        w.write(1, "\t".join(cells[:4]) + "\t" + cells[4].strip() + "\n")


def _ports(container: Mapping[str, Any], key: str) -> str:
    return ",".join(
        f"{p.get(key, 0)}/{p.get('protocol') or 'TCP'}" for p in container.get("ports") or ()
    )


def _resources(w: Writer, resources: Mapping[str, Any] | None, level: int) -> None:
    """describeResources: Limits then Requests, resource names sorted."""
    for part, title in (("limits", "Limits"), ("requests", "Requests")):
        amounts = (resources or {}).get(part) or {}
        if amounts:
            w.write(level, f"{title}:\n")
        for name in sorted(amounts):
            try:
                shown = quantity(parse_quantity(amounts[name], name), name)
            except ValueError:
                shown = str(amounts[name])
            w.write(level + 1, f"{name}:\t{shown}\n")


def describe_pod(
    pod: Obj, explanation: Any, now: float, recorded: Sequence[Obj] | None = None
) -> str:
    """kubectl's pod describer; its events are ``recorded`` (the scheduler's event log),
    else what the pod and its explain record tell."""
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    w = Writer()
    w.write(0, f"Name:\t{meta['name']}\n")
    w.write(0, f"Namespace:\t{meta.get('namespace', '')}\n")
    if spec.get("priority") is not None:
        w.write(0, f"Priority:\t{spec['priority']}\n")
    if spec.get("priorityClassName"):
        w.write(0, f"Priority Class Name:\t{spec['priorityClassName']}\n")
    if spec.get("serviceAccountName"):
        w.write(0, f"Service Account:\t{spec['serviceAccountName']}\n")
    node = spec.get("nodeName")
    w.write(0, f"Node:\t{node}/{status.get('hostIP', '')}\n" if node else "Node:\t<none>\n")
    if status.get("startTime"):
        w.write(0, f"Start Time:\t{rfc1123z(status['startTime'])}\n")
    write_multiline(w, "Labels", label_lines(meta.get("labels")))
    write_multiline(w, "Annotations", label_lines(meta.get("annotations")))
    w.write(0, f"Status:\t{observed.pod_phase(pod)}\n")
    if status.get("reason"):
        w.write(0, f"Reason:\t{status['reason']}\n")
    if status.get("message"):
        w.write(0, f"Message:\t{status['message']}\n")
    w.write(0, f"IP:\t{status.get('podIP', '')}\n")
    ips = [ip.get("ip", "") for ip in status.get("podIPs") or ()]
    if ips:
        w.write(0, "IPs:\n")
        for ip in ips:
            w.write(1, f"IP:\t{ip}\n")
    else:
        w.write(0, "IPs:\t<none>\n")
    for ref in meta.get("ownerReferences") or ():
        if ref.get("controller"):
            w.write(0, f"Controlled By:\t{ref.get('kind')}/{ref.get('name')}\n")
    if status.get("nominatedNodeName"):
        w.write(0, f"NominatedNodeName:\t{status['nominatedNodeName']}\n")
    write_containers(w, spec, pod=pod)
    gates = spec.get("readinessGates") or ()
    conditions = status.get("conditions") or ()
    if gates:
        w.write(0, "Readiness Gates:\n  Type\tStatus\n")
        for gate in gates:
            found = next(
                (c for c in conditions if c.get("type") == gate.get("conditionType")), None
            )
            w.write(
                1, f"{gate.get('conditionType')} \t{found.get('status') if found else '<none>'} \n"
            )
    if conditions:
        w.write(0, "Conditions:\n  Type\tStatus\n")
        for c in conditions:
            w.write(1, f"{c.get('type')} \t{c.get('status')} \n")
    write_volumes(w, spec)
    w.write(0, f"QoS Class:\t{qos_class(pod)}\n")
    write_multiline(w, "Node-Selectors", label_lines(spec.get("nodeSelector")))
    tolerations = sorted(spec.get("tolerations") or (), key=lambda t: str(t.get("key") or ""))
    write_multiline(w, "Tolerations", [toleration_text(t) for t in tolerations])
    if recorded is None:  # the scheduler recorded none (the bridge writes them elsewhere)
        write_events(w, pod_events(pod, explanation, now))
    else:
        write_events(w, event_rows(recorded, now))
    return w.value()


# --- describe node -----------------------------------------------------------------------


def _percent(amount: int, of: int) -> int:
    return int(amount / of * 100) if of else 0


def describe_node(node: Obj, pods: Iterable[Obj], now: float) -> str:
    meta, spec, status = node["metadata"], node.get("spec") or {}, node.get("status") or {}
    w = Writer()
    w.write(0, f"Name:\t{meta['name']}\n")
    w.write(0, f"Roles:\t{','.join(observed.node_roles(node)) or '<none>'}\n")
    write_multiline(w, "Labels", label_lines(meta.get("labels")))
    write_multiline(w, "Annotations", label_lines(meta.get("annotations")))
    w.write(0, f"CreationTimestamp:\t{rfc1123z(meta.get('creationTimestamp'))}\n")
    taints = sorted(
        spec.get("taints") or (), key=lambda t: f"{t.get('effect', '')},{t.get('key', '')}"
    )
    write_multiline(w, "Taints", [observed.format_taint(t) for t in taints])
    w.write(0, f"Unschedulable:\t{'true' if spec.get('unschedulable') else 'false'}\n")
    conditions = status.get("conditions") or ()
    if conditions:
        w.write(
            0,
            "Conditions:\n  Type\tStatus\tLastHeartbeatTime\tLastTransitionTime\tReason\tMessage\n",
        )
        w.write(1, "----\t------\t-----------------\t------------------\t------\t-------\n")
        for c in conditions:
            w.write(
                1,
                f"{c.get('type')} \t{c.get('status')} \t{rfc1123z(c.get('lastHeartbeatTime'))} \t"
                f"{rfc1123z(c.get('lastTransitionTime'))} \t{c.get('reason', '')} \t"
                f"{c.get('message', '')}\n",
            )
    w.write(0, "Addresses:\n")
    for address in status.get("addresses") or ():
        w.write(1, f"{address.get('type')}:\t{address.get('address')}\n")
    for title, key in (("Capacity", "capacity"), ("Allocatable", "allocatable")):
        resources = status.get(key) or {}
        if resources:
            w.write(0, f"{title}:\n")
            for name in sorted(resources):
                w.write(0, f"  {name}:\t{resources[name]}\n")
    if spec.get("providerID"):
        w.write(0, f"ProviderID:\t{spec['providerID']}\n")
    on_node = [p for p in pods if not observed.pod_finished(p)]
    allocatable = _amounts(status.get("allocatable") or status.get("capacity"))
    w.write(0, f"Non-terminated Pods:\t({len(on_node)} in total)\n")
    w.write(1, "Namespace\tName\t\tCPU Requests\tCPU Limits\tMemory Requests\tMemory Limits\tAge\n")
    w.write(1, "---------\t----\t\t------------\t----------\t---------------\t-------------\t---\n")
    total_requests: dict[str, int] = {}
    total_limits: dict[str, int] = {}
    for pod in on_node:
        requests, limits = pod_requests_and_limits(pod)
        for name, amount in requests.items():
            total_requests[name] = total_requests.get(name, 0) + amount
        for name, amount in limits.items():
            total_limits[name] = total_limits.get(name, 0) + amount
        cells = []
        for resource in (CPU, MEMORY):
            for amounts in (requests, limits):
                amount = amounts.get(resource, 0)
                share = _percent(amount, allocatable.get(resource, 0))
                cells.append(f"{quantity(amount, resource)} ({share}%)")
        pod_meta = pod["metadata"]
        age = observed.age(pod, now)
        w.write(
            1,
            f"{pod_meta.get('namespace', '')}\t{pod_meta['name']}\t\t"
            + "\t".join(cells)
            + f"\t{age}\n",
        )
    w.write(
        0, "Allocated resources:\n  (Total limits may be over 100 percent, i.e., overcommitted.)\n"
    )
    w.write(1, "Resource\tRequests\tLimits\n")
    w.write(1, "--------\t--------\t------\n")
    for resource in (CPU, MEMORY, EPHEMERAL_STORAGE):
        of = allocatable.get(resource, 0)
        req, lim = total_requests.get(resource, 0), total_limits.get(resource, 0)
        w.write(
            1,
            f"{resource}\t{quantity(req, resource)} ({_percent(req, of)}%)\t"
            f"{quantity(lim, resource)} ({_percent(lim, of)}%)\n",
        )
    extended = sorted(r for r in allocatable if r not in STANDARD_RESOURCES)
    for resource in (r for r in extended if r.startswith("hugepages-")):
        of, req, lim = (
            allocatable[resource],
            total_requests.get(resource, 0),
            total_limits.get(resource, 0),
        )
        w.write(
            1,
            f"{resource}\t{quantity(req, resource)} ({_percent(req, of)}%)\t"
            f"{quantity(lim, resource)} ({_percent(lim, of)}%)\n",
        )
    for resource in (r for r in extended if not r.startswith("hugepages-")):
        req, lim = total_requests.get(resource, 0), total_limits.get(resource, 0)
        w.write(1, f"{resource}\t{quantity(req, resource)}\t{quantity(lim, resource)}\n")
    write_events(w, [])
    return w.value()


def events_about(obj: Obj, reader: Any) -> list[Obj]:
    """Events (stored or recorded) whose object is ``obj``: its kind, namespace and name,
    and its uid where the event names one (another incarnation's are not its own)."""
    meta = obj.get("metadata") or {}
    namespace, uid = meta.get("namespace") or None, meta.get("uid")

    def about(event: Obj) -> bool:
        ref = observed.event_object(event)
        return (
            ref.get("kind") == obj.get("kind")
            and ref.get("name") == meta.get("name")
            and (ref.get("namespace") or None) == namespace
            and not (uid and ref.get("uid") and ref["uid"] != uid)
        )

    return [e for e in reader.list("Event") if about(e)]


@click.command()
@click.argument("kind")
@click.argument("names", nargs=-1)
@namespace_option
@redis_options
def describe(kind: str, names: tuple[str, ...], namespace: str | None, **kwargs: Any) -> None:
    """Show objects in detail, as kubectl describe does (`describe pod web-1`, `describe
    node node-a`, `describe deploy/web`, `describe pdb web`, any stored kind). A pod's
    events are the scheduler's (FailedScheduling with "0/N nodes are available: ...",
    Scheduled, Preempted); a node's "Allocated resources" sum the requests of the pods
    bound to it; a workload's counts are its pods in the store."""
    from distsched.explain_record import read_explanation
    from distsched.store import Store

    ctx = make_context(kwargs)
    store = Store(ctx.client(), ctx.keys)
    kinds = KindNames(lambda: store)
    if "/" in kind:
        kind, _, first = kind.partition("/")
        names = (first, *names)
    if not names:
        bad_input("give the name of the object to describe: describe KIND NAME or KIND/NAME")
    try:
        store_kind = kinds.resolve(kind)
    except ValueError as exc:
        bad_input(str(exc))
    ns = current_namespace(namespace)
    now = observed.wall_clock()
    outputs: list[str] = []
    missing = False
    reader = Reader(store, kinds, ns)
    for name in names:
        key = f"{ns}/{name}" if store_kind == "Pod" else name
        obj = store.get(store_kind, key) if store_kind in ("Pod", "Node") else None
        if store_kind not in ("Pod", "Node"):
            obj = reader.get(store_kind, name, ns)
        if obj is None:
            print(not_found(store_kind, name), file=sys.stderr)
            missing = True
            continue
        if store_kind == "Pod":
            explanation = read_explanation(ctx.client(), ctx.keys, key)
            recorded = events_about(obj, reader) or None  # none: what the pod tells
            outputs.append(describe_pod(obj, explanation, now, recorded))
        elif store_kind == "Node":
            bound = [p for p in store.list("Pod")[0] if observed.pod_node(p) == name]
            outputs.append(describe_node(obj, bound, now))
        else:
            from distsched.cli.describe_kinds import describe_object

            related = observed.Related.of(
                (o for k in printers.RELATED_KINDS.get(store_kind, ()) for o in reader.list(k)),
                now,
            )
            outputs.append(describe_object(store_kind, obj, related, events_about(obj, reader)))
    if outputs:
        print("\n\n".join(o.rstrip("\n") for o in outputs))
    if missing:
        sys.exit(EXIT_RUNTIME)
