"""``distsched describe`` for every kind but pods and nodes: kubectl's describers of the
workloads (describe.go: DeploymentDescriber, ReplicaSetDescriber, StatefulSetDescriber,
DaemonSetDescriber, JobDescriber), of PodDisruptionBudgets, and its generic describer of
every other kind (custom resources, PodGroups, Services...: the object's fields as a
tree of "Smart Labels").

A workload's counts come from its pods in the store, as ``get`` counts them (no
controller writes workload status: see :mod:`distsched.cli.observed`); "Pods Status"
counts the pods' phases as stored; a PodDisruptionBudget's status is the disruption
controller's. Defaults the API server would have written into the
spec (a Deployment's RollingUpdate 25%/25%, a StatefulSet's partition 0, a Job's
backoffLimit 6...) are shown as it would show them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from distsched.cli import observed, printers
from distsched.cli.describe import (
    Writer,
    event_rows,
    label_lines,
    rfc1123z,
    toleration_text,
    write_containers,
    write_events,
    write_multiline,
    write_volumes,
)
from distsched.cli.observed import Related

Obj = dict[str, Any]

WORKLOAD_DESCRIBERS = ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job")
ACRONYMS = frozenset({"API", "URL", "UID", "OSB", "GUID"})
_CAMEL_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+|[^A-Za-z\d]+")


def _meta_lines(w: Writer, obj: Obj) -> None:
    meta = obj.get("metadata") or {}
    write_multiline(w, "Labels", label_lines(meta.get("labels")))
    write_multiline(w, "Annotations", label_lines(meta.get("annotations")))


def _selector(obj: Obj) -> str:
    return printers.format_label_selector((obj.get("spec") or {}).get("selector"))


def _pods_status(pods: Iterable[Obj]) -> str:
    phases = [observed.pod_phase(p) for p in pods]
    running, waiting = phases.count("Running"), phases.count("Pending")
    succeeded, failed = phases.count("Succeeded"), phases.count("Failed")
    return f"{running} Running / {waiting} Waiting / {succeeded} Succeeded / {failed} Failed"


def _controlled_by(w: Writer, obj: Obj) -> None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller"):
            w.write(0, f"Controlled By:\t{ref.get('kind')}/{ref.get('name')}\n")


def write_pod_template(w: Writer, template: Mapping[str, Any] | None) -> None:
    """DescribePodTemplate."""
    w.write(0, "Pod Template:\n")
    meta = (template or {}).get("metadata") or {}
    spec = (template or {}).get("spec") or {}
    write_multiline(w, "  Labels", label_lines(meta.get("labels")))
    if meta.get("annotations"):
        write_multiline(w, "  Annotations", label_lines(meta.get("annotations")))
    if spec.get("serviceAccountName"):
        w.write(1, f"Service Account:\t{spec['serviceAccountName']}\n")
    write_containers(w, spec, "  ")
    write_volumes(w, spec, "  ")
    if spec.get("priorityClassName"):
        w.write(1, f"Priority Class Name:\t{spec['priorityClassName']}\n")
    write_multiline(w, "  Node-Selectors", label_lines(spec.get("nodeSelector")))
    tolerations = sorted(spec.get("tolerations") or (), key=lambda t: str(t.get("key") or ""))
    write_multiline(w, "  Tolerations", [toleration_text(t) for t in tolerations])


def _conditions(w: Writer, obj: Obj) -> None:
    conditions = observed.status_of(obj).get("conditions") or ()
    if conditions:
        w.write(0, "Conditions:\n  Type\tStatus\tReason\n")
        w.write(1, "----\t------\t------\n")
        for c in conditions:
            w.write(1, f"{c.get('type')} \t{c.get('status')}\t{c.get('reason', '')}\n")


def _replica_sets_line(sets: Sequence[Obj], related: Related) -> str:
    """printReplicaSetsByLabels: ``name (created/desired replicas created)``."""
    return (
        ", ".join(
            f"{rs['metadata']['name']} ({len(related.active_pods(rs))}/"
            f"{observed.replicas_of(rs)} replicas created)"
            for rs in sets
        )
        or observed.NONE
    )


def describe_deployment(w: Writer, d: Obj, related: Related) -> None:
    from distsched.controllers.naming import template_hash

    spec = d.get("spec") or {}
    meta = d["metadata"]
    w.write(0, f"Name:\t{meta['name']}\n")
    w.write(0, f"Namespace:\t{meta.get('namespace', '')}\n")
    w.write(0, f"CreationTimestamp:\t{rfc1123z(meta.get('creationTimestamp'))}\n")
    _meta_lines(w, d)
    w.write(0, f"Selector:\t{_selector(d)}\n")
    desired = observed.replicas_of(d)
    sets = related.children(d, "ReplicaSet")
    total = sum(len(related.active_pods(rs)) for rs in sets)
    _ready, updated, available = observed.deployment_counts(d, related)
    unavailable = max(desired - available, 0)
    w.write(
        0,
        f"Replicas:\t{desired} desired | {updated} updated | {total} total | "
        f"{available} available | {unavailable} unavailable\n",
    )
    strategy = spec.get("strategy") or {}
    kind = strategy.get("type") or "RollingUpdate"
    w.write(0, f"StrategyType:\t{kind}\n")
    w.write(0, f"MinReadySeconds:\t{spec.get('minReadySeconds', 0)}\n")
    if kind == "RollingUpdate":
        rolling = strategy.get("rollingUpdate") or {}
        unavail, surge = rolling.get("maxUnavailable", "25%"), rolling.get("maxSurge", "25%")
        w.write(0, f"RollingUpdateStrategy:\t{unavail} max unavailable, {surge} max surge\n")
    write_pod_template(w, spec.get("template"))
    _conditions(w, d)
    current = template_hash(spec.get("template") or {})

    def is_new(rs: Obj) -> bool:
        labels = rs["metadata"].get("labels") or {}
        return labels.get(observed.POD_TEMPLATE_HASH) == current

    w.write(
        0, f"OldReplicaSets:\t{_replica_sets_line([s for s in sets if not is_new(s)], related)}\n"
    )
    w.write(0, f"NewReplicaSet:\t{_replica_sets_line([s for s in sets if is_new(s)], related)}\n")


def describe_replica_set(w: Writer, rs: Obj, related: Related) -> None:
    meta = rs["metadata"]
    w.write(0, f"Name:\t{meta['name']}\n")
    w.write(0, f"Namespace:\t{meta.get('namespace', '')}\n")
    w.write(0, f"Selector:\t{_selector(rs)}\n")
    _meta_lines(w, rs)
    _controlled_by(w, rs)
    pods = related.children(rs, "Pod")
    current = len(related.active_pods(rs))
    w.write(0, f"Replicas:\t{current} current / {observed.replicas_of(rs)} desired\n")
    w.write(0, f"Pods Status:\t{_pods_status(pods)}\n")
    write_pod_template(w, (rs.get("spec") or {}).get("template"))
    _conditions(w, rs)


def describe_stateful_set(w: Writer, sts: Obj, related: Related) -> None:
    meta, spec = sts["metadata"], sts.get("spec") or {}
    w.write(0, f"Name:\t{meta['name']}\n")
    w.write(0, f"Namespace:\t{meta.get('namespace', '')}\n")
    w.write(0, f"CreationTimestamp:\t{rfc1123z(meta.get('creationTimestamp'))}\n")
    w.write(0, f"Selector:\t{_selector(sts)}\n")
    _meta_lines(w, sts)
    total = len(related.active_pods(sts))
    w.write(0, f"Replicas:\t{observed.replicas_of(sts)} desired | {total} total\n")
    strategy = spec.get("updateStrategy") or {}
    kind = strategy.get("type") or "RollingUpdate"
    w.write(0, f"Update Strategy:\t{kind}\n")
    if kind == "RollingUpdate":
        rolling = strategy.get("rollingUpdate") or {}
        w.write(1, f"Partition:\t{rolling.get('partition', 0)}\n")
        if rolling.get("maxUnavailable") is not None:
            w.write(1, f"MaxUnavailable:\t{rolling['maxUnavailable']}\n")
    w.write(0, f"Pods Status:\t{_pods_status(related.children(sts, 'Pod'))}\n")
    write_pod_template(w, spec.get("template"))
    claims = spec.get("volumeClaimTemplates") or ()
    if not claims:
        w.write(0, "Volume Claims:\t<none>\n")
    else:
        w.write(0, "Volume Claims:\n")
        for claim in claims:
            cmeta, cspec = claim.get("metadata") or {}, claim.get("spec") or {}
            w.write(1, f"Name:\t{cmeta.get('name', '')}\n")
            w.write(1, f"StorageClass:\t{cspec.get('storageClassName', '')}\n")
            write_multiline(w, "  Labels", label_lines(cmeta.get("labels")))
            write_multiline(w, "  Annotations", label_lines(cmeta.get("annotations")))
            storage = ((cspec.get("resources") or {}).get("requests") or {}).get("storage")
            w.write(1, f"Capacity:\t{storage or '<default>'}\n")
            w.write(1, f"Access Modes:\t{','.join(cspec.get('accessModes') or ())}\n")


def describe_daemon_set(w: Writer, ds: Obj, related: Related) -> None:
    meta = ds["metadata"]
    template_spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
    pods = related.active_pods(ds)
    current = sum(1 for p in pods if observed.pod_node(p))
    available = sum(1 for p in pods if observed.pod_is_ready(p))
    w.write(0, f"Name:\t{meta['name']}\n")
    w.write(0, f"Namespace:\t{meta.get('namespace', '')}\n")
    w.write(0, f"Selector:\t{_selector(ds)}\n")
    node_selector = printers.format_labels(template_spec.get("nodeSelector"))
    w.write(0, f"Node-Selector:\t{node_selector}\n")
    _meta_lines(w, ds)
    # kubectl writes these five without a tab: they are not aligned
    w.write(0, f"Desired Number of Nodes Scheduled: {len(pods)}\n")
    w.write(0, f"Current Number of Nodes Scheduled: {current}\n")
    w.write(0, f"Number of Nodes Scheduled with Up-to-date Pods: {current}\n")
    w.write(0, f"Number of Nodes Scheduled with Available Pods: {available}\n")
    w.write(0, "Number of Nodes Misscheduled: 0\n")
    w.write(0, f"Pods Status:\t{_pods_status(related.children(ds, 'Pod'))}\n")
    write_pod_template(w, (ds.get("spec") or {}).get("template"))


def describe_job(w: Writer, job: Obj, related: Related) -> None:
    meta, spec = job["metadata"], job.get("spec") or {}
    w.write(0, f"Name:\t{meta['name']}\n")
    w.write(0, f"Namespace:\t{meta.get('namespace', '')}\n")
    w.write(0, f"Selector:\t{_selector(job)}\n")
    _meta_lines(w, job)
    _controlled_by(w, job)
    parallelism = spec.get("parallelism", 1)
    completions = spec.get("completions")
    if completions is None and spec.get("parallelism") is None:
        completions = 1  # the API server's default when neither is set
    w.write(0, f"Parallelism:\t{parallelism}\n")
    w.write(0, f"Completions:\t{'<unset>' if completions is None else completions}\n")
    w.write(0, f"Completion Mode:\t{spec.get('completionMode') or 'NonIndexed'}\n")
    w.write(0, f"Suspend:\t{'true' if spec.get('suspend') else 'false'}\n")
    w.write(0, f"Backoff Limit:\t{spec.get('backoffLimit', 6)}\n")
    if spec.get("activeDeadlineSeconds") is not None:
        w.write(0, f"Active Deadline Seconds:\t{spec['activeDeadlineSeconds']}s\n")
    pods = related.children(job, "Pod")
    active = [p for p in pods if not observed.pod_finished(p)]
    ready = sum(1 for p in active if observed.pod_is_ready(p))
    phases = [observed.pod_phase(p) for p in pods]
    w.write(
        0,
        f"Pods Statuses:\t{len(active)} Active ({ready} Ready) / "
        f"{phases.count('Succeeded')} Succeeded / {phases.count('Failed')} Failed\n",
    )
    write_pod_template(w, spec.get("template"))


def describe_pdb(w: Writer, pdb: Obj) -> None:
    """PodDisruptionBudgetDescriber; the status is the disruption controller's (the
    controller role), zeros before it has counted."""
    meta, spec = pdb["metadata"], pdb.get("spec") or {}
    w.write(0, f"Name:\t{meta['name']}\n")
    w.write(0, f"Namespace:\t{meta.get('namespace', '')}\n")
    if spec.get("minAvailable") is not None:
        w.write(0, f"Min available:\t{spec['minAvailable']}\n")
    elif spec.get("maxUnavailable") is not None:
        w.write(0, f"Max unavailable:\t{spec['maxUnavailable']}\n")
    selector = spec.get("selector")
    w.write(0, f"Selector:\t{_selector(pdb) if selector is not None else '<unset>'}\n")
    status = observed.status_of(pdb)
    w.write(0, "Status:\n")
    w.write(2, f"Allowed disruptions:\t{status.get('disruptionsAllowed', 0)}\n")
    w.write(2, f"Current:\t{status.get('currentHealthy', 0)}\n")
    w.write(2, f"Desired:\t{status.get('desiredHealthy', 0)}\n")
    w.write(2, f"Total:\t{status.get('expectedPods', 0)}\n")


# --- the generic describer ---------------------------------------------------------------

_GENERIC_SKIP = frozenset(
    {".metadata.managedFields", ".metadata.name", ".metadata.namespace"}
    | {".metadata.labels", ".metadata.annotations"}
)


def smart_label(field: str) -> str:
    """kubectl's smartLabelFor: ``minMember`` -> ``Min Member``, ``apiVersion`` -> ``API
    Version``; a name with characters other than letters and '-' stays as it is."""
    if any(not (c.isalpha() or c == "-") for c in field):
        return field
    parts = []
    for part in _CAMEL_PART.findall(field):
        if part == "_":
            continue
        parts.append(part.upper() if part.upper() in ACRONYMS else part[:1].upper() + part[1:])
    return " ".join(parts)


def _go_value(value: Any) -> str:
    """%v of a decoded JSON value."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _unstructured(w: Writer, level: int, content: Mapping[str, Any], prefix: str) -> None:
    """printUnstructuredContent: fields sorted, maps and lists as nested blocks."""
    for field in sorted(content):
        value = content[field]
        path = f"{prefix}.{field}"
        if path in _GENERIC_SKIP:
            continue
        if isinstance(value, Mapping):
            w.write(level, f"{smart_label(field)}:\n")
            _unstructured(w, level + 1, value, path)
        elif isinstance(value, list):
            w.write(level, f"{smart_label(field)}:\n")
            for child in value:
                if isinstance(child, Mapping):
                    _unstructured(w, level + 1, child, path)
                else:
                    w.write(level + 1, f"{_go_value(child)}\n")
        else:
            w.write(level, f"{smart_label(field)}:\t{_go_value(value)}\n")


def describe_generic(w: Writer, obj: Obj) -> None:
    meta = obj.get("metadata") or {}
    w.write(0, f"Name:\t{meta.get('name', '')}\n")
    w.write(0, f"Namespace:\t{meta.get('namespace', '')}\n")
    _meta_lines(w, obj)
    _unstructured(w, 0, obj, "")


def describe_object(kind: str, obj: Obj, related: Related, events: Sequence[Obj]) -> str:
    """The describer of ``kind`` (not Pod or Node), its events last."""
    w = Writer()
    if kind == "Deployment":
        describe_deployment(w, obj, related)
    elif kind == "ReplicaSet":
        describe_replica_set(w, obj, related)
    elif kind == "StatefulSet":
        describe_stateful_set(w, obj, related)
    elif kind == "DaemonSet":
        describe_daemon_set(w, obj, related)
    elif kind == "Job":
        describe_job(w, obj, related)
    elif kind == "PodDisruptionBudget":
        describe_pdb(w, obj)
    else:
        describe_generic(w, obj)
    write_events(w, event_rows(events, related.now))
    return w.value()
