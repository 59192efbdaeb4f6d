"""The workload controllers: Deployment, ReplicaSet, StatefulSet, DaemonSet and Job
objects in the store become pods, as kube-controller-manager's controllers make them.

One :class:`WorkloadController` follows the store's event stream with an
:class:`~distsched.store.Informer` (its indexer is the controller's cache). Event
handlers mark owners dirty, like kube's work queues: a workload's own events, its pods'
events (through their controller ownerReference), node events for every DaemonSet,
priority-class events for every workload (a pod refused by priority admission is tried
again). :meth:`WorkloadController.sync` catches the informer up with the stream and
reconciles every dirty owner until none is left; it is level-triggered (each reconcile
compares the desired pods with the owned ones in the cache), so a missed or repeated
event costs nothing but work.

What each owner gets:

- Deployment: one ReplicaSet per template (``<deployment>-<pod-template-hash>``) with the
  Deployment's replicas; every other ReplicaSet it owns is scaled to 0 at once (the
  rollout strategy's pacing is not modelled).
- ReplicaSet: ``spec.replicas`` pods ``<rs>-<suffix>``; scale-down deletes the pods kube's
  ReplicaSet controller ranks first (getPodsToDelete): unbound before bound, Pending
  before Running, newer before older.
- StatefulSet: pods ``<sts>-0`` .. ``<sts>-(n-1)``, all at once (podManagementPolicy
  Parallel; OrderedReady would wait for readiness, which is not modelled); scale-down
  deletes the highest ordinals first.
- DaemonSet: one pod per eligible node (the template's nodeSelector, required node
  affinity and tolerations, with the tolerations the DaemonSet controller adds, against
  the node's labels and NoSchedule/NoExecute taints), following node adds, updates and
  deletes.
- Job: ``parallelism`` pods, capped by ``completions`` minus succeeded pods; Indexed
  Jobs get one pod per completion index (``<job>-<index>-<suffix>``).

Deleting an owner deletes what it owns (the garbage collector's background deletion):
on the owner's delete event, and, when the controller (re)starts, for every pod or
ReplicaSet whose controller ownerReference names a managed kind whose object is gone.

Pods pass the same priority admission as ``apply`` (model/admission.py). Every write is
idempotent: names are deterministic (controllers/naming.py), creates that find the name
taken are skipped, deletes carry the uid they saw.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from itertools import count
from typing import Any

import redis

from distsched.clock import SYSTEM_CLOCK, Clock
from distsched.controllers import naming, volumes
from distsched.controllers import pods as make
from distsched.controllers.disruption import budget_status
from distsched.keys import Keys
from distsched.model.admission import PriorityClasses, admit_pod
from distsched.model.decode import node_from_dict
from distsched.model.errors import ManifestError
from distsched.model.kinds import WORKLOAD_KINDS
from distsched.model.nodeaffinity import pod_matches_node_selector_and_affinity
from distsched.model.objects import Node, Pod, Taint, Toleration
from distsched.model.taints import tolerates
from distsched.model.workloads import Workload
from distsched.model.workloads import object_from_dict as workload_from_dict
from distsched.store import (
    AlreadyExists,
    Conflict,
    FuncHandler,
    Informer,
    NotFound,
    Store,
    UidMismatch,
)
from distsched.store.codec import Obj, object_key, uid_of

log = logging.getLogger(__name__)

OWNED_KINDS = ("Pod", "ReplicaSet")
WATCHED_KINDS = (
    "PodDisruptionBudget",
    "Pod",
    "Node",
    "PriorityClass",
    "Deployment",
    "ReplicaSet",
    "StatefulSet",
    "DaemonSet",
    "Job",
    "PersistentVolumeClaim",
    "PersistentVolume",
    "StorageClass",
)
FINISHED_PHASES = ("Succeeded", "Failed")
_PHASE_RANK = {"Pending": 0, "Unknown": 1, "Running": 2}

Ref = tuple[str, str]  # (kind, key)


class WorkloadController:
    """The reconcile loop of every workload kind, over one informer."""

    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        *,
        clock: Clock = SYSTEM_CLOCK,
        informer: Informer | None = None,
    ) -> None:
        self.store = Store(client, keys, clock)
        self.informer = informer or Informer(client, keys, WATCHED_KINDS, clock=clock)
        self._dirty: set[Ref] = set()
        self._gone: set[str] = set()  # uids of deleted owners whose objects to collect
        self._owner_by_uid: dict[str, Ref] = {}
        self._owned: dict[str, set[Ref]] = {}  # controller uid -> owned objects
        self._decoded: dict[tuple[str, str], Any] = {}  # (uid, rv) -> typed object
        self.writes = 0
        for kind in WORKLOAD_KINDS:
            self.informer.add_handler(kind, self._owner_handler(kind))
        self.informer.add_handler("Pod", self._owned_handler("Pod"))
        self.informer.add_handler("PodDisruptionBudget", _on_change(self._mark))
        self.informer.add_handler(
            "Node",
            FuncHandler(
                add=lambda o, _i: self._mark_kind("DaemonSet"),
                update=lambda _o, _n: self._mark_kind("DaemonSet"),
                delete=lambda o, _f: self._mark_kind("DaemonSet"),
            ),
        )
        self.informer.add_handler("PersistentVolumeClaim", _on_change(self._mark))
        self.informer.add_handler("PersistentVolume", _on_change(self._volume_changed))
        self.informer.add_handler(
            "StorageClass", _on_change(lambda _o: self._mark_kind("PersistentVolumeClaim"))
        )
        self.informer.add_handler(
            "PriorityClass", _on_change(lambda _o: self._mark_kind(*WORKLOAD_KINDS))
        )

    # --- event handlers -------------------------------------------------------------
    def _owner_handler(self, kind: str) -> FuncHandler:
        def added(obj: Obj, _initial: bool) -> None:
            ref = object_key(obj)
            self._owner_by_uid[uid_of(obj)] = ref
            self._dirty.add(ref)
            if kind in OWNED_KINDS:
                self._track(obj)

        def updated(old: Obj, new: Obj) -> None:
            added(new, False)

        def deleted(obj: Obj, _unknown: bool) -> None:
            uid = uid_of(obj)
            self._owner_by_uid.pop(uid, None)
            self._gone.add(uid)
            if kind in OWNED_KINDS:
                self._untrack(obj)

        return FuncHandler(add=added, update=updated, delete=deleted)

    def _owned_handler(self, kind: str) -> FuncHandler:
        def added(obj: Obj, _initial: bool) -> None:
            self._track(obj)
            if kind == "Pod" and volumes.ephemeral_claims(obj):
                self._dirty.add(object_key(obj))

        def updated(old: Obj, new: Obj) -> None:
            self._track(new)

        def deleted(obj: Obj, _unknown: bool) -> None:
            self._untrack(obj)
            if kind == "Pod":
                self._ephemeral_claims_gone(obj)

        return FuncHandler(add=added, update=updated, delete=deleted)

    def _track(self, obj: Obj) -> None:
        if obj["kind"] == "Pod":
            self._budgets_dirty(obj)
        owner = make.controller_uid(obj)
        if not owner:
            return
        self._owned.setdefault(owner, set()).add(object_key(obj))
        ref = self._owner_by_uid.get(owner)
        if ref is not None:
            self._dirty.add(ref)

    def _untrack(self, obj: Obj) -> None:
        if obj["kind"] == "Pod":
            self._budgets_dirty(obj)
        owner = make.controller_uid(obj)
        if not owner:
            return
        owned = self._owned.get(owner)
        if owned is not None:
            owned.discard(object_key(obj))
            if not owned:
                del self._owned[owner]
        ref = self._owner_by_uid.get(owner)
        if ref is not None:
            self._dirty.add(ref)

    def _budgets_dirty(self, pod: Obj) -> None:
        namespace = pod["metadata"].get("namespace")
        for pdb in self.informer.list("PodDisruptionBudget"):
            if pdb["metadata"].get("namespace") == namespace:
                self._dirty.add(object_key(pdb))

    def _mark(self, obj: Obj) -> None:
        self._dirty.add(object_key(obj))

    def _mark_kind(self, *kinds: str) -> None:
        for kind in kinds:
            for obj in self.informer.list(kind):
                self._dirty.add(object_key(obj))

    # --- the loop ---------------------------------------------------------------------
    def catch_up(self, block_ms: int = 0) -> None:
        """Read the stream until the informer is at the store's resourceVersion (the
        first read may wait ``block_ms`` for something to happen)."""
        self.informer.poll_once(block_ms)
        target = self.store.resource_version()
        while self.informer.resource_version < target or not self.informer.has_synced:
            self.informer.poll_once(0)

    def sync(self, *, block_ms: int = 0, max_rounds: int = 50) -> int:
        """Catch up and reconcile until nothing is dirty; the number of writes made."""
        before = self.writes
        self.catch_up(block_ms)
        for _ in range(max_rounds):
            if not self._dirty and not self._gone:
                break
            self.reconcile_dirty()
            self.catch_up(0)
        return self.writes - before

    def reconcile_dirty(self) -> None:
        gone, self._gone = self._gone, set()
        for uid in gone:
            self._collect(uid)
        dirty, self._dirty = self._dirty, set()
        for kind, key in sorted(dirty):
            obj = self.informer.get(kind, key)
            if obj is None:
                continue
            try:
                RECONCILERS[kind](self, obj)
            except (redis.ConnectionError, redis.TimeoutError):
                self._dirty.add((kind, key))
                raise
            except Exception:
                log.exception("controller: reconciling %s %s failed", kind, key)

    def collect_orphans(self) -> int:
        """Mark for deletion the pods and ReplicaSets whose controller (of a managed kind)
        is gone: what a controller that was down when the owner was deleted left behind.
        Objects owned by kinds distsched does not manage are left alone. Returns the
        number of such owners."""
        orphans = 0
        for owner in list(self._owned):
            if owner in self._owner_by_uid:
                continue
            if any(self._managed_owner(ref) for ref in self._owned[owner]):
                self._gone.add(owner)
                orphans += 1
        return orphans

    def _managed_owner(self, ref: Ref) -> bool:
        obj = self.informer.get(*ref)
        if obj is None:
            return False
        for owner_ref in obj["metadata"].get("ownerReferences") or ():
            if owner_ref.get("controller") and owner_ref.get("kind") in WORKLOAD_KINDS:
                return True
        return False

    # --- helpers ----------------------------------------------------------------------
    def owned(self, owner: Obj, kind: str = "Pod") -> list[Obj]:
        out = []
        for ref_kind, key in self._owned.get(uid_of(owner), ()):
            if ref_kind == kind:
                obj = self.informer.get(kind, key)
                if obj is not None:
                    out.append(obj)
        return out

    def _collect(self, uid: str) -> None:
        for kind, key in sorted(self._owned.get(uid, ())):
            obj = self.informer.get(kind, key)
            if obj is not None:
                self._delete(obj)

    def _delete(self, obj: Obj) -> None:
        kind, key = object_key(obj)
        try:
            self.store.delete(kind, key, uid=uid_of(obj))
            self.writes += 1
        except (NotFound, UidMismatch):
            pass

    def _create(self, objs: Iterable[Obj]) -> None:
        batch = list(objs)
        if batch and batch[0]["kind"] == "Pod":
            classes = PriorityClasses.from_dicts(self.informer.list("PriorityClass"))
            admitted = []
            for pod in batch:
                try:
                    admitted.append(admit_pod(pod, classes))
                except ManifestError as exc:
                    key = object_key(pod)[1]
                    log.warning("controller: FailedCreate pod %s: %s", key, exc.reason)
            batch = admitted
        if not batch:
            return
        try:
            self.store.create_many(batch)
            self.writes += len(batch)
            return
        except AlreadyExists:
            pass
        for obj in batch:  # someone made some of them already: make the rest
            try:
                self.store.create(obj)
                self.writes += 1
            except AlreadyExists:
                pass

    def _workload(self, obj: Obj) -> Workload:
        cache_key = (uid_of(obj), str(obj["metadata"].get("resourceVersion")))
        typed = self._decoded.get(cache_key)
        if typed is None:
            if len(self._decoded) > 10_000:
                self._decoded.clear()
            typed = workload_from_dict(obj)
            self._decoded[cache_key] = typed
        assert isinstance(typed, Workload)
        return typed

    def _taken(self, namespace: str, name: str) -> bool:
        return self.informer.get("Pod", f"{namespace}/{name}") is not None

    def _fresh_names(self, owner: Obj, n: int, prefix: str = "") -> list[str]:
        meta = owner["metadata"]
        names: list[str] = []
        for slot in count():
            if len(names) == n:
                break
            name = naming.generated_name(meta["name"], meta["uid"], f"{prefix}{slot}")
            if not self._taken(meta["namespace"], name):
                names.append(name)
        return names

    # --- per kind ---------------------------------------------------------------------
    def reconcile_budget(self, pdb: Obj) -> None:
        namespace = pdb["metadata"].get("namespace")
        pods = [p for p in self.informer.list("Pod") if p["metadata"].get("namespace") == namespace]
        status = budget_status(pdb, pods, self._scale_of)
        current = pdb.get("status") or {}
        if all(current.get(k) == v for k, v in status.items()):
            return
        self._update_status(pdb, {**current, **status})

    def _scale_of(self, uid: str) -> int | None:
        ref = self._owner_by_uid.get(uid)
        if ref is None or ref[0] not in ("ReplicaSet", "StatefulSet"):
            return None
        obj = self.informer.get(*ref)
        return int(obj["spec"].get("replicas", 1)) if obj is not None else None

    def _update_status(self, current: Obj, status: dict[str, Any]) -> None:
        try:
            self.store.update({**current, "status": status})
            self.writes += 1
        except (NotFound, Conflict):
            pass

    def reconcile_deployment(self, deploy: Obj) -> None:
        pod_hash = naming.template_hash(deploy["spec"]["template"])
        wanted = make.replica_set_for(deploy, pod_hash)
        key = f"{deploy['metadata']['namespace']}/{wanted['metadata']['name']}"
        current = self.informer.get("ReplicaSet", key)
        if current is None:
            self._create([wanted])
        elif make.controller_uid(current) != uid_of(deploy):
            log.warning("controller: ReplicaSet %s exists and is not owned by its Deployment", key)
        elif current["spec"] != wanted["spec"]:
            self._update_spec(current, wanted["spec"])
        for rs in self.owned(deploy, "ReplicaSet"):
            if rs["metadata"]["name"] != wanted["metadata"]["name"] and rs["spec"].get("replicas"):
                self._update_spec(rs, {**rs["spec"], "replicas": 0})

    def _update_spec(self, current: Obj, spec: dict[str, Any]) -> None:
        # Conflict: it changed since our read; its event brings it back here.
        try:
            self.store.update({**current, "spec": spec})
            self.writes += 1
        except (NotFound, Conflict):
            pass

    def reconcile_replica_set(self, rs: Obj) -> None:
        want = int(rs["spec"].get("replicas", 1))
        active = [p for p in self.owned(rs) if _phase(p) not in FINISHED_PHASES]
        if len(active) < want:
            template = rs["spec"]["template"]
            names = self._fresh_names(rs, want - len(active))
            self._create(make.pod_from_template(rs, template, name) for name in names)
        elif len(active) > want:
            for pod in sorted(active, key=_deletion_rank)[: len(active) - want]:
                self._delete(pod)

    def reconcile_stateful_set(self, sts: Obj) -> None:
        want = int(sts["spec"].get("replicas", 1))
        revision = f"{sts['metadata']['name']}-{naming.template_hash(sts['spec']['template'])}"
        pattern = re.compile(re.escape(sts["metadata"]["name"]) + r"-(0|[1-9][0-9]*)")
        by_ordinal: dict[int, Obj] = {}
        for pod in self.owned(sts):
            match = pattern.fullmatch(pod["metadata"]["name"])
            if match:
                by_ordinal[int(match.group(1))] = pod
        missing = [i for i in range(want) if i not in by_ordinal]
        # Claims first, as kube's controller: one that exists already (kept from an
        # earlier replica) is the pod's again.
        self._create(c for i in missing for c in make.stateful_claims(sts, i))
        self._create(make.stateful_pod(sts, i, revision) for i in missing)
        for ordinal in sorted((i for i in by_ordinal if i >= want), reverse=True):
            self._delete(by_ordinal[ordinal])

    def reconcile_pod(self, pod: Obj) -> None:
        """The claims of a pod's generic ephemeral volumes (a pod bound or finished
        needs none made now; one made already is kept: AlreadyExists)."""
        if _phase(pod) in FINISHED_PHASES or (pod.get("spec") or {}).get("nodeName"):
            return
        claims = volumes.ephemeral_claims(pod)
        if claims:
            self._create(claims)

    def _ephemeral_claims_gone(self, pod: Obj) -> None:
        """A deleted pod's ephemeral claims go with it (their owner; the garbage
        collector's background deletion)."""
        uid = uid_of(pod)
        for claim in volumes.ephemeral_claims(pod):
            key = f"{claim['metadata']['namespace']}/{claim['metadata']['name']}"
            current = self.informer.get("PersistentVolumeClaim", key)
            owners = ((current or {}).get("metadata") or {}).get("ownerReferences") or ()
            if current is not None and any(o.get("uid") == uid for o in owners):
                self._delete(current)

    def _volume_changed(self, pv: Obj) -> None:
        """A PV to mark Available, and the claims that name it (what a PV's change can
        bind: a claim pre-bound to it; provisioning does not wait for PVs)."""
        self._mark(pv)
        name = pv["metadata"]["name"]
        for claim in self.informer.list("PersistentVolumeClaim"):
            if (claim.get("spec") or {}).get("volumeName") == name:
                self._mark(claim)

    def reconcile_volume(self, pv: Obj) -> None:
        marked = volumes.available(pv)
        if marked is not None:
            self._write_update(marked)

    def reconcile_claim(self, claim: Obj) -> None:
        """Bind the claim (controllers/volumes.py): to the PV it names, or to one
        provisioned for it (the PV first, then the claim: a claim changed since our read
        is back here by its event; the PV's name is the claim's uid, so a retry finds
        it)."""
        name = (claim.get("spec") or {}).get("volumeName")
        if name:
            pair = volumes.complete_prebound(claim, self.informer.get("PersistentVolume", name))
            # The claim only after its PV: a PV changed since our read leaves both as
            # they are, and its event brings the claim back here.
            if pair is not None and self._write_update(pair[0]):
                self._write_update(pair[1])
            return
        classes = volumes.classes_of(self.informer.list("StorageClass"))
        made = volumes.provision(claim, classes, {n.metadata.name: n for n in self._nodes()})
        if made is None:
            return
        volume, bound = made
        self._create([volume])
        self._write_update(bound)

    def _write_update(self, obj: Obj) -> bool:
        try:
            self.store.update(obj)
        except (NotFound, Conflict):
            return False  # changed since our read: its event brings it back
        self.writes += 1
        return True

    def reconcile_daemon_set(self, ds: Obj) -> None:
        template = self._workload(ds).template_pod
        host_network = bool((ds["spec"]["template"].get("spec") or {}).get("hostNetwork"))
        eligible = {
            node.metadata.name
            for node in self._nodes()
            if should_run_daemon_pod(template, node, host_network=host_network)
        }
        by_node: dict[str, list[Obj]] = {}
        for pod in self.owned(ds):
            by_node.setdefault(make.daemon_pod_node(pod), []).append(pod)
        for node_name, pods in by_node.items():
            if node_name not in eligible:
                for pod in pods:
                    self._delete(pod)
            elif len(pods) > 1:  # keep the bound (or oldest) one, as the DS controller does
                for pod in sorted(pods, key=_deletion_rank)[: len(pods) - 1]:
                    self._delete(pod)
        meta = ds["metadata"]
        self._create(
            make.daemon_pod(ds, naming.generated_name(meta["name"], meta["uid"], node), node)
            for node in sorted(eligible - set(by_node))
        )

    def _nodes(self) -> list[Node]:
        nodes = []
        for obj in self.informer.list("Node"):
            cache_key = (uid_of(obj), str(obj["metadata"].get("resourceVersion")))
            node = self._decoded.get(cache_key)
            if node is None:
                node = node_from_dict(obj)
                self._decoded[cache_key] = node
            nodes.append(node)
        return nodes

    def reconcile_job(self, job: Obj) -> None:
        spec = job["spec"]
        parallelism = int(spec.get("parallelism", 1))
        completions = spec.get("completions")
        pods = self.owned(job)
        succeeded = [p for p in pods if _phase(p) == "Succeeded"]
        active = [p for p in pods if _phase(p) not in FINISHED_PHASES]
        if completions is None:
            want = parallelism if not succeeded else 0
        else:
            want = max(0, min(parallelism, int(completions) - len(succeeded)))
        if len(active) > want:
            for pod in sorted(active, key=_deletion_rank)[: len(active) - want]:
                self._delete(pod)
            return
        if len(active) == want:
            return
        meta = job["metadata"]
        if spec.get("completionMode") == "Indexed" and completions is not None:
            busy = {_job_index(p) for p in active} | {_job_index(p) for p in succeeded}
            free = [i for i in range(int(completions)) if i not in busy][: want - len(active)]
            self._create(
                make.job_pod(
                    job, naming.generated_name(f"{meta['name']}-{i}", meta["uid"], str(i)), i
                )
                for i in free
            )
            return
        names = self._fresh_names(job, want - len(active))
        self._create(make.job_pod(job, name, None) for name in names)


