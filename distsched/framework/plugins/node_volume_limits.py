"""NodeVolumeLimits: a node may not get more volumes of a CSI driver than its CSINode
allows (PreFilter, Filter), as kube's CSILimits.

A volume counts once per node by its unique name ``<driver>/<volumeHandle>``: a claim
bound to a CSI PersistentVolume counts by the PV's handle; a claim not bound yet counts
by its class's provisioner (an in-tree provisioner by its CSI driver's name when the node
has a CSINode, as CSI migration names it) and a handle made from the claim's name, so
that pods sharing the claim count it once. Generic ephemeral volumes count by their
claim (``<pod>-<volume>``), which must be the pod's own. Volumes the pod shares with
pods already on the node add nothing. Not modelled: in-tree PersistentVolume sources and
inline in-tree volumes (kube counts them once translated to CSI), VolumeAttachments of
pods gone, the alpha VolumeLimitScaling gate.
"""

from __future__ import annotations

import secrets
from collections.abc import Hashable
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
    not_the_pods_claim,
    uses_claim_hint,
)
from distsched.framework.podinfo import PodInfo
from distsched.framework.snapshot import Snapshot
from distsched.framework.status import PluginError, Status
from distsched.model.objects import ObjectMeta, Pod
from distsched.model.volumes import CSINode, PersistentVolumeClaim

NAME = "NodeVolumeLimits"
EVENTS: tuple[ClusterEvent, ...] = (
    ClusterEvent(EventResource.CSI_NODE, ActionType.ADD | ActionType.UPDATE),
    ClusterEvent(EventResource.POD, ActionType.DELETE),
    ClusterEvent(EventResource.PERSISTENT_VOLUME_CLAIM, ActionType.ADD),
)
ERR_REASON_MAX_VOLUME_COUNT = "node(s) exceed max volume count"

# In-tree provisioners and the CSI drivers CSI migration hands them to (kube's
# csi-translation-lib; migration is on for all of them).
IN_TREE_TO_CSI = {
    "kubernetes.io/aws-ebs": "ebs.csi.aws.com",
    "kubernetes.io/gce-pd": "pd.csi.storage.gke.io",
    "kubernetes.io/azure-disk": "disk.csi.azure.com",
    "kubernetes.io/cinder": "cinder.csi.openstack.org",
    "kubernetes.io/portworx-volume": "pxd.portworx.com",
}


# What a node's attached volumes are derived from.
_READ_KINDS = ("PersistentVolumeClaim", "PersistentVolume", "StorageClass", "CSINode")


class ClaimNotFound(Exception):
    pass


# Any CSINode: what the incoming pod's volumes are on a node that has one.
_ANY_CSI_NODE = CSINode(ObjectMeta(name="", namespace=""))


class NodeVolumeLimits(PreFilterPlugin, FilterPlugin, SignPlugin):
    name = NAME
    reads_only_its_node = True

    def __init__(self, handle: Handle) -> None:
        self.volumes: VolumeObjects = handle.listers.volumes
        # kube's randomVolumeIDPrefix: handles of claims not bound yet, unique per plugin.
        self.prefix = secrets.token_hex(16)
        self._accounts = _AccountsHolder()

    def sign_pod(self, pod: Pod, info: PodInfo, snapshot: Snapshot) -> Hashable | None:
        return claims_signature(pod)

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status | None]:
        if any(v.claim_name or v.ephemeral for v in pod.spec.volumes):
            return None, None
        return None, Status.skip()

    def filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, indices: np.ndarray
    ) -> FilterResult:
        try:
            # The pod's own volumes on a node with a CSINode (one without has no limits).
            new = self.attachable(pod, _ANY_CSI_NODE, new_pod=True)
        except ClaimNotFound as exc:
            return FilterResult.reject_all(len(indices), str(exc), unresolvable=True)
        if not new:
            return FilterResult.all_pass()
        # What a node's pods use depends on claims, PVs and classes too (a claim bound
        # later counts by its PV's handle): any change of them starts the accounts over.
        accounts = self._accounts.of(snapshot, self.volumes.versions(*_READ_KINDS))
        accounts.refresh(indices, self)
        failed = np.zeros(len(indices), dtype=bool)
        for driver in set(new.values()):
            limit = accounts.limit(driver)[indices]
            count = accounts.count(driver)[indices].copy()
            for name, of_driver in new.items():
                if of_driver != driver:
                    continue
                # A volume already on the node adds nothing there (kube's dedupe).
                count += 1
                on = accounts.slots_using(name)
                if on:
                    count -= np.isin(indices, np.fromiter(on, dtype=np.int64, count=len(on)))
            failed |= (limit >= 0) & (count > limit)
        return FilterResult.of(ERR_REASON_MAX_VOLUME_COUNT, failed)

    def attachable(self, pod: Pod, csi_node: CSINode | None, *, new_pod: bool) -> dict[str, str]:
        """kube's filterAttachableVolumes: unique volume name -> driver, for the pod's
        claims. A missing claim of the incoming pod raises :class:`ClaimNotFound`; of a
        pod already on the node it is left out."""
        found: dict[str, str] = {}
        namespace = pod.metadata.namespace
        for volume in pod.spec.volumes:
            name = volume.claim_for(pod.metadata.name)
            if not name:
                continue
            claim = self.volumes.claim(namespace, name)
            if claim is None:
                if new_pod:
                    raise ClaimNotFound(
                        f"looking up PVC {namespace}/{name}: {claim_not_found(name)}"
                    )
                continue
            if volume.ephemeral and not claim.is_for_pod(pod.metadata.uid):
                if not new_pod:
                    continue
                raise PluginError(not_the_pods_claim(pod, name))
            driver, handle = self._driver_info(csi_node, claim)
            if driver and handle:
                found[f"{driver}/{handle}"] = driver
        return found

    def _driver_info(
        self, csi_node: CSINode | None, claim: PersistentVolumeClaim
    ) -> tuple[str, str]:
        """kube's getCSIDriverInfo: (driver, volume handle), ("", "") when not countable."""
        if claim.volume_name:
            pv = self.volumes.volume(claim.volume_name)
            if pv is not None:
                if pv.csi is None:
                    return "", ""  # an in-tree source (not translated here)
                return pv.csi.driver, pv.csi.volume_handle
        class_name = claim.class_name
        if not class_name:
            return "", ""
        storage_class = self.volumes.storage_class(class_name)
        if storage_class is None:
            return "", ""
        handle = f"{self.prefix}-{claim.metadata.namespace}/{claim.metadata.name}"
        provisioner = storage_class.provisioner
        if provisioner in IN_TREE_TO_CSI:
            if csi_node is None:
                return "", ""
            return IN_TREE_TO_CSI[provisioner], handle
        return provisioner, handle


