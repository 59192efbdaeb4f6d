"""What-if replay of a real cluster: ``distsched replay -f dump.json``.

Input: the JSON of ``kubectl get nodes,pods -A -o json`` (a ``kind: List``; ``distsched
get pods,nodes -o json`` has the same shape), optionally with priorityclasses,
poddisruptionbudgets and namespaces in the same List or in more files.

What happens (:func:`replay`):

1. The dump is read and validated as ``apply`` validates manifests (exit 2 naming file,
   document, item and field). Dropped on the way, as kube-scheduler ignores or owns
   them: Succeeded/Failed pods, the built-in ``system-*`` PriorityClasses, the server's
   bookkeeping (resourceVersion, managedFields). A pod that already carries
   ``spec.priority`` keeps it (the cluster admitted it); others go through priority
   admission.
2. Bound pods stay where they are; with ``pending_only=False`` every pod is unbound first
   and the whole cluster is scheduled from scratch.
3. The objects go into a fresh deployment on the given Redis (by default an embedded
   server started for the replay and stopped after it), scheduling worker and binder
   processes run until every pending pod is bound or parked unschedulable, and the
   report is read back: per pod where it went, for each pod that fits nowhere kube's
   ``0/N nodes are available: ...`` line, per node the requested share of allocatable cpu,
   memory and pods before and after, and the pods preemption evicted.

A PodDisruptionBudget keeps the status the cluster gave it; one without a status gets
the disruption controller's, computed once from the loaded pods (no controller role
runs: the dump holds pods, not their workloads' desired state).
"""

from __future__ import annotations

import json
import secrets
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from distsched.apply import prepare
from distsched.connection import RedisOptions, connect
from distsched.controllers.disruption import budget_status
from distsched.explain_record import read_explanation
from distsched.keys import Keys
from distsched.launcher import RoleProcess, redis_args, role_env, stop_all
from distsched.model import Node, Pod, load_manifests, pod_requests
from distsched.model.manifest import KubeObject, Location
from distsched.queue_types import ACTIVE, BACKOFF, INFLIGHT, SUB_QUEUES
from distsched.store import Store, parse_meta
from distsched.store.codec import Obj

TERMINAL_PHASES = ("Succeeded", "Failed")
RESOURCES = ("cpu", "memory", "pods")


class ReplayError(RuntimeError):
    """The replay could not run (a role died, it did not settle in time)."""


@dataclass
class Report:
    nodes: int = 0
    kept: int = 0
    pending: int = 0
    placements: dict[str, str] = field(default_factory=dict)  # pending pod -> node
    unschedulable: dict[str, str] = field(default_factory=dict)  # pod -> kube's message
    preempted: list[str] = field(default_factory=list)
    before: dict[str, dict[str, float]] = field(default_factory=dict)
    after: dict[str, dict[str, float]] = field(default_factory=dict)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "pods": {
                "kept": self.kept,
                "pending": self.pending,
                "scheduled": len(self.placements),
                "unschedulable": len(self.unschedulable),
                "preempted": len(self.preempted),
            },
            "placements": dict(sorted(self.placements.items())),
            "unschedulable": dict(sorted(self.unschedulable.items())),
            "preempted": sorted(self.preempted),
            "utilisation": {"before": self.before, "after": self.after},
            "seconds": round(self.seconds, 2),
        }


def load_dump(paths: Sequence[str], *, pending_only: bool) -> list[Obj]:
    """The objects to load, validated and admitted (ManifestError on bad input)."""
    objects: list[KubeObject] = []
    locations: list[Location] = []
    for path in paths:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
        source = "<stdin>" if path == "-" else path
        cleaned = _clean(json.loads(text)) if text.lstrip().startswith("{") else None
        loaded = load_manifests(source, json.dumps(cleaned) if cleaned is not None else text)
        for i, obj in enumerate(loaded):
            objects.append(obj)
            locations.append((source, 1, i + 1))
    classes = [o.to_dict() for o in objects if o.kind == "PriorityClass"]
    admitted = prepare(
        [o for o in objects if not _keeps_priority(o)],
        [loc for o, loc in zip(objects, locations, strict=True) if not _keeps_priority(o)],
        classes,
    )
    out: list[Obj] = []
    fresh = iter(admitted)
    for obj in objects:
        data = obj.to_dict() if _keeps_priority(obj) else next(fresh)
        if data["kind"] == "Pod" and not pending_only:
            data = _unbound(data)
        out.append(data)
    return out


