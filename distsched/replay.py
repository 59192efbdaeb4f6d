"""What-if replay of a real cluster: ``distsched replay -f dump.json``.

Input: what kubectl writes, JSON or YAML, in one or more files: ``kubectl get
nodes,pods -A -o json`` (a ``kind: List``; ``distsched get pods,nodes -A -o json`` has the
same shape), the API server's own lists (``PodList``, ``NodeList``, ``PriorityClassList``...,
whose items carry no ``kind``: the list's says it), optionally with priorityclasses,
poddisruptionbudgets and namespaces, or ``kubectl get all -A -o json``.

What happens (:func:`replay`):

1. The dump is read and validated as ``apply`` validates manifests (exit 2 naming file,
   document, item and field). Left out on the way: the kinds replay does not use
   (Services, CronJobs, ConfigMaps...: counted by kind in the report; the workload
   kinds are loaded, as ``apply`` loads them, but no controller runs), and as
   kube-scheduler ignores or owns them: Succeeded/Failed pods, the built-in ``system-*``
   PriorityClasses, the server's bookkeeping (resourceVersion, managedFields, the
   selector it generated for a Job). A pod that
   already carries ``spec.priority`` keeps it (the cluster admitted it); others go
   through priority admission.
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

import secrets
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
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
from distsched.model import STDIN_SOURCE, Node, Pod, ResourceList, pod_requests
from distsched.model.kinds import ALL_KINDS
from distsched.model.manifest import KubeObject, Location, load_sources, parse_documents
from distsched.queue_types import ACTIVE, BACKOFF, INFLIGHT, SUB_QUEUES
from distsched.scan import delete_matching
from distsched.store import Store, parse_meta
from distsched.store.codec import Obj

TERMINAL_PHASES = ("Succeeded", "Failed")
USED_KINDS = frozenset(ALL_KINDS)
"""What replay loads: the kinds distsched acts on (workloads are stored but inert: no
controller runs in a replay, the dump holds their pods); every other kind is skipped."""
SERVER_FIELDS = ("managedFields", "resourceVersion")
JOB_UID_LABEL = "batch.kubernetes.io/controller-uid"
MAX_DUMP_BYTES = 4 * 1024**3
"""A cluster dump is no manifest: a 50,000-pod one is ~250 MB (apply stops at 8 MiB)."""
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
    skipped: dict[str, int] = field(default_factory=dict)  # store kind -> objects left out

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
            "skipped": dict(sorted(self.skipped.items())),
            "seconds": round(self.seconds, 2),
        }

    def skipped_line(self) -> str:
        """``skipped: 12 Service, 3 CronJob`` (most first), or "" when none was."""
        counts = sorted(self.skipped.items(), key=lambda kv: (-kv[1], kv[0]))
        return "skipped: " + ", ".join(f"{n} {kind}" for kind, n in counts) if counts else ""


def load_dump(
    paths: Sequence[str], *, pending_only: bool, skipped: Counter[str] | None = None
) -> list[Obj]:
    """The objects to load, validated and admitted (ManifestError on bad input). The
    kinds replay does not use are left out and counted in ``skipped`` by store kind
    (``Service``, ``CronJob``...)."""
    sources = []
    for path in paths:
        source = STDIN_SOURCE if path == "-" else path
        data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
        sources.append((source, parse_documents(source, data, max_bytes=MAX_DUMP_BYTES)))
    counts: Counter[str] = Counter() if skipped is None else skipped

    def skip(kind: str, data: dict[str, Any]) -> bool:
        if kind not in USED_KINDS:
            counts[kind] += 1
            return True
        meta = data.get("metadata")
        name = meta.get("name") if isinstance(meta, dict) else None
        if kind == "Job":
            _drop_generated_selector(data)
        if kind == "PriorityClass" and isinstance(name, str) and name.startswith("system-"):
            return True  # built in, and refused in a manifest
        status = data.get("status")
        return kind == "Pod" and isinstance(status, dict) and status.get("phase") in TERMINAL_PHASES

    locations: list[Location] = []
    objects = load_sources(sources, locations=locations, skip=skip)
    classes = [o.to_dict() for o in objects if o.kind == "PriorityClass"]
    admitted = prepare(
        [o for o in objects if not _keeps_priority(o)],
        [loc for o, loc in zip(objects, locations, strict=True) if not _keeps_priority(o)],
        classes,
    )
    out: list[Obj] = []
    fresh = iter(admitted)
    for obj in objects:
        data = _without_server_fields(obj.to_dict() if _keeps_priority(obj) else next(fresh))
        if data["kind"] == "Pod" and not pending_only:
            data = _unbound(data)
        out.append(data)
    return out


def _drop_generated_selector(job: dict[str, Any]) -> None:
    """Remove (in place) the selector the API server generated for a Job from its uid:
    the server owns it, and a manifest may not give one without ``manualSelector``."""
    spec, meta = job.get("spec"), job.get("metadata")
    if not isinstance(spec, dict) or not isinstance(meta, dict) or spec.get("manualSelector"):
        return
    uid = meta.get("uid")
    generated = ({"matchLabels": {JOB_UID_LABEL: uid}}, {"matchLabels": {"controller-uid": uid}})
    if uid and spec.get("selector") in generated:
        del spec["selector"]


def _keeps_priority(obj: KubeObject) -> bool:
    return isinstance(obj, Pod) and obj.spec.priority is not None


def _without_server_fields(data: Obj) -> Obj:
    """``data`` without what the server owns and the scheduler never sees."""
    meta = data.get("metadata") or {}
    if not any(k in meta for k in SERVER_FIELDS):
        return data
    return {**data, "metadata": {k: v for k, v in meta.items() if k not in SERVER_FIELDS}}


def _unbound(pod: Obj) -> Obj:
    spec = {k: v for k, v in (pod.get("spec") or {}).items() if k != "nodeName"}
    status = {k: v for k, v in (pod.get("status") or {}).items() if k == "phase"}
    status["phase"] = "Pending"
    return {**pod, "spec": spec, "status": status}


def utilisation(
    store: Store,
    *,
    pods: list[Obj] | None = None,
    requests_of: dict[tuple[str, str], ResourceList] | None = None,
) -> dict[str, dict[str, float]]:
    """Per node: requested / allocatable of cpu, memory and pods (0..1, rounded), of
    ``pods`` (default: the store's). ``requests_of`` keeps each pod's requests by key and
    uid from one call to the next (a pod's requests never change)."""
    nodes = {o["metadata"]["name"]: Node.from_dict(o) for o in store.list("Node")[0]}
    used: dict[str, dict[str, int]] = {name: dict.fromkeys(RESOURCES, 0) for name in nodes}
    known = {} if requests_of is None else requests_of
    for obj in store.list("Pod")[0] if pods is None else pods:
        node_name = (obj.get("spec") or {}).get("nodeName")
        if node_name not in used:
            continue
        at = (_key(obj), obj["metadata"].get("uid", ""))
        requests = known.get(at)
        if requests is None:
            requests = known[at] = pod_requests(Pod.from_dict(obj))
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
    skipped: Mapping[str, int] | None = None,
) -> Report:
    """Load ``objects`` into a fresh deployment on ``options``' Redis (``keys``, by default
    a random ``replay-*`` one), schedule, report; the deployment's keys are deleted after
    unless ``keep``. The roles' logs go to ``log_dir`` (default: a temporary directory).
    ``skipped``: what :func:`load_dump` left out, for the report."""
    keys = keys or Keys(f"replay-{secrets.token_hex(4)}")
    client = connect(options)
    logs = log_dir or Path(tempfile.mkdtemp(prefix="distsched-replay-"))
    try:
        report = _run(client, keys, objects, options, workers, binders, timeout_s, logs)
        report.skipped = dict(skipped or {})
        return report
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
    pods, _ = store.list("Pod")
    _budget_statuses(store, pods)
    pending = {_key(p) for p in pods if not (p.get("spec") or {}).get("nodeName")}
    kept = {_key(p) for p in pods} - pending
    report = Report(nodes=len(store.list("Node")[0]), kept=len(kept), pending=len(pending))
    requests_of: dict[tuple[str, str], ResourceList] = {}
    report.before = utilisation(store, pods=pods, requests_of=requests_of)
    del pods
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
    report.after = utilisation(store, pods=list(now.values()), requests_of=requests_of)
    return report


def _key(pod: Obj) -> str:
    return f"{pod['metadata'].get('namespace', 'default')}/{pod['metadata']['name']}"


def _not_served(pod: Obj) -> str:
    name = (pod.get("spec") or {}).get("schedulerName") or "default-scheduler"
    return f"not scheduled: no profile serves schedulerName {name!r}"


def _budget_statuses(store: Store, pods: list[Obj]) -> None:
    """A budget's status from the cluster is kept (it knows readiness); one without is
    computed as the disruption controller would, each pod counting for itself."""
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
    delete_matching(client, keys.pattern)