class _Accounts:
    """Per slot of one snapshot: each CSI driver's attach limit (-1: none) and the number
    of its volumes the slot's pods use, and which slots use each volume. A slot is read
    again only when its generation moved (a pod came or went, the node changed); every
    slot when a storage object changed."""

    def __init__(self, snapshot: Snapshot, versions: tuple[int, ...]) -> None:
        self.snapshot = snapshot
        self.versions = versions
        self.seen = _grown(None, len(snapshot.generation), -1)
        self._limits: dict[str, np.ndarray] = {}
        self._counts: dict[str, np.ndarray] = {}
        self._attached: dict[int, dict[str, str]] = {}
        self._users: dict[str, set[int]] = {}

    def _column(self, table: dict[str, np.ndarray], driver: str, fill: int) -> np.ndarray:
        column = table.get(driver)
        size = len(self.snapshot.generation)
        if column is None or len(column) < size:
            table[driver] = column = _grown(column, size, fill)
        return column

    def limit(self, driver: str) -> np.ndarray:
        return self._column(self._limits, driver, -1)

    def count(self, driver: str) -> np.ndarray:
        return self._column(self._counts, driver, 0)

    def slots_using(self, volume: str) -> set[int]:
        return self._users.get(volume, set())

    def refresh(self, indices: np.ndarray, plugin: NodeVolumeLimits) -> None:
        generations = self.snapshot.generation
        if len(self.seen) < len(generations):
            self.seen = _grown(self.seen, len(generations), -1)
        stale = indices[self.seen[indices] != generations[indices]]
        for slot in stale.tolist():
            self._account(int(slot), plugin)
            self.seen[slot] = generations[slot]

    def _account(self, slot: int, plugin: NodeVolumeLimits) -> None:
        for name, driver in self._attached.pop(slot, {}).items():
            self.count(driver)[slot] -= 1
            self._users[name].discard(slot)
        for column in self._limits.values():
            column[slot] = -1
        csi_node = plugin.volumes.csi_node(self.snapshot.node_name(slot))
        if csi_node is None:
            return  # no limits: nothing to count against
        for driver, allocatable in csi_node.limits().items():
            self.limit(driver)[slot] = allocatable
        attached: dict[str, str] = {}
        for other in self.snapshot.pods_on(slot).values():
            if other.pod.spec.volumes:
                attached.update(plugin.attachable(other.pod, csi_node, new_pod=False))
        for name, driver in attached.items():
            self.count(driver)[slot] += 1
            self._users.setdefault(name, set()).add(slot)
        self._attached[slot] = attached


def _grown(array: np.ndarray | None, size: int, fill: int) -> np.ndarray:
    """``array`` extended to ``size`` slots (the table grew), new slots ``fill``."""
    grown = np.full(size, fill, dtype=np.int64)
    if array is not None:
        grown[: len(array)] = array
    return grown


class _AccountsHolder:
    """The accounts of the snapshot last filtered on, started over for another snapshot
    or after a storage object changed."""

    def __init__(self) -> None:
        self._current: _Accounts | None = None

    def of(self, snapshot: Snapshot, versions: tuple[int, ...]) -> _Accounts:
        current = self._current
        if current is None or current.snapshot is not snapshot or current.versions != versions:
            current = self._current = _Accounts(snapshot, versions)
        return current


def new(args: dict[str, Any], handle: Handle) -> NodeVolumeLimits:
    return NodeVolumeLimits(handle)


# ---------------------------------------------------------------------- QueueingHints
def queueing_hint(event: ClusterEvent, pod: Pod, old: Any, new: Any, handle: Handle) -> bool | None:
    """kube's isSchedulableAfterCSINodeUpdated, ...PodDeleted and ...PVCAdded (a CSINode
    added has no hint)."""
    if event.resource == EventResource.CSI_NODE:
        if old is None or not isinstance(old, CSINode) or not isinstance(new, CSINode):
            return None
        return any(
            (count or 0) > (old.drivers.get(name) or 0) for name, count in new.drivers.items()
        )
    if event.resource == EventResource.ASSIGNED_POD and event.has(ActionType.DELETE):
        if not isinstance(old, Pod):
            return None
        return any(v.claim_name or v.ephemeral for v in old.spec.volumes)
    if event.resource == EventResource.PERSISTENT_VOLUME_CLAIM:
        return uses_claim_hint(pod, new, ephemeral=True)
    return None