RECONCILERS = {
    "PodDisruptionBudget": WorkloadController.reconcile_budget,
    "PersistentVolumeClaim": WorkloadController.reconcile_claim,
    "PersistentVolume": WorkloadController.reconcile_volume,
    "Pod": WorkloadController.reconcile_pod,
    "Deployment": WorkloadController.reconcile_deployment,
    "ReplicaSet": WorkloadController.reconcile_replica_set,
    "StatefulSet": WorkloadController.reconcile_stateful_set,
    "DaemonSet": WorkloadController.reconcile_daemon_set,
    "Job": WorkloadController.reconcile_job,
}


def _on_change(act: Callable[[Obj], None]) -> FuncHandler:
    """A handler acting on an object added or updated (deletes need nothing)."""
    return FuncHandler(add=lambda obj, _initial: act(obj), update=lambda _old, new: act(new))


def should_run_daemon_pod(template: Pod, node: Node, *, host_network: bool = False) -> bool:
    """kube's NodeShouldRunDaemonPod: the template's node name, node selector and
    required node affinity match the node, and every NoSchedule/NoExecute taint is
    tolerated by the template's tolerations plus the ones the controller adds."""
    if template.spec.node_name and template.spec.node_name != node.metadata.name:
        return False
    if not pod_matches_node_selector_and_affinity(template, node):
        return False
    added = list(make.DAEMON_TOLERATIONS)
    if host_network:
        added.append(make.HOST_NETWORK_TOLERATION)
    tolerations = [*template.spec.tolerations]
    tolerations += [Toleration(key=k, operator="Exists", effect=e) for k, e in added]
    return all(_tolerated(taint, tolerations) for taint in node.spec.taints)


def _tolerated(taint: Taint, tolerations: list[Toleration]) -> bool:
    if taint.effect not in ("NoSchedule", "NoExecute"):
        return True
    return any(tolerates(t, taint) for t in tolerations)


def _phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def _job_index(pod: Obj) -> int:
    value = (pod["metadata"].get("labels") or {}).get(make.JOB_INDEX)
    return int(value) if value is not None and value.isdigit() else -1


def _deletion_rank(pod: Obj) -> tuple[int, int, str, int]:
    """Sort key: the pod to delete first sorts first (kube's ActivePodsWithRanks for
    scale-down: unassigned < assigned, Pending < Unknown < Running, newer < older)."""
    bound = 1 if (pod.get("spec") or {}).get("nodeName") else 0
    phase = _PHASE_RANK.get(_phase(pod), 1)
    created = str(pod["metadata"].get("creationTimestamp") or "")
    rv = int(pod["metadata"].get("resourceVersion") or 0)
    # Newer first: invert the timestamp's order with a negated rv as tie breaker.
    return (bound, phase, _invert(created), -rv)


def _invert(text: str) -> str:
    return "".join(chr(0x10FFFF - ord(c)) for c in text)
