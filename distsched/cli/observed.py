"""What a kubelet or a controller would have written about pods, nodes and workloads,
as the scheduler's view stands in for it in ``distsched get`` and ``describe`` (the same
way everywhere), and kubectl's ages:

- a pod is *ready* when it is bound and not finished (no kubelet runs it: binding is as
  far as distsched takes a pod), unless its ``status.containerStatuses`` or ``Ready``
  condition (a pod mirrored from a real cluster) say otherwise; its READY column counts
  its containers accordingly, its STATUS is its phase (Pending until something writes
  Running), ``SchedulingGated`` while it has scheduling gates;
- a workload's READY / UP-TO-DATE / AVAILABLE / CURRENT count its pods as the store
  holds them (through their controller ownerReferences), since the controllers keep no
  workload status: ready and available are its ready pods;
- a node without conditions reads ``Ready`` (kubectl would print ``Unknown``): nothing
  reports conditions for the nodes of a standalone store, and the scheduler places pods
  on them.
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]

NONE = "<none>"
UNKNOWN = "<unknown>"
NODE_ROLE_PREFIX = "node-role.kubernetes.io/"
NODE_ROLE_LABEL = "kubernetes.io/role"
POD_TEMPLATE_HASH = "pod-template-hash"
FINISHED_PHASES = ("Succeeded", "Failed")


# --- time ---------------------------------------------------------------------------------


def wall_clock() -> float:
    """The time ages are counted to (seconds since the epoch; tests replace it)."""
    return time.time()


def parse_timestamp(value: Any) -> float | None:
    """Seconds since the epoch of an RFC 3339 timestamp (``2024-05-01T10:00:00Z``)."""
    if not isinstance(value, str) or not value:
        return None
    text = value.rstrip("Z").split(".")[0].split("+")[0]
    try:
        return float(calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return None


def human_duration(seconds: float) -> str:
    """k8s.io/apimachinery duration.HumanDuration: ``45s``, ``3m2s``, ``4h``, ``2d5h``."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 60 * 2:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rest = s % 60
        return f"{minutes}m" if rest == 0 else f"{minutes}m{rest}s"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h" if rest == 0 else f"{hours}h{rest}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d" if rest == 0 else f"{hours // 24}d{rest}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


def since(value: Any, now: float) -> str:
    """kubectl's translateTimestampSince: the age of a timestamp, ``<unknown>`` if none."""
    at = parse_timestamp(value)
    return UNKNOWN if at is None else human_duration(now - at)


def age(obj: Obj, now: float) -> str:
    return since((obj.get("metadata") or {}).get("creationTimestamp"), now)


# --- events -------------------------------------------------------------------------------
# Read in both shapes: core/v1 (involvedObject, message, count, first/lastTimestamp) and
# events.k8s.io/v1 (regarding, note, series, deprecated* fields), as kubectl reads either.


def event_first_seen(event: Obj) -> Any:
    return (
        event.get("firstTimestamp")
        or event.get("deprecatedFirstTimestamp")
        or event.get("eventTime")
    )


def event_last_seen(event: Obj) -> Any:
    series = event.get("series") or {}
    return (
        series.get("lastObservedTime")
        or event.get("lastTimestamp")
        or event.get("deprecatedLastTimestamp")
        or event_first_seen(event)
    )


def event_count(event: Obj) -> int:
    series = event.get("series") or {}
    return int(series.get("count") or event.get("count") or event.get("deprecatedCount") or 1)


def event_object(event: Obj) -> Mapping[str, Any]:
    return event.get("involvedObject") or event.get("regarding") or {}


def event_target(event: Obj) -> str:
    """kubectl's OBJECT cell: ``pod/web-1`` (the kind lower-cased)."""
    ref = event_object(event)
    kind = str(ref.get("kind") or "").lower()
    return f"{kind}/{ref['name']}" if ref.get("name") else kind


def event_message(event: Obj) -> str:
    return str(event.get("message") or event.get("note") or "").strip()


def event_source(event: Obj) -> str:
    """kubectl's formatEventSource: component (or reporting controller), then host (or
    reporting instance) after a comma when there is one."""
    source = event.get("source") or {}
    component = source.get("component") or event.get("reportingController") or ""
    component = component or event.get("reportingComponent") or ""
    instance = source.get("host") or event.get("reportingInstance") or ""
    return f"{component}, {instance}" if instance else str(component)


# --- pods ---------------------------------------------------------------------------------


def status_of(obj: Obj) -> Mapping[str, Any]:
    return obj.get("status") or {}


def pod_phase(pod: Obj) -> str:
    return str(status_of(pod).get("phase") or "Pending")


def pod_node(pod: Obj) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def pod_finished(pod: Obj) -> bool:
    return pod_phase(pod) in FINISHED_PHASES


def pod_is_ready(pod: Obj) -> bool:
    """Ready as this module's docstring says: the pod's Ready condition when it has one,
    else bound and not finished."""
    for condition in status_of(pod).get("conditions") or ():
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return bool(pod_node(pod)) and pod_phase(pod) in ("Pending", "Running")


def pod_status_reason(pod: Obj) -> str:
    """printPod's STATUS: the phase, or the reason the status, a scheduling gate, an init
    container or a container gives, ``Terminating`` while being deleted."""
    status = status_of(pod)
    spec = pod.get("spec") or {}
    phase = pod_phase(pod)
    reason = str(status.get("reason") or phase)
    for condition in status.get("conditions") or ():
        if condition.get("type") == "PodScheduled" and condition.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    if spec.get("schedulingGates") and not pod_node(pod):
        reason = "SchedulingGated"  # the API server sets that condition on a gated pod
    initializing = False
    init_specs = spec.get("initContainers") or ()
    for i, container in enumerate(status.get("initContainerStatuses") or ()):
        state = container.get("state") or {}
        terminated, waiting = state.get("terminated"), state.get("waiting")
        if terminated and terminated.get("exitCode", 0) == 0:
            continue
        if terminated:
            if terminated.get("reason"):
                reason = "Init:" + terminated["reason"]
            elif terminated.get("signal"):
                reason = f"Init:Signal:{terminated['signal']}"
            else:
                reason = f"Init:ExitCode:{terminated.get('exitCode', 0)}"
        elif waiting and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{i}/{len(init_specs)}"
        initializing = True
        break
    if not initializing:
        has_running = False
        for container in reversed(status.get("containerStatuses") or ()):
            state = container.get("state") or {}
            terminated, waiting = state.get("terminated"), state.get("waiting")
            if waiting and waiting.get("reason"):
                reason = waiting["reason"]
            elif terminated and terminated.get("reason"):
                reason = terminated["reason"]
            elif terminated:
                if terminated.get("signal"):
                    reason = f"Signal:{terminated['signal']}"
                else:
                    reason = f"ExitCode:{terminated.get('exitCode', 0)}"
            elif container.get("ready") and state.get("running") is not None:
                has_running = True
        if reason == "Completed" and has_running:
            ready = any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in status.get("conditions") or ()
            )
            reason = "Running" if ready else "NotReady"
    if (pod.get("metadata") or {}).get("deletionTimestamp") and phase not in FINISHED_PHASES:
        reason = "Terminating"
    return reason