def _keeps_priority(obj: KubeObject) -> bool:
    return isinstance(obj, Pod) and obj.spec.priority is not None


def _clean(data: Any) -> Any:
    """Drop what the scheduler never sees or the server owns from a kubectl dump."""
    if not isinstance(data, dict) or not isinstance(data.get("items"), list):
        return data
    items = []
    for item in data["items"]:
        if not isinstance(item, dict):
            items.append(item)
            continue
        kind = item.get("kind")
        raw_meta = item.get("metadata")
        meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
        if kind == "PriorityClass" and str(meta.get("name", "")).startswith("system-"):
            continue
        if kind == "Pod" and (item.get("status") or {}).get("phase") in TERMINAL_PHASES:
            continue
        meta = {k: v for k, v in meta.items() if k not in ("managedFields", "resourceVersion")}
        items.append({**item, "metadata": meta})
    return {**data, "items": items}


def _unbound(pod: Obj) -> Obj:
    spec = {k: v for k, v in (pod.get("spec") or {}).items() if k != "nodeName"}
    status = {k: v for k, v in (pod.get("status") or {}).items() if k == "phase"}
    status["phase"] = "Pending"
    return {**pod, "spec": spec, "status": status}


def utilisation(store: Store) -> dict[str, dict[str, float]]:
    """Per node: requested / allocatable of cpu, memory and pods (0..1, rounded)."""
    nodes = {o["metadata"]["name"]: Node.from_dict(o) for o in store.list("Node")[0]}
    used: dict[str, dict[str, int]] = {name: dict.fromkeys(RESOURCES, 0) for name in nodes}
    for obj in store.list("Pod")[0]:
        node_name = (obj.get("spec") or {}).get("nodeName")
        if node_name not in used:
            continue
        requests = pod_requests(Pod.from_dict(obj))
        used[node_name]["pods"] += 1
        for resource in ("cpu", "memory"):
            used[node_name][resource] += requests.get(resource, 0)
    out = {}
    for name, node in sorted(nodes.items()):
        allocatable = node.status.allocatable
        out[name] = {
            r: round(used[name][r] / allocatable[r], 3) if allocatable.get(r) else 0.0
            for r in RESOURCES
        }
    return out


def replay(
    objects: list[Obj],
    options: RedisOptions,
    *,
    workers: int = 1,
    binders: int = 1,
    timeout_s: float = 300.0,
    keys: Keys | None = None,
    keep: bool = False,
    log_dir: Path | None = None,
) -> Report:
    """Load ``objects`` into a fresh deployment on ``options``' Redis (``keys``, by default
    a random ``replay-*`` one), schedule, report; the deployment's keys are deleted after
    unless ``keep``. The roles' logs go to ``log_dir`` (default: a temporary directory)."""
    keys = keys or Keys(f"replay-{secrets.token_hex(4)}")
    client = connect(options)
    logs = log_dir or Path(tempfile.mkdtemp(prefix="distsched-replay-"))
    try:
        return _run(client, keys, objects, options, workers, binders, timeout_s, logs)
    finally:
        if not keep:
            _forget(client, keys)
        client.close()


