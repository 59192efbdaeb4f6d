"""What kube-scheduler writes to the API server, written the way it does.

- Bindings: ``POST pods/{name}/binding`` (DefaultBinder), many at once over the client's
  connections, each answered on its own: bound, conflict (bound elsewhere: another
  scheduler won), not found (deleted), or an error.
- Pod status after a failed attempt: condition PodScheduled=False (reason Unschedulable
  or SchedulerError, kube's "0/N nodes are available: ..." message), and
  ``status.nominatedNodeName``, each a strategic merge patch (the caller writes only what
  changed, as kube's updatePod).
- Preemption: each victim first gets the DisruptionTarget condition (reason
  PreemptionByScheduler), then is deleted with its uid as precondition, then a
  ``Preempted`` event (kube's PreemptPod); in the background, as kube's async preemption.
- Events (Scheduled, FailedScheduling, Preempted) through :mod:`distsched.kube.events`.

Status patches and victim deletions run as tasks on the client's event loop, at most
``BACKGROUND_WRITES`` at once, coalesced per pod (the latest wins), so the scheduling loop
never waits on the API server. (Four threads each waiting on one request at a time made
the victims' deletes the bottleneck of PreemptionBasic: three requests per victim.)
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from distsched.clock import SYSTEM_CLOCK, Clock
from distsched.kube.client import (
    PODS,
    PVCS,
    PVS,
    ApiError,
    KubeClient,
    binding_request,
    delete_request,
    patch_status_request,
)
from distsched.kube.events import EventRecorder
from distsched.model.volumes import SELECTED_NODE_ANNOTATION

log = logging.getLogger(__name__)

Obj = dict[str, Any]

BACKGROUND_WRITES = 64

Work = Callable[[], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class ApiBinding:
    namespace: str
    name: str
    uid: str
    node: str


@dataclass(frozen=True, slots=True)
class ApiBindResult:
    """``status``: bound | conflict | not-found | error; ``detail``: the node the pod is
    bound to for a conflict, the API server's message for an error."""

    status: str
    detail: str = ""