def pod_ready_cell(pod: Obj) -> str:
    """READY: ready containers / containers."""
    spec = pod.get("spec") or {}
    total = len(spec.get("containers") or ())
    statuses = status_of(pod).get("containerStatuses")
    if statuses:
        ready = sum(
            1
            for c in statuses
            if c.get("ready") and ((c.get("state") or {}).get("running") is not None)
        )
        return f"{ready}/{total}"
    return f"{total if pod_is_ready(pod) else 0}/{total}"


def pod_restarts(pod: Obj) -> str:
    statuses = status_of(pod).get("containerStatuses") or ()
    return str(sum(int(c.get("restartCount") or 0) for c in statuses))


def readiness_gates_cell(pod: Obj) -> str:
    gates = (pod.get("spec") or {}).get("readinessGates") or ()
    if not gates:
        return NONE
    conditions = {c.get("type"): c.get("status") for c in status_of(pod).get("conditions") or ()}
    true = sum(1 for g in gates if conditions.get(g.get("conditionType")) == "True")
    return f"{true}/{len(gates)}"


# --- nodes --------------------------------------------------------------------------------


def node_roles(node: Obj) -> list[str]:
    roles = set()
    for key, value in ((node.get("metadata") or {}).get("labels") or {}).items():
        if key.startswith(NODE_ROLE_PREFIX) and key[len(NODE_ROLE_PREFIX) :]:
            roles.add(key[len(NODE_ROLE_PREFIX) :])
        elif key == NODE_ROLE_LABEL and value:
            roles.add(str(value))
    return sorted(roles)


def node_status_cell(node: Obj) -> str:
    conditions = status_of(node).get("conditions") or ()
    status = []
    for condition in conditions:
        if condition.get("type") == "Ready":
            status = ["Ready" if condition.get("status") == "True" else "NotReady"]
    if not status:
        status = ["Unknown" if conditions else "Ready"]
    if (node.get("spec") or {}).get("unschedulable"):
        status.append("SchedulingDisabled")
    return ",".join(status)


