"""VolumeRestrictions: disks that may not be mounted twice, and ReadWriteOncePod claims
(PreFilter, Filter), as kube's plugin.

- In-tree disks: a GCE PD shared unless every pod mounts it read-only, an AWS EBS volume
  never, an ISCSI IQN unless all read-only, an RBD image (same pool and image, a shared
  monitor) unless all read-only: a node where another pod mounts the disk so fails
  ("node(s) had no available disk").
- A claim with the ReadWriteOncePod access mode that some pod on any node already uses
  fails every node ("node(s) unavailable due to PersistentVolumeClaim with
  ReadWriteOncePod access mode already in-use by another pod"); preemption may free it
  (the PreFilter extensions count the pods a dry run removes). A claim that does not
  exist makes the pod unresolvable (``persistentvolumeclaim "x" not found``).

Across workers a node's disk conflicts are closed as any node-local rule is (the pod's
decision checks the node's generation: ``workers/schedule_one.py``'s ``constrained``).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np

from distsched.framework.cycle_state import CycleState
from distsched.framework.events import (
    NODE_ADD_OR_SCHEDULING_CHANGE,
    ActionType,
    ClusterEvent,
    EventResource,
)
from distsched.framework.interface import (
    FilterPlugin,
    FilterResult,
    Handle,
    PreFilterPlugin,
    PreFilterResult,
    SignPlugin,
)
from distsched.framework.plugins.helpers.claims import claim_not_found, uses_claim_hint
from distsched.framework.plugins.helpers.prefilter_state import CountingPreFilterExtensions
from distsched.framework.podinfo import PodInfo
from distsched.framework.snapshot import Snapshot
from distsched.framework.status import Status
from distsched.model.objects import Pod
from distsched.model.volumes import READ_WRITE_ONCE_POD, PodVolume

NAME = "VolumeRestrictions"
EVENTS: tuple[ClusterEvent, ...] = (
    ClusterEvent(EventResource.POD, ActionType.DELETE),
    ClusterEvent(EventResource.NODE, NODE_ADD_OR_SCHEDULING_CHANGE),
    ClusterEvent(EventResource.PERSISTENT_VOLUME_CLAIM, ActionType.ADD),
)
ERR_REASON_DISK_CONFLICT = "node(s) had no available disk"
ERR_REASON_RWOP_CONFLICT = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode "
    "already in-use by another pod"
)
_STATE_KEY = "PreFilter" + NAME


@dataclass(slots=True)
class _State:
    rwop_claims: frozenset[str]  # claim names (the pod's namespace)
    conflicting: int  # how many uses of those claims pods on nodes make
    disks: tuple[PodVolume, ...]  # the pod's volumes with in-tree disks

    def clone(self) -> _State:
        return _State(self.rwop_claims, self.conflicting, self.disks)

    def update_with_pod(
        self, info: PodInfo, snapshot: Snapshot, node_index: int, sign: int
    ) -> None:
        # As kube's updateWithPod: by claim name alone.
        for volume in info.pod.spec.volumes:
            if volume.claim_name and volume.claim_name in self.rwop_claims:
                self.conflicting += sign


def is_volume_conflict(volume: PodVolume, existing: Pod) -> bool:
    """kube's isVolumeConflict: ``volume`` (of the incoming pod) against every volume of
    ``existing``."""
    for other in existing.spec.volumes:
        gce, other_gce = volume.gce_pd, other.gce_pd
        if (
            gce is not None
            and other_gce is not None
            and gce.pd_name == other_gce.pd_name
            and not (gce.read_only and other_gce.read_only)
        ):
            return True
        if volume.aws_volume_id and volume.aws_volume_id == other.aws_volume_id:
            return True
        iscsi, other_iscsi = volume.iscsi, other.iscsi
        if (
            iscsi is not None
            and other_iscsi is not None
            and iscsi.iqn == other_iscsi.iqn
            and not (iscsi.read_only and other_iscsi.read_only)
        ):
            return True
        if volume.rbd is not None and other.rbd is not None:
            a, b = volume.rbd, other.rbd
            if (
                set(a.monitors) & set(b.monitors)
                and a.pool == b.pool
                and a.image == b.image
                and not (a.read_only and b.read_only)
            ):
                return True
    return False


def satisfies_volume_conflicts(disks: tuple[PodVolume, ...], pods: list[Pod]) -> bool:
    return not any(is_volume_conflict(v, p) for v in disks for p in pods if p.spec.volumes)


class VolumeRestrictions(CountingPreFilterExtensions, PreFilterPlugin, FilterPlugin, SignPlugin):
    name = NAME
    pre_filter_state_key = _STATE_KEY
    # The ReadWriteOncePod count is cluster-wide (a dry run's removals on other nodes
    # change it), so a node's verdict does not read that node alone.
    reads_only_its_node = False

    def __init__(self, handle: Handle) -> None:
        self.volumes = handle.listers.volumes

    def sign_pod(self, pod: Pod, info: PodInfo, snapshot: Snapshot) -> Hashable | None:
        # A pod using claims is not signed: placing an equal pod before it changes which
        # ReadWriteOncePod claims are in use (the snapshot's claim users, not a node).
        return None if pod.spec.volumes else ()

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status | None]:
        volumes = pod.spec.volumes
        if not volumes:
            return None, Status.skip()
        disks = tuple(v for v in volumes if v.has_disk)
        namespace = pod.metadata.namespace
        rwop: set[str] = set()
        for volume in volumes:
            if not volume.claim_name:
                continue
            claim = self.volumes.claim(namespace, volume.claim_name)
            if claim is None:
                return None, Status.unresolvable(claim_not_found(volume.claim_name))
            if READ_WRITE_ONCE_POD in claim.access_modes:
                rwop.add(claim.metadata.name)
        users = snapshot.claim_users
        conflicting = sum(1 for name in rwop if users.get(f"{namespace}/{name}", 0) > 0)
        if not disks and conflicting == 0:
            return None, Status.skip()
        state.write(_STATE_KEY, _State(frozenset(rwop), conflicting, disks))
        return None, None

    def filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, indices: np.ndarray
    ) -> FilterResult:
        found: _State | None = state.get(_STATE_KEY)
        if found is None:
            return FilterResult.all_pass()
        result = FilterResult()
        if found.disks:
            conflict = np.fromiter(
                (
                    not satisfies_volume_conflicts(
                        found.disks, [i.pod for i in snapshot.pods_on(int(index)).values()]
                    )
                    for index in indices
                ),
                dtype=bool,
                count=len(indices),
            )
            result.add(ERR_REASON_DISK_CONFLICT, conflict)
        if found.conflicting > 0:
            # kube checks disks first and reports only that reason for such a node.
            rest = ~result.failed_mask(len(indices))
            result.add(ERR_REASON_RWOP_CONFLICT, rest)
        return result


def new(args: dict[str, Any], handle: Handle) -> VolumeRestrictions:
    return VolumeRestrictions(handle)


# ---------------------------------------------------------------------- QueueingHints
def queueing_hint(event: ClusterEvent, pod: Pod, old: Any, new: Any, handle: Handle) -> bool | None:
    """kube's isSchedulableAfterPersistentVolumeClaimAdded and isSchedulableAfterPodDeleted."""
    if event.resource == EventResource.PERSISTENT_VOLUME_CLAIM:
        return uses_claim_hint(pod, new, ephemeral=False)
    if event.resource == EventResource.ASSIGNED_POD and event.has(ActionType.DELETE):
        if not isinstance(old, Pod):
            return None
        if old.metadata.namespace != pod.metadata.namespace:
            return False
        disks = tuple(v for v in pod.spec.volumes if v.has_disk)
        if not satisfies_volume_conflicts(disks, [old]):
            return True
        claims = {v.claim_name for v in pod.spec.volumes if v.claim_name}
        return any(v.claim_name in claims for v in old.spec.volumes if v.claim_name)
    return None
