"""VolumeZone: a pod's bound PersistentVolumes must be in the node's zone and region
(PreFilter, Filter), as kube's plugin.

A PV's zone and region labels (beta and GA; a multi-zone value joins zones with "__")
are matched against the node's, the GA label standing in when the node has only that
one. A node with none of the four labels is not checked. A claim that is not bound:
with a WaitForFirstConsumer class it is VolumeBinding's to place, with any other class
the pod cannot be placed yet ("PersistentVolume had no name"). A missing claim, PV or
class is unresolvable with kube's NotFound text.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np

from distsched.framework.cycle_state import CycleState
from distsched.framework.events import ActionType, ClusterEvent, EventResource
from distsched.framework.interface import (
    FilterPlugin,
    FilterResult,
    Handle,
    PreFilterPlugin,
    PreFilterResult,
    SignPlugin,
)
from distsched.framework.listers import VolumeObjects
from distsched.framework.plugins.helpers.claims import (
    claim_not_found,
    claims_signature,
    uses_claim_hint,
)
from distsched.framework.podinfo import PodInfo
from distsched.framework.snapshot import Snapshot
from distsched.framework.status import Status
from distsched.model.objects import Pod
from distsched.model.volumes import (
    GA_LABEL,
    WAIT_FOR_FIRST_CONSUMER,
    ZONE_LABELS,
    PersistentVolume,
    StorageClass,
    zones_of_label,
)

NAME = "VolumeZone"
EVENTS: tuple[ClusterEvent, ...] = (
    ClusterEvent(EventResource.STORAGE_CLASS, ActionType.ADD),
    ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL),
    ClusterEvent(EventResource.PERSISTENT_VOLUME_CLAIM, ActionType.ADD | ActionType.UPDATE),
    ClusterEvent(EventResource.PERSISTENT_VOLUME, ActionType.ADD | ActionType.UPDATE),
)
ERR_REASON_CONFLICT = "node(s) had no available volume zone"
_STATE_KEY = "PreFilter" + NAME


@dataclass(frozen=True, slots=True)
class PVTopology:
    pv_name: str
    key: str
    values: frozenset[str]


def pv_topologies(pv: PersistentVolume) -> list[PVTopology]:
    """kube's getPVTopologies: the PV's zone/region labels that parse."""
    out = []
    for key in ZONE_LABELS:
        value = pv.metadata.labels.get(key)
        if value is None:
            continue
        zones = zones_of_label(value)
        if zones is not None:
            out.append(PVTopology(pv.metadata.name, key, zones))
    return out


def topologies_of(
    volumes: VolumeObjects, pod: Pod
) -> tuple[list[PVTopology] | None, Status | None]:
    """kube's getPVbyPod: the topologies of the pod's bound PVs, or the rejection."""
    found: list[PVTopology] = []
    namespace = pod.metadata.namespace
    for volume in pod.spec.volumes:
        if not volume.claim_name:
            continue
        claim = volumes.claim(namespace, volume.claim_name)
        if claim is None:
            return None, Status.unresolvable(claim_not_found(volume.claim_name))
        if not claim.volume_name:
            class_name = claim.class_name
            if not class_name:
                return None, Status.unresolvable(
                    "PersistentVolumeClaim had no pv name and storageClass name"
                )
            storage_class = volumes.storage_class(class_name)
            if storage_class is None:
                return None, Status.unresolvable(
                    f'storageclass.storage.k8s.io "{class_name}" not found'
                )
            if storage_class.volume_binding_mode == WAIT_FOR_FIRST_CONSUMER:
                continue
            return None, Status.unresolvable("PersistentVolume had no name")
        pv = volumes.volume(claim.volume_name)
        if pv is None:
            return None, Status.unresolvable(f'persistentvolume "{claim.volume_name}" not found')
        found += pv_topologies(pv)
    return found, None


class VolumeZone(PreFilterPlugin, FilterPlugin, SignPlugin):
    name = NAME
    reads_only_its_node = True
    reads_only_its_node_usage = True  # the node's labels alone

    def __init__(self, handle: Handle) -> None:
        self.volumes = handle.listers.volumes

    def sign_pod(self, pod: Pod, info: PodInfo, snapshot: Snapshot) -> Hashable | None:
        return claims_signature(pod)

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status | None]:
        topologies, status = topologies_of(self.volumes, pod)
        if status is not None:
            return None, status
        if not topologies:
            return None, Status.skip()
        state.write(_STATE_KEY, topologies)
        return None, None

    def filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, indices: np.ndarray
    ) -> FilterResult:
        topologies: list[PVTopology] | None = state.get(_STATE_KEY)
        if not topologies:
            return FilterResult.all_pass()
        failed = np.zeros(len(indices), dtype=bool)
        for i, index in enumerate(indices):
            labels = snapshot.labels(int(index))
            if not any(key in labels for key in ZONE_LABELS):
                continue
            for topology in topologies:
                value = labels.get(topology.key)
                if value is None:
                    value = labels.get(GA_LABEL.get(topology.key, topology.key))
                if value is None or value not in topology.values:
                    failed[i] = True
                    break
        return FilterResult.of(ERR_REASON_CONFLICT, failed, unresolvable=True)


def new(args: dict[str, Any], handle: Handle) -> VolumeZone:
    return VolumeZone(handle)


# ---------------------------------------------------------------------- QueueingHints
def queueing_hint(event: ClusterEvent, pod: Pod, old: Any, new: Any, handle: Handle) -> bool | None:
    """kube's isSchedulableAfterStorageClassAdded, ...PersistentVolumeClaimChange and
    ...PersistentVolumeChange; node events have no hint."""
    if event.resource == EventResource.STORAGE_CLASS:
        if not isinstance(new, StorageClass):
            return None
        return new.volume_binding_mode == WAIT_FOR_FIRST_CONSUMER
    if event.resource == EventResource.PERSISTENT_VOLUME_CLAIM:
        return uses_claim_hint(pod, new, ephemeral=False)
    if event.resource == EventResource.PERSISTENT_VOLUME:
        if not isinstance(new, PersistentVolume):
            return None
        if old is None:
            return True
        if not isinstance(old, PersistentVolume):
            return None
        return pv_topologies(old) != pv_topologies(new)
    return None