def format_taint(taint: Mapping[str, Any]) -> str:
    """v1.Taint.ToString: ``key=value:effect``, ``key:effect`` without a value."""
    key, value, effect = taint.get("key", ""), taint.get("value", ""), taint.get("effect", "")
    return f"{key}={value}:{effect}" if value else f"{key}:{effect}"


def node_address(node: Obj, kind: str) -> str:
    for address in status_of(node).get("addresses") or ():
        if address.get("type") == kind:
            return str(address.get("address", ""))
    return NONE


# --- workloads: status from their pods ----------------------------------------------------


def controller_uid(obj: Obj) -> str:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if isinstance(ref, dict) and ref.get("controller"):
            return str(ref.get("uid") or "")
    return ""


@dataclass
class Related:
    """What some rows need beyond their object: the time, and pods and ReplicaSets by
    the uid of their controller."""

    now: float = field(default_factory=lambda: wall_clock())
    owned: dict[str, list[Obj]] = field(default_factory=dict)

    @classmethod
    def of(cls, objects: Iterable[Obj], now: float | None = None) -> Related:
        related = cls() if now is None else cls(now=now)
        for obj in objects:
            uid = controller_uid(obj)
            if uid:
                related.owned.setdefault(uid, []).append(obj)
        return related

    def children(self, owner: Obj, kind: str) -> list[Obj]:
        uid = str((owner.get("metadata") or {}).get("uid") or "")
        return [o for o in self.owned.get(uid, ()) if o.get("kind") == kind] if uid else []

    def active_pods(self, owner: Obj) -> list[Obj]:
        return [p for p in self.children(owner, "Pod") if not pod_finished(p)]


def replicas_of(obj: Obj, key: str = "replicas") -> int:
    value = (obj.get("spec") or {}).get(key)
    return 1 if value is None else int(value)


def deployment_counts(deploy: Obj, related: Related) -> tuple[int, int, int]:
    """(ready, up-to-date, available) pods of a Deployment: those of its ReplicaSets;
    up to date: of the ReplicaSet whose pod-template-hash is its template's."""
    from distsched.controllers.naming import template_hash

    current = template_hash((deploy.get("spec") or {}).get("template") or {})
    ready = updated = 0
    for rs in related.children(deploy, "ReplicaSet"):
        pods = related.active_pods(rs)
        ready += sum(1 for p in pods if pod_is_ready(p))
        labels = (rs.get("metadata") or {}).get("labels") or {}
        if labels.get(POD_TEMPLATE_HASH) == current:
            updated += len(pods)
    return ready, updated, ready


def job_cells(job: Obj, related: Related) -> tuple[str, str, str]:
    """(STATUS, COMPLETIONS, DURATION) of a Job, from its status when a controller wrote
    one, else from its pods."""
    spec, status = job.get("spec") or {}, status_of(job)
    pods = related.children(job, "Pod")
    succeeded = int(status.get("succeeded") or sum(1 for p in pods if pod_phase(p) == "Succeeded"))
    failed = sum(1 for p in pods if pod_phase(p) == "Failed")
    completions = spec.get("completions")
    if completions is not None:
        cell = f"{succeeded}/{completions}"
    else:
        parallelism = int(spec.get("parallelism", 1))
        cell = f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"
    conditions = {c.get("type"): c.get("status") == "True" for c in status.get("conditions") or ()}
    backoff_limit = int(spec.get("backoffLimit", 6))
    if conditions.get("Complete") or (succeeded and succeeded >= int(completions or 1)):
        state = "Complete"
    elif conditions.get("Failed") or (pods and failed > backoff_limit):
        state = "Failed"
    elif (job.get("metadata") or {}).get("deletionTimestamp"):
        state = "Terminating"
    elif conditions.get("Suspended") or spec.get("suspend"):
        state = "Suspended"
    elif conditions.get("FailureTarget"):
        state = "FailureTarget"
    else:
        state = "Running"
    start = parse_timestamp(status.get("startTime"))
    if start is None and pods:
        created = [
            parse_timestamp((p.get("metadata") or {}).get("creationTimestamp")) for p in pods
        ]
        start = min((c for c in created if c is not None), default=None)
    end = parse_timestamp(status.get("completionTime"))
    duration = "" if start is None else human_duration((end or related.now) - start)
    return state, cell, duration
