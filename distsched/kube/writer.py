"""What kube-scheduler writes to the API server, written the way it does.

- Bindings: ``POST pods/{name}/binding`` (DefaultBinder), many at once over the client's
  connections, each answered on its own: bound, conflict (bound elsewhere: another
  scheduler won), not found (deleted), or an error.
- Pod status after a failed attempt: condition PodScheduled=False (reason Unschedulable
  or SchedulerError, kube's "0/N nodes are available: ..." message) and
  ``status.nominatedNodeName``, as one strategic merge patch, and only when they change
  (kube's updatePod): a pod that keeps failing the same way is patched once.
- Preemption: each victim first gets the DisruptionTarget condition (reason
  PreemptionByScheduler), then is deleted with its uid as precondition, then a
  ``Preempted`` event (kube's PreemptPod); in the background, as kube's async preemption.
- Events (Scheduled, FailedScheduling, Preempted) through :mod:`distsched.kube.events`.

Status patches and victim deletions run on a small pool of background threads, coalesced
per pod (the latest wins), so the scheduling loop never waits on the API server.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from distsched.clock import SYSTEM_CLOCK, Clock
from distsched.kube.client import PODS, ApiError, KubeClient
from distsched.kube.events import EventRecorder, truncate

log = logging.getLogger(__name__)

Obj = dict[str, Any]

BACKGROUND_THREADS = 4


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
        bind_concurrency: int = 32,
    ) -> None:
        self.client = client
        self.scheduler_name = scheduler_name
        self.clock = clock
        self.events = events or EventRecorder(client, controller=scheduler_name, clock=clock)
        self.bind_concurrency = bind_concurrency
        self._pool = ThreadPoolExecutor(BACKGROUND_THREADS, thread_name_prefix="kube-writer")
        self._pending: dict[tuple[str, str], Callable[[], None]] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self.events.flush()
        self.events.stop()

    # --- bindings ------------------------------------------------------------------------
    def bind_many(self, bindings: Sequence[ApiBinding]) -> list[ApiBindResult]:
        def one(b: ApiBinding) -> ApiBindResult:
            self.client.bind(b.namespace, b.name, b.node, uid=b.uid)
            return ApiBindResult("bound")

        results = self.client.concurrently(list(bindings), one, workers=self.bind_concurrency)
        out: list[ApiBindResult] = []
        for binding, result in zip(bindings, results, strict=True):
            if isinstance(result, ApiBindResult):
                out.append(result)
            elif isinstance(result, ApiError) and result.conflict:
                out.append(ApiBindResult("conflict", self._node_of(binding)))
            elif isinstance(result, ApiError) and result.not_found:
                out.append(ApiBindResult("not-found"))
            else:
                out.append(ApiBindResult("error", str(result)))
        return out

    def _node_of(self, binding: ApiBinding) -> str:
        """Where a pod whose binding conflicted is bound ("" if unknown)."""
        try:
            pod = self.client.get(PODS, binding.name, binding.namespace)
        except ApiError:
            return ""
        if str((pod.get("metadata") or {}).get("uid", "")) != binding.uid:
            return ""
        return str((pod.get("spec") or {}).get("nodeName") or "")

    def scheduled(self, pod: Obj, node: str) -> None:
        meta = pod.get("metadata") or {}
        self.events.eventf(
            pod, None, "Normal", "Scheduled", "Binding",
            f"Successfully assigned {meta.get('namespace')}/{meta.get('name')} to {node}",
            controller=_profile(pod, self.scheduler_name),
        )  # fmt: skip

    # --- status of pods that failed -----------------------------------------------------
    def unschedulable(
        self, pod: Obj, message: str, *, reason: str = "Unschedulable", nominated: str | None = None
    ) -> None:
        """kube's handleSchedulingFailure writes: a FailedScheduling event, and the
        PodScheduled=False condition (and nominatedNodeName) when they change."""
        self.events.eventf(
            pod, None, "Warning", "FailedScheduling", "Scheduling", truncate(message),
            controller=_profile(pod, self.scheduler_name),
        )  # fmt: skip
        status = pod.get("status") or {}
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": reason,
            "message": message,
        }
        patch: Obj = {}
        current = next(
            (c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), None
        )
        if current is None or any(current.get(k) != v for k, v in condition.items()):
            changed = current is None or current.get("status") != "False"
            stamp = rfc3339(self.clock.now_ms())
            last = stamp if changed or current is None else current.get("lastTransitionTime", stamp)
            patch["conditions"] = [{**condition, "lastProbeTime": None, "lastTransitionTime": last}]
        if nominated is not None and nominated != (status.get("nominatedNodeName") or ""):
            patch["nominatedNodeName"] = nominated or None
        if patch:
            self._patch_status(pod, patch)

    def nominate(self, pod: Obj, node: str) -> None:
        """Set (or with "" clear) status.nominatedNodeName."""
        if node != ((pod.get("status") or {}).get("nominatedNodeName") or ""):
            self._patch_status(pod, {"nominatedNodeName": node or None})

    def _patch_status(self, pod: Obj, status_patch: Obj) -> None:
        meta = pod.get("metadata") or {}
        namespace, name = str(meta.get("namespace", "default")), str(meta.get("name", ""))
        uid = str(meta.get("uid", ""))
        body: Obj = {"status": status_patch}
        if uid:
            body["metadata"] = {"uid": uid}  # a precondition: not another incarnation

        def patch() -> None:
            try:
                self.client.patch_status(PODS, name, body, namespace)
            except ApiError as exc:
                if not exc.not_found:
                    log.warning("status of pod %s/%s not written: %s", namespace, name, exc)

        self._background((namespace, name), patch)

    # --- preemption ----------------------------------------------------------------------
    def preempt(self, victim: Obj, preemptor: Obj, node: str) -> None:
        """kube's PreemptPod, in the background: DisruptionTarget, delete, event."""
        meta = victim.get("metadata") or {}
        namespace, name = str(meta.get("namespace", "default")), str(meta.get("name", ""))
        uid = str(meta.get("uid", ""))
        preemptor_uid = (preemptor.get("metadata") or {}).get("uid", "")
        profile = _profile(preemptor, self.scheduler_name)

        def act() -> None:
            condition = {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "PreemptionByScheduler",
                "message": f"{profile}: preempting to accommodate a higher priority pod",
                "lastTransitionTime": rfc3339(self.clock.now_ms()),
            }
            try:
                self.client.patch_status(
                    PODS, name, {"metadata": {"uid": uid}, "status": {"conditions": [condition]}},
                    namespace,
                )  # fmt: skip
                self.client.delete(PODS, name, namespace, uid=uid)
            except ApiError as exc:
                if not exc.not_found and not exc.conflict:
                    log.warning("preemption of %s/%s failed: %s", namespace, name, exc)
                return
            self.events.eventf(
                victim, preemptor, "Normal", "Preempted", "Preempting",
                f"Preempted by pod {preemptor_uid} on node {node}", controller=profile,
            )  # fmt: skip

        self._background((namespace, name), act)

    # --- background ----------------------------------------------------------------------
    def _background(self, key: tuple[str, str], work: Callable[[], None]) -> None:
        with self._lock:
            queued = key in self._pending
            self._pending[key] = work
        if not queued:
            self._pool.submit(self._run_latest, key)

    def _run_latest(self, key: tuple[str, str]) -> None:
        with self._lock:
            work = self._pending.pop(key, None)
        if work is not None:
            work()

    def flush(self, timeout_s: float = 10.0) -> None:
        """Wait until the background writes queued so far are done (tests, shutdown)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if not self._pending and self._pool._work_queue.empty():
                    break
            time.sleep(0.01)
        self.events.flush(max(0.0, deadline - time.monotonic()))


def _profile(pod: Obj, default: str) -> str:
    return str((pod.get("spec") or {}).get("schedulerName") or default)