def rfc3339(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms // 1000))


class KubeWriter:
    def __init__(
        self,
        client: KubeClient,
        *,
        scheduler_name: str = "default-scheduler",
        clock: Clock = SYSTEM_CLOCK,
        events: EventRecorder | None = None,
        bind_concurrency: int = 64,
    ) -> None:
        self.client = client
        self.scheduler_name = scheduler_name
        self.clock = clock
        self.events = events or EventRecorder(client, controller=scheduler_name, clock=clock)
        self.bind_concurrency = bind_concurrency
        # Background work by (what, namespace, name): "status" patches of one pod merge,
        # and a later one replaces the earlier one not started yet; an "evict" (preempt())
        # is queued apart, so that no status patch can take its place.
        self._pending: dict[tuple[str, str, str], Work] = {}
        self._outstanding = 0  # tasks started or about to be, not finished
        self._gate: asyncio.Semaphore | None = None  # made on the loop
        self._tasks: set[asyncio.Task[None]] = set()
        self._statuses: dict[tuple[str, str], Obj] = {}
        self._victims: set[tuple[str, str]] = set()  # preempt()ed, requests not answered
        self._lock = threading.Lock()

    def close(self) -> None:
        self.flush()
        self.events.stop()

    # --- bindings ------------------------------------------------------------------------
    def bind_many(self, bindings: Sequence[ApiBinding]) -> list[ApiBindResult]:
        requests = [binding_request(b.namespace, b.name, b.node, b.uid) for b in bindings]
        results = self.client.request_many(requests, concurrency=self.bind_concurrency)
        out: list[ApiBindResult] = []
        for binding, result in zip(bindings, results, strict=True):
            if not isinstance(result, ApiError):
                out.append(ApiBindResult("bound"))
            elif result.conflict:
                out.append(ApiBindResult("conflict", self._node_of(binding)))
            elif result.not_found:
                out.append(ApiBindResult("not-found"))
            else:
                out.append(ApiBindResult("error", str(result)))
        return out

    def bind_volumes(
        self,
        namespace: str,
        node: str,
        static: Sequence[tuple[str, str]],
        provision: Sequence[str],
    ) -> None:
        """VolumeBinding's PreBind through the API server, as kube-scheduler's binder
        writes it: each static PV gets the claim in its claimRef (an update carrying the
        PV's resourceVersion: a PV bound by someone since is a 409), the PV controller
        completes the claim's side; each claim to provision gets the selected-node
        annotation its provisioner waits for. Raises :class:`ApiError` when refused."""
        for pv_name, claim_name in static:
            claim = self.client.get(PVCS, claim_name, namespace)
            pv = self.client.get(PVS, pv_name)
            pv.setdefault("spec", {})["claimRef"] = {
                "kind": "PersistentVolumeClaim",
                "apiVersion": "v1",
                "namespace": namespace,
                "name": claim_name,
                "uid": (claim.get("metadata") or {}).get("uid", ""),
                "resourceVersion": (claim.get("metadata") or {}).get("resourceVersion", ""),
            }
            self.client.request("PUT", PVS.path(None, pv_name), body=pv, what=PVS.describe(None))
        for claim_name in provision:
            claim = self.client.get(PVCS, claim_name, namespace)
            meta = claim.setdefault("metadata", {})
            meta.setdefault("annotations", {})[SELECTED_NODE_ANNOTATION] = node
            self.client.request(
                "PUT",
                PVCS.path(namespace, claim_name),
                body=claim,
                what=PVCS.describe(namespace),
            )

    def _node_of(self, binding: ApiBinding) -> str:
        """Where a pod whose binding conflicted is bound ("" if unknown)."""
        try:
            pod = self.client.get(PODS, binding.name, binding.namespace)
        except ApiError:
            return ""
        if str((pod.get("metadata") or {}).get("uid", "")) != binding.uid:
            return ""
        return str((pod.get("spec") or {}).get("nodeName") or "")

    # --- status of pods that failed -----------------------------------------------------
    def condition(self, pod: Obj, *, reason: str, message: str) -> None:
        """Patch the pending pod's condition PodScheduled=False (kube's updatePod), in the
        background; a pod bound or gone meanwhile is left alone (the uid precondition and
        the API server's own rules)."""
        stamp = rfc3339(self.clock.now_ms())
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": reason,
            "message": message,
            "lastProbeTime": None,
            "lastTransitionTime": stamp,
        }
        self._patch_status(pod, {"conditions": [condition]})

    def nominate(self, pod: Obj, node: str) -> None:
        """Set (or with "" clear) status.nominatedNodeName."""
        if node != ((pod.get("status") or {}).get("nominatedNodeName") or ""):
            self._patch_status(pod, {"nominatedNodeName": node or None})

    def _patch_status(self, pod: Obj, status_patch: Obj) -> None:
        """Queue a status patch; patches of one pod not sent yet are merged into one
        (conditions by type, the later value of a field wins)."""
        meta = pod.get("metadata") or {}
        namespace, name = str(meta.get("namespace", "default")), str(meta.get("name", ""))
        uid = str(meta.get("uid", ""))
        key = (namespace, name)
        with self._lock:
            merged = _merge_status(self._statuses.get(key, {}), status_patch)
            self._statuses[key] = merged

        async def patch() -> None:
            with self._lock:
                status = self._statuses.pop(key, None)
            if not status:
                return
            body: Obj = {"status": status}
            if uid:
                body["metadata"] = {"uid": uid}  # a precondition: not another incarnation
            try:
                await self.client.arequest(patch_status_request(PODS, name, body, namespace))
            except ApiError as exc:
                if not exc.not_found and not exc.conflict:
                    log.warning("status of pod %s/%s not written: %s", namespace, name, exc)

        self._background(("status", namespace, name), patch)

    # --- preemption ----------------------------------------------------------------------
    def victim_condition(self, preemptor: Obj) -> Obj:
        """The DisruptionTarget condition a victim of ``preemptor`` gets, stamped now."""
        return disruption_condition(_profile(preemptor, self.scheduler_name), self.clock.now_ms())

    def preempt(self, victim: Obj, preemptor: Obj, node: str, condition: Obj | None = None) -> None:
        """kube's PreemptPod, in the background: DisruptionTarget (``condition``, by
        default :meth:`victim_condition` when the eviction starts), delete, event."""
        meta = victim.get("metadata") or {}
        namespace, name = str(meta.get("namespace", "default")), str(meta.get("name", ""))
        uid = str(meta.get("uid", ""))
        preemptor_uid = (preemptor.get("metadata") or {}).get("uid", "")
        profile = _profile(preemptor, self.scheduler_name)

        async def act() -> None:
            try:
                await evict()
            finally:
                with self._lock:
                    self._victims.discard((namespace, name))

        async def evict() -> None:
            marked = condition if condition is not None else self.victim_condition(preemptor)
            body = {"metadata": {"uid": uid}, "status": {"conditions": [marked]}}
            try:
                await self.client.arequest(patch_status_request(PODS, name, body, namespace))
                await self.client.arequest(delete_request(PODS, name, namespace, uid))
            except ApiError as exc:
                if not exc.not_found and not exc.conflict:
                    log.warning("preemption of %s/%s failed: %s", namespace, name, exc)
                return
            self.events.eventf(
                victim, preemptor, "Normal", "Preempted", "Preempting",
                f"Preempted by pod {preemptor_uid} on node {node}", controller=profile,
            )  # fmt: skip

        with self._lock:
            self._victims.add((namespace, name))
        self._background(("evict", namespace, name), act)

    def deleting(self, pod_keys: Sequence[str]) -> bool:
        """Whether a preempt() of one of these pods ("namespace/name") has not finished."""
        with self._lock:
            if not self._victims:
                return False
            return any(tuple(key.split("/", 1)) in self._victims for key in pod_keys)

    # --- background ----------------------------------------------------------------------
    def _background(self, key: tuple[str, str, str], work: Work) -> None:
        with self._lock:
            queued = key in self._pending
            self._pending[key] = work
            if not queued:
                self._outstanding += 1
        if not queued:
            self.client.call_soon(lambda: self._start(key))

    def _start(self, key: tuple[str, str, str]) -> None:  # on the client's loop
        task = asyncio.get_running_loop().create_task(self._run_latest(key))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run_latest(self, key: tuple[str, str, str]) -> None:
        try:
            if self._gate is None:
                self._gate = asyncio.Semaphore(BACKGROUND_WRITES)
            async with self._gate:
                with self._lock:
                    work = self._pending.pop(key, None)
                if work is not None:
                    await work()
        except Exception:  # a background write must not take the loop down with it
            log.exception("background %s of %s/%s failed", *key)
        finally:
            with self._lock:
                self._outstanding -= 1

    def flush(self, timeout_s: float = 10.0) -> None:
        """Wait until the background writes queued so far are done (tests, shutdown)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if not self._outstanding:
                    break
            time.sleep(0.01)
        self.events.flush(max(0.0, deadline - time.monotonic()))


def _merge_status(pending: Obj, patch: Obj) -> Obj:
    out = {**pending, **{k: v for k, v in patch.items() if k != "conditions"}}
    if "conditions" in patch:
        by_type = {c["type"]: c for c in pending.get("conditions", [])}
        by_type.update({c["type"]: c for c in patch["conditions"]})
        out["conditions"] = list(by_type.values())
    return out


def disruption_condition(profile: str, now_ms: int) -> Obj:
    """The condition kube's preemption sets on a victim before deleting it."""
    return {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "PreemptionByScheduler",
        "message": f"{profile}: preempting to accommodate a higher priority pod",
        "lastTransitionTime": rfc3339(now_ms),
    }


def _profile(pod: Obj, default: str) -> str:
    return str((pod.get("spec") or {}).get("schedulerName") or default)
