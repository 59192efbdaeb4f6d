"""The scheduler's writes in standalone mode: straight into the store, the cluster's truth.

:class:`StoreWriter` is the standalone :class:`~distsched.framework.cluster_writer.ClusterWriter`
(the binder's bindings, preemption's victims and nominations, the failure handler's
PodScheduled=False condition, the events). A victim is deleted without kube's
DisruptionTarget condition first. Events go to the bounded stream of
:mod:`distsched.event_log`: a batch binding's Scheduled events in its own script, the
others one pipeline per call.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from distsched import event_log
from distsched.event_log import PodEvent
from distsched.framework.cluster_writer import NORMAL, PREEMPTED
from distsched.model import Pod, PodRef
from distsched.model.volumes import SELECTED_NODE_ANNOTATION, bound_pair
from distsched.store.codec import node_name_of
from distsched.store.errors import Conflict, NotFound, StoreError
from distsched.store.redis_store import BindResult, Store

log = logging.getLogger(__name__)


class StoreWriter:
    checks_reservations = True  # the store's bind script checks and binds in one step

    def __init__(self, store: Store) -> None:
        self.store = store

    def bind_many(
        self,
        bindings: Sequence[tuple[str, str, str]],
        *,
        reservations: Mapping[str, str] | None = None,
        scheduled_by: Mapping[str, str] | None = None,
    ) -> builtins.list[BindResult]:
        return self.store.bind_many(bindings, reservations=reservations, scheduled_by=scheduled_by)

    def bind(self, pod: PodRef, node: str) -> str:
        return self.store.bind(pod.key, pod.uid or None, node)

    def preempt(self, victim: Pod, *, preemptor: Pod, node: str) -> None:
        (refused,) = self.preempt_all([victim], preemptor=preemptor, node=node)
        if refused is not None:
            raise refused

    def preempt_all(
        self, victims: Sequence[Pod], *, preemptor: Pod, node: str
    ) -> builtins.list[StoreError | None]:
        """The deletions in one round trip, their events in another."""
        if not victims:
            return []
        answers = self.store.delete_pods([(v.key, v.metadata.uid or None) for v in victims])
        events = []
        refused: builtins.list[StoreError | None] = []
        for victim, answer in zip(victims, answers, strict=True):
            # Gone already (NotFound) is what preemption wanted, with no event, as kube's.
            refused.append(None if isinstance(answer, NotFound) else answer)
            if answer is not None:
                continue
            log.debug("preempted %s for %s on %s", victim.key, preemptor.key, node)
            events.append(
                PodEvent(
                    victim.key,
                    victim.metadata.uid,
                    NORMAL,
                    PREEMPTED,
                    f"Preempted by pod {preemptor.metadata.uid} on node {node}",
                    source=preemptor.spec.scheduler_name,
                    related=preemptor.key,
                )
            )
        self.record_events(events)
        return refused

    def deleting(self, pod_keys: Sequence[str]) -> bool:
        return False  # preempt() deletes before it returns

    def set_nominated_node(
        self,
        pod: PodRef,
        node: str,
        *,
        unschedulable: tuple[str, str] | None = None,
        seen: Mapping[str, Any] | None = None,
    ) -> None:
        with_condition = unschedulable is not None
        stored = self.store.update_pod_status(
            pod.key,
            nominated_node_name=node,
            conditions=[_pod_scheduled_false(*unschedulable)] if unschedulable else [],
            uid=pod.uid or None,
            pending_only=with_condition,
            seen=dict(seen) if seen is not None else None,
        )
        if with_condition and node_name_of(stored):
            raise Conflict("Pod", pod.key, "", f"bound to {node_name_of(stored)} meanwhile")

    def pod_unschedulable(self, pod: PodRef, *, reason: str, message: str) -> bool:
        try:
            stored = self.store.update_pod_status(
                pod.key,
                conditions=[_pod_scheduled_false(reason, message)],
                uid=pod.uid or None,
                pending_only=True,
            )
        except StoreError as exc:
            log.debug("no PodScheduled condition for %s: %s", pod.key, exc)
            return False
        return not node_name_of(stored)

    def record_events(self, events: Sequence[PodEvent]) -> None:
        event_log.record(self.store.client, self.store.keys, events)

    def bind_volumes(
        self,
        pod: PodRef,
        node: str,
        *,
        static: Sequence[tuple[str, str]],
        provision: Sequence[str],
    ) -> None:
        """VolumeBinding's PreBind, standalone: each static PV bound to its claim (the PV
        first, conditional on its resourceVersion: a PV another binder took since is a
        Conflict), each claim to provision marked with the node (the controller's
        provisioner makes its PV there)."""
        namespace = pod.key.split("/", 1)[0]
        for pv_name, claim_name in static:
            pv = self.store.get("PersistentVolume", pv_name)
            claim = self.store.get("PersistentVolumeClaim", f"{namespace}/{claim_name}")
            if pv is None:
                raise NotFound("PersistentVolume", pv_name)
            if claim is None:
                raise NotFound("PersistentVolumeClaim", f"{namespace}/{claim_name}")
            ref = (pv.get("spec") or {}).get("claimRef")
            if ref and (ref.get("namespace"), ref.get("name")) != (namespace, claim_name):
                raise Conflict("PersistentVolume", pv_name, "", "bound to another claim")
            new_pv, new_claim = bound_pair(pv, claim)
            self.store.update(new_pv)
            self.store.update(new_claim)
        for claim_name in provision:
            key = f"{namespace}/{claim_name}"
            claim = self.store.get("PersistentVolumeClaim", key)
            if claim is None:
                raise NotFound("PersistentVolumeClaim", key)
            meta = claim.get("metadata") or {}
            annotations = {**(meta.get("annotations") or {}), SELECTED_NODE_ANNOTATION: node}
            self.store.update({**claim, "metadata": {**meta, "annotations": annotations}})


def _pod_scheduled_false(reason: str, message: str) -> dict[str, str]:
    return {"type": "PodScheduled", "status": "False", "reason": reason, "message": message}