def _run(
    client: redis.Redis,
    keys: Keys,
    objects: list[Obj],
    options: RedisOptions,
    workers: int,
    binders: int,
    timeout_s: float,
    logs: Path,
) -> Report:
    store = Store(client, keys)
    order = {"Namespace": 0, "PriorityClass": 0, "Node": 1, "PodDisruptionBudget": 2, "Pod": 3}
    objects = sorted(objects, key=lambda o: order.get(o["kind"], 4))
    for start in range(0, len(objects), 500):
        store.create_many(objects[start : start + 500])
    _budget_statuses(store)
    pods, _ = store.list("Pod")
    pending = {_key(p) for p in pods if not (p.get("spec") or {}).get("nodeName")}
    kept = {_key(p) for p in pods} - pending
    report = Report(nodes=len(store.list("Node")[0]), kept=len(kept), pending=len(pending))
    report.before = utilisation(store)
    started = time.monotonic()
    children = _spawn_roles(options, keys, workers, binders, logs)
    try:
        _wait_settled(client, keys, pending, children, timeout_s)
    except ReplayError as exc:
        raise ReplayError(f"{exc} (role logs in {logs})") from None
    finally:
        stop_all(children)
    report.seconds = time.monotonic() - started
    now = {_key(p): p for p in store.list("Pod")[0]}
    for key in sorted(pending):
        pod = now.get(key)
        if pod is None:
            continue
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            report.placements[key] = node
        else:
            explanation = read_explanation(client, keys, key)
            message = explanation.message if explanation is not None else ""
            report.unschedulable[key] = message or _not_served(pod)
    report.preempted = sorted(k for k in kept | pending if k not in now)
    report.after = utilisation(store)
    return report


def _key(pod: Obj) -> str:
    return f"{pod['metadata'].get('namespace', 'default')}/{pod['metadata']['name']}"


def _not_served(pod: Obj) -> str:
    name = (pod.get("spec") or {}).get("schedulerName") or "default-scheduler"
    return f"not scheduled: no profile serves schedulerName {name!r}"


def _budget_statuses(store: Store) -> None:
    """A budget's status from the cluster is kept (it knows readiness); one without is
    computed as the disruption controller would, each pod counting for itself."""
    pods, _ = store.list("Pod")
    for pdb in store.list("PodDisruptionBudget")[0]:
        if "disruptionsAllowed" in (pdb.get("status") or {}):
            continue
        status = budget_status(pdb, pods, lambda _uid: None)
        store.update({**pdb, "status": {**(pdb.get("status") or {}), **status}})


def _spawn_roles(
    options: RedisOptions, keys: Keys, workers: int, binders: int, logs: Path
) -> list[RoleProcess]:
    roles: list[tuple[str, list[str]]] = [("worker", [])] * workers
    roles.append(("binder", ["--processes", str(binders)]))
    logs.mkdir(parents=True, exist_ok=True)
    return [
        RoleProcess(
            role,
            [*extra, *redis_args(options, keys.scheduler)],
            role_env(options),
            logs / f"{role}-{i}.log",
            own_session=False,
        ).start()
        for i, (role, extra) in enumerate(roles)
    ]


def _wait_settled(
    client: redis.Redis,
    keys: Keys,
    pending: set[str],
    children: list[RoleProcess],
    timeout_s: float,
) -> None:
    """Until nothing is moving: every pending pod bound, parked (unschedulable, gated,
    dead-lettered) or gone, twice in a row 0.5 s apart."""
    deadline = time.monotonic() + timeout_s
    quiet = 0
    moving_places = [keys.active, keys.backoff, keys.inflight, keys.ledger_assumed]
    parked_places = [getattr(keys, q) for q in SUB_QUEUES if q not in (ACTIVE, BACKOFF, INFLIGHT)]
    while True:
        if not all(child.alive() for child in children):
            raise ReplayError("a worker or binder process exited during the replay")
        pipe = client.pipeline(transaction=False)
        for place in moving_places + parked_places:
            pipe.zcard(place)
        counts = pipe.execute()
        moving = sum(counts[: len(moving_places)])
        parked = sum(counts[len(moving_places) :])
        bound = 0
        if pending:
            for raw in client.hmget(keys.store_meta("Pod"), sorted(pending)):
                if raw is None or parse_meta(raw).node:
                    bound += 1
        settled = moving == 0 and bound + parked >= len(pending)
        quiet = quiet + 1 if settled else 0
        if quiet >= 2:
            return
        if time.monotonic() > deadline:
            raise ReplayError(
                f"not settled after {timeout_s:.0f}s: {moving} pod(s) still moving, "
                f"{len(pending) - bound - parked} unaccounted"
            )
        time.sleep(0.5)


def _forget(client: redis.Redis, keys: Keys) -> None:
    """Delete the replay's keys (its deployment is throwaway)."""
    batch = list(client.scan_iter(match=keys.pattern, count=1000))
    for start in range(0, len(batch), 500):
        client.delete(*batch[start : start + 500])
