"""The roles' writes against a real cluster: the API server first, the store after.

:class:`KubeClusterWriter` is the :class:`~distsched.framework.cluster_writer.ClusterWriter`
of the Kubernetes mode. A binding is POSTed to the API server (``pods/binding``); only a
binding the API server accepted is recorded in the store, with the same script as in
standalone mode (it confirms the ledger's reservation and forgets the queued pod), so the
store never calls a pod bound before the API server did. A 409 means the pod is bound
already: to the same node (our own binding, replayed: recorded like a success) or to
another (someone else won: "conflict"; the bridge brings that binding into the store); a
404 means the pod is gone ("not-found"; the bridge brings the deletion). An API server that
cannot be reached is "unavailable": the binding fails and the pod is requeued with backoff.

Unlike the store's bind script, the API server cannot check the ledger's reservation in
the same step, so the binder claims every reservation first (the claim pushes the assume
deadline: the reaper leaves it alone while the binding is in flight):
:attr:`KubeClusterWriter.checks_reservations` is False.

Status patches, preemption and events go to the API server in the background
(:class:`~distsched.kube.writer.KubeWriter`): the bridge mirrors what they change back into
the store. A nomination is also written into the store at once (see
:meth:`KubeClusterWriter.set_nominated_node`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping, Sequence

from distsched.event_log import ACTIONS, PodEvent, scheduled
from distsched.kube.writer import ApiBinding, KubeWriter
from distsched.model import Pod, PodRef
from distsched.store import Store, StoreError
from distsched.store.writer import StoreWriter

CONDITION_CACHE = 100_000


def _split(key: str) -> tuple[str, str]:
    namespace, _, name = key.partition("/")
    return namespace, name


def _reference(pod: PodRef) -> dict[str, object]:
    namespace, name = _split(pod.key)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"namespace": namespace, "name": name, "uid": pod.uid},
    }


class KubeClusterWriter:
    checks_reservations = False
    """The binder must claim reservations before binding (see the module docstring)."""

    def __init__(self, api: KubeWriter, store: Store) -> None:
        self.api = api
        self.store = StoreWriter(store)
        self._conditions: dict[str, tuple[str, str]] = {}
        self._lock = threading.Lock()

    def bind_many(
        self,
        bindings: Sequence[tuple[str, str, str]],
        *,
        reservations: Mapping[str, str] | None = None,
        scheduled_by: Mapping[str, str] | None = None,
    ) -> list[str]:
        calls = []
        for key, uid, node in bindings:
            namespace, name = _split(key)
            calls.append(ApiBinding(namespace, name, uid, node))
        results = self.api.bind_many(calls)
        answers: list[str] = [""] * len(bindings)
        accepted: list[int] = []
        for i, ((_key, _uid, node), result) in enumerate(zip(bindings, results, strict=True)):
            if result.status == "bound" or (result.status == "conflict" and result.detail == node):
                accepted.append(i)
            elif result.status == "error":
                answers[i] = "unavailable"
            else:
                answers[i] = result.status  # conflict (elsewhere) or not-found
        if accepted:
            stored = self.store.bind_many(
                [bindings[i] for i in accepted], reservations=reservations
            )
            for i, answer in zip(accepted, stored, strict=True):
                # The API server took our binding: the bridge may have mirrored it into
                # the store before we did ("already-bound"); it is still ours.
                ours = results[i].status == "bound"
                answers[i] = "bound" if ours and str(answer) == "already-bound" else str(answer)
        if scheduled_by is not None:
            self.record_events(
                [
                    scheduled(key, uid, node, scheduled_by.get(key, ""))
                    for (key, uid, node), answer in zip(bindings, answers, strict=True)
                    if answer == "bound"
                ]
            )
        return answers

    def bind(self, pod: PodRef, node: str) -> str:
        answers = self.bind_many([(pod.key, pod.uid, node)])
        answer = answers[0]
        if answer in ("bound", "already-bound"):
            return answer
        raise RuntimeError(f"binding {pod.key} to {node}: {answer}")

    def preempt(self, victim: Pod, *, preemptor: Pod, node: str) -> None:
        """The victim is marked in the store at once (DisruptionTarget, as the API server
        will have it), then evicted through the API server in the background: the other
        workers' preemption counts it as terminating while its deletion is queued there,
        instead of choosing it again for another preemptor."""
        preemptor_obj = _pod_dict(preemptor)
        # One condition, one time: the store's copy and the API server's patch agree.
        condition = self.api.victim_condition(preemptor_obj)
        with contextlib.suppress(StoreError):  # gone already, or another incarnation
            self.store.store.update_pod_status(
                victim.key, conditions=[condition], uid=victim.metadata.uid or None
            )
        self.api.preempt(_pod_dict(victim), preemptor_obj, node, condition)

    def preempt_all(
        self, victims: Sequence[Pod], *, preemptor: Pod, node: str
    ) -> list[StoreError | None]:
        refused: list[StoreError | None] = []
        for victim in victims:
            try:
                self.preempt(victim, preemptor=preemptor, node=node)
                refused.append(None)
            except StoreError as exc:
                refused.append(exc)
        return refused

    def deleting(self, pod_keys: Sequence[str]) -> bool:
        return self.api.deleting(pod_keys)

    def set_nominated_node(
        self,
        pod: PodRef,
        node: str,
        *,
        unschedulable: tuple[str, str] | None = None,
        seen: Mapping[str, object] | None = None,
    ) -> None:
        """Written into the store at once, then patched through the API server in the
        background. kube-scheduler's nominator is its own memory, which its next decision
        reads; the store is the workers' shared one. Through the API server alone, the
        other workers learned a nomination seconds later under load (the patch queued
        behind the victims' deletions, then the watch and the bridge), and meanwhile
        chose the same node and victims for their own preemptors. The bridge's mirror
        later writes the API server's copy over it (the same nomination once the patch
        is in). A pod the store no longer has (or has under another uid) raises
        :class:`~distsched.store.StoreError`, and nothing goes to the API server. The
        condition of ``unschedulable`` is patched as :meth:`pod_unschedulable` patches it."""
        self.store.set_nominated_node(pod, node, seen=seen)
        self.api.nominate(_reference(pod) | {"status": {"nominatedNodeName": None}}, node)
        if unschedulable is not None:
            reason, message = unschedulable
            self.pod_unschedulable(pod, reason=reason, message=message)

    def pod_unschedulable(self, pod: PodRef, *, reason: str, message: str) -> bool:
        """Patched in the background when it differs from what this process last wrote
        for that pod (the store keeps no conditions: they are the API server's)."""
        with self._lock:
            if self._conditions.get(pod.key + "|" + pod.uid) == (reason, message):
                return True
            if len(self._conditions) >= CONDITION_CACHE:
                self._conditions.clear()
            self._conditions[pod.key + "|" + pod.uid] = (reason, message)
        self.api.condition(_reference(pod), reason=reason, message=message)
        return True

    def bind_volumes(
        self,
        pod: PodRef,
        node: str,
        *,
        static: Sequence[tuple[str, str]],
        provision: Sequence[str],
    ) -> None:
        """Through the API server (the bridge brings the PVs and claims it changes)."""
        self.api.bind_volumes(_split(pod.key)[0], node, static, provision)

    def record_events(self, events: Sequence[PodEvent]) -> None:
        for event in events:
            action = ACTIONS.get(event.reason, "Scheduling")
            self.api.events.eventf(
                _reference(PodRef(event.pod_key, event.uid)),
                None,
                event.event_type,
                event.reason,
                action,
                event.message,
                controller=event.source or None,
            )

    def close(self) -> None:
        self.api.close()


def _pod_dict(pod: Pod) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "namespace": pod.metadata.namespace,
            "name": pod.metadata.name,
            "uid": pod.metadata.uid,
        },
        "spec": {"schedulerName": pod.spec.scheduler_name},
    }
