"""VolumeBinding: a pod's PersistentVolumeClaims decide where it may go, and the claims
waiting for their first consumer are bound or provisioned for the node chosen (PreFilter,
Filter, Reserve, Unreserve, PreBind), as kube's plugin.

- PreFilter: a claim missing, lost, being deleted, or an ephemeral one not the pod's own
  makes the pod unresolvable with kube's text; a claim not yet bound whose class binds
  Immediately too ("pod has unbound immediate PersistentVolumeClaims": the PV controller
  binds it, not the scheduler). Claims are "bound" once the PV controller completed the
  binding (``pv.kubernetes.io/bind-completed``), as kube's isPVCFullyBound.
- Filter, per node: each bound claim's PV must exist and admit the node (its node
  affinity); each claim of a WaitForFirstConsumer class not bound yet must either find a
  static PV (kube's FindMatchingVolume: same class, available, large enough with the
  smallest chosen, access modes, selector, node affinity; one PV per claim) or be
  provisionable there (the class has a provisioner and its allowedTopologies admit the
  node); a claim already given a node (``volume.kubernetes.io/selected-node``) only fits
  that node. Failures are UnschedulableAndUnresolvable, as kube's.
- Reserve: the chosen node's plan (static PV per claim, claims to provision) goes into
  the cycle state as plain data for the binder, and the PVs are assumed in this worker
  (other pods it decides do not take them; kube's assume cache). Unreserve forgets them.
- PreBind (binder): the cluster writer binds the static PVs (both ways, a resourceVersion
  precondition on each write: another binder that took the PV first makes this binding
  fail and the pod go back to the queue) and sets the selected-node annotation on the
  claims to provision; a pod with every claim bound skips it and binds in the batch.

Provisioning also needs room: for a driver whose CSIDriver has ``storageCapacity: true``,
some CSIStorageCapacity of the class whose node topology selects the node must allow the
claim's size ("node(s) did not have enough free storage"). Not modelled: the Score (kube
scores only with its StorageCapacityScoring gate, alpha and off by default), PreBind's
wait for the PV controller to finish (the pod is bound once its volumes' bindings are
written; the kubelet waits for the volumes), volume modes and VolumeAttributesClasses.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from distsched.framework.cycle_state import CycleState
from distsched.framework.events import ActionType, ClusterEvent, EventResource
from distsched.framework.interface import (
    FilterPlugin,
    FilterResult,
    Handle,
    PreBindPlugin,
    PreFilterPlugin,
    PreFilterResult,
    ReservePlugin,
    SignPlugin,
)
from distsched.framework.listers import VolumeObjects
from distsched.framework.plugins.helpers.claims import (
    claim_not_found,
    not_the_pods_claim,
    uses_claim_hint,
)
from distsched.framework.podinfo import PodInfo
from distsched.framework.snapshot import Snapshot
from distsched.framework.status import PluginError, Status
from distsched.model.labels import compile_selector
from distsched.model.nodeaffinity import term_matches_node
from distsched.model.objects import Node, Pod
from distsched.model.volumes import (
    BIND_COMPLETED_ANNOTATION,
    NO_PROVISIONER,
    SELECTED_NODE_ANNOTATION,
    WAIT_FOR_FIRST_CONSUMER,
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)

NAME = "VolumeBinding"
EVENTS: tuple[ClusterEvent, ...] = (
    ClusterEvent(EventResource.STORAGE_CLASS, ActionType.ADD | ActionType.UPDATE),
    ClusterEvent(EventResource.PERSISTENT_VOLUME_CLAIM, ActionType.ADD | ActionType.UPDATE),
    ClusterEvent(EventResource.PERSISTENT_VOLUME, ActionType.ADD | ActionType.UPDATE),
    ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL),
    ClusterEvent(EventResource.CSI_NODE, ActionType.ADD | ActionType.UPDATE),
    ClusterEvent(EventResource.CSI_DRIVER, ActionType.UPDATE),
    ClusterEvent(EventResource.CSI_STORAGE_CAPACITY, ActionType.ADD | ActionType.UPDATE),
)
ERR_REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
ERR_REASON_NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
ERR_REASON_NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
ERR_REASON_PV_NOT_EXIST = (
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
)
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
PLAN_KEY = NAME + "/plan"  # the chosen node's plan, plain data for the binder
ASSUME_TTL_S = 120.0
_STATE_KEY = "PreFilter" + NAME


@dataclass(slots=True)
class _Claims:
    bound: list[PersistentVolumeClaim]
    delayed: list[PersistentVolumeClaim]  # WaitForFirstConsumer, not bound yet
    candidates: dict[str, list[PersistentVolume]]  # class -> its PVs
    plans: dict[str, tuple[list[tuple[str, str]], list[str]]] = field(default_factory=dict)


def is_fully_bound(claim: PersistentVolumeClaim) -> bool:
    return bool(claim.volume_name) and BIND_COMPLETED_ANNOTATION in claim.metadata.annotations


def volume_bound_to(pv: PersistentVolume, claim: PersistentVolumeClaim) -> bool:
    """kube's IsVolumeBoundToClaim."""
    ref = pv.claim_ref
    if ref is None or ref.name != claim.metadata.name or ref.namespace != claim.metadata.namespace:
        return False
    return not ref.uid or ref.uid == claim.metadata.uid


def admits(pv: PersistentVolume, node: Node) -> bool:
    """kube's CheckNodeAffinity: the PV's required node affinity admits the node."""
    terms = pv.node_affinity
    return terms is None or any(term_matches_node(t, node) for t in terms)


def find_matching_volume(
    claim: PersistentVolumeClaim,
    volumes: list[PersistentVolume],
    node: Node,
    excluded: set[str],
) -> PersistentVolume | None:
    """kube's FindMatchingVolume for a claim being bound with a node (delayed binding):
    a PV pre-bound to the claim wins if it admits the node; otherwise the smallest
    available PV of the claim's class that fits."""
    selector = compile_selector(claim.selector) if claim.selector is not None else None
    best: PersistentVolume | None = None
    for pv in volumes:
        if pv.metadata.name in excluded:
            continue
        if pv.claim_ref is not None and not volume_bound_to(pv, claim):
            continue
        if pv.capacity < claim.storage_request:
            continue
        node_ok = admits(pv, node)
        if volume_bound_to(pv, claim):
            return pv if node_ok else None
        if pv.phase != "Available":
            continue
        if selector is not None and not selector.matches(pv.metadata.labels):
            continue
        if pv.storage_class_name != claim.class_name or not node_ok:
            continue
        if not set(claim.access_modes) <= set(pv.access_modes):
            continue
        if best is None or pv.capacity < best.capacity:
            best = pv
    return best


def topology_admits(storage_class: StorageClass, node: Node) -> bool:
    """kube's MatchTopologySelectorTerms: no terms, or some term all of whose
    requirements the node's labels meet."""
    terms = storage_class.allowed_topologies
    if not terms:
        return True
    labels = node.metadata.labels
    return any(all(labels.get(k) in values for k, values in t.requirements) for t in terms)


class VolumeBinding(PreFilterPlugin, FilterPlugin, ReservePlugin, PreBindPlugin, SignPlugin):
    name = NAME
    reads_only_its_node = True
    reads_only_its_node_usage = True  # PVs and the node's labels, never its pods

    def __init__(self, handle: Handle) -> None:
        self.volumes: VolumeObjects = handle.listers.volumes
        self.bind_volumes = handle.bind_volumes
        # PVs this worker reserved for claims and has not seen bound yet: pv -> claim
        # key (kube's assume cache). Later pods it decides do not take them. Unreserve
        # after a failed binding runs in the binder, so an entry also lapses after
        # ASSUME_TTL_S (a binding that failed leaves the PV unbound).
        self._assumed: dict[str, tuple[str, float]] = {}  # pv -> (claim key, since)
        self._lock = threading.Lock()

    def sign_pod(self, pod: Pod, info: PodInfo, snapshot: Snapshot) -> Hashable | None:
        # A pod with claims is not signed: placing an equal pod first may take its PV.
        return None if any(v.claim_name or v.ephemeral for v in pod.spec.volumes) else ()

    # ------------------------------------------------------------------ PreFilter
    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status | None]:
        if self._assumed:
            self.forget_bound()
        claims: list[PersistentVolumeClaim] = []
        namespace = pod.metadata.namespace
        for volume in pod.spec.volumes:
            name = volume.claim_for(pod.metadata.name)
            if not name:
                continue
            claim = self.volumes.claim(namespace, name)
            if claim is None:
                if volume.ephemeral:
                    return None, Status.unresolvable(
                        "waiting for ephemeral volume controller to create the "
                        f'persistentvolumeclaim "{name}"'
                    )
                return None, Status.unresolvable(claim_not_found(name))
            if claim.phase == "Lost":
                return None, Status.unresolvable(
                    f'persistentvolumeclaim "{name}" bound to non-existent persistentvolume '
                    f'"{claim.volume_name}"'
                )
            if claim.deleting:
                return None, Status.unresolvable(f'persistentvolumeclaim "{name}" is being deleted')
            if volume.ephemeral and not claim.is_for_pod(pod.metadata.uid):
                return None, Status.unresolvable(not_the_pods_claim(pod, name))
            claims.append(claim)
        if not claims:
            return None, Status.skip()
        bound: list[PersistentVolumeClaim] = []
        delayed: list[PersistentVolumeClaim] = []
        for claim in claims:
            if is_fully_bound(claim):
                bound.append(claim)
            elif not claim.volume_name and self._delays_binding(claim):
                delayed.append(claim)
            else:
                return None, Status.unresolvable(UNBOUND_IMMEDIATE)
        candidates: dict[str, list[PersistentVolume]] = {}
        if delayed:
            classes = {c.class_name for c in delayed}
            for pv in self.volumes.volumes():
                if pv.storage_class_name in classes:
                    candidates.setdefault(pv.storage_class_name, []).append(pv)
        state.write(_STATE_KEY, _Claims(bound, delayed, candidates))
        return None, None

    def _delays_binding(self, claim: PersistentVolumeClaim) -> bool:
        """kube's IsDelayBindingMode (a class that does not exist binds Immediately)."""
        if not claim.class_name:
            return False
        found = self.volumes.storage_class(claim.class_name)
        return found is not None and found.volume_binding_mode == WAIT_FOR_FIRST_CONSUMER

    # ------------------------------------------------------------------ Filter
    def filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, indices: np.ndarray
    ) -> FilterResult:
        claims: _Claims | None = state.get(_STATE_KEY)
        if claims is None:
            return FilterResult.all_pass()
        n = len(indices)
        if not claims.delayed:
            # Bound claims only (the common case): the same answer for every node unless
            # a PV has node affinity.
            pvs = [self.volumes.volume(c.volume_name) for c in claims.bound]
            if any(pv is None for pv in pvs):
                return FilterResult.reject_all(n, ERR_REASON_PV_NOT_EXIST, unresolvable=True)
            if all(pv is not None and pv.node_affinity is None for pv in pvs):
                return FilterResult.all_pass()
        masks = {
            r: np.zeros(n, dtype=bool)
            for r in (
                ERR_REASON_NODE_CONFLICT,
                ERR_REASON_BIND_CONFLICT,
                ERR_REASON_NOT_ENOUGH_SPACE,
                ERR_REASON_PV_NOT_EXIST,
            )
        }
        with self._lock:
            assumed = {pv: claim for pv, (claim, _) in self._assumed.items()}
        for i, index in enumerate(indices):
            node = snapshot.node(int(index))
            for reason in self.find_pod_volumes(claims, node, assumed):
                masks[reason][i] = True
        result = FilterResult()
        for reason, mask in masks.items():
            result.add(reason, mask, unresolvable=True)
        return result

    def find_pod_volumes(self, claims: _Claims, node: Node, assumed: dict[str, str]) -> list[str]:
        """kube's FindPodVolumes for one node: the reasons it fails (none: the node fits,
        and its plan is kept in ``claims.plans``)."""
        reasons: list[str] = []
        missing = False
        for claim in claims.bound:
            pv = self.volumes.volume(claim.volume_name)
            if pv is None:
                missing = True  # kube's checkBoundClaims stops at the first one
                break
            if not admits(pv, node):
                reasons.append(ERR_REASON_NODE_CONFLICT)
                break
        static: list[tuple[str, str]] = []
        provision: list[str] = []
        name = node.metadata.name
        to_match: list[PersistentVolumeClaim] = []
        for claim in claims.delayed:
            selected = claim.metadata.annotations.get(SELECTED_NODE_ANNOTATION)
            if selected is not None:
                if selected != name:
                    reasons.append(ERR_REASON_BIND_CONFLICT)
                    return reasons + ([ERR_REASON_PV_NOT_EXIST] if missing else [])
                provision.append(claim.metadata.name)
            else:
                to_match.append(claim)
        chosen: set[str] = set()
        unmatched: list[PersistentVolumeClaim] = []
        for claim in sorted(to_match, key=lambda c: c.storage_request):
            mine = {pv for pv, key in assumed.items() if key == claim.key}
            excluded = (set(assumed) - mine) | chosen
            pv = find_matching_volume(
                claim, claims.candidates.get(claim.class_name, []), node, excluded
            )
            if pv is None:
                unmatched.append(claim)
                continue
            chosen.add(pv.metadata.name)
            static.append((pv.metadata.name, claim.metadata.name))
        for claim in unmatched:
            storage_class = self.volumes.storage_class(claim.class_name)
            if storage_class is None:
                raise PluginError(f'failed to find storage class "{claim.class_name}"')
            provisioner = storage_class.provisioner
            if not provisioner or provisioner == NO_PROVISIONER:
                reasons.append(ERR_REASON_BIND_CONFLICT)
                break
            if not topology_admits(storage_class, node):
                reasons.append(ERR_REASON_BIND_CONFLICT)
                break
            if not self.has_enough_capacity(claim, storage_class, node):
                reasons.append(ERR_REASON_NOT_ENOUGH_SPACE)
                break
            provision.append(claim.metadata.name)
        if missing:
            reasons.append(ERR_REASON_PV_NOT_EXIST)
        if not reasons and (static or provision):
            claims.plans[name] = (static, provision)
        return reasons

    def has_enough_capacity(
        self, claim: PersistentVolumeClaim, storage_class: StorageClass, node: Node
    ) -> bool:
        """kube's hasEnoughCapacity: only for a driver whose CSIDriver asks for capacity
        tracking; then some CSIStorageCapacity of the class whose topology selects the
        node must allow the claim's size (maximumVolumeSize, else capacity)."""
        size = claim.storage_request
        if not size:
            return True  # no storage requested
        driver = self.volumes.csi_driver(storage_class.provisioner)
        if driver is None or not driver.storage_capacity:
            return True
        labels = node.metadata.labels
        for capacity in self.volumes.capacities():
            if capacity.storage_class_name != storage_class.metadata.name:
                continue
            limit = capacity.volume_limit()
            if limit is None or limit < size or capacity.node_topology is None:
                continue
            if compile_selector(capacity.node_topology).matches(labels):
                return True
        return False

    # ------------------------------------------------------------------ Reserve
    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        claims: _Claims | None = state.get(_STATE_KEY)
        if claims is None:
            return None
        plan = claims.plans.get(node_name)
        if plan is None:
            return None  # every claim bound already: PreBind has nothing to do
        static, provision = plan
        namespace = pod.metadata.namespace
        now = time.monotonic()
        with self._lock:
            for pv, claim in static:
                self._assumed[pv] = (f"{namespace}/{claim}", now)
        state.write(
            PLAN_KEY,
            {"static": [list(s) for s in static], "provision": list(provision)},
        )
        return None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        plan = state.get(PLAN_KEY)
        if not plan:
            return
        namespace = pod.metadata.namespace
        with self._lock:
            for pv, claim in plan["static"]:
                held = self._assumed.get(pv)
                if held is not None and held[0] == f"{namespace}/{claim}":
                    del self._assumed[pv]

    def forget_bound(self) -> None:
        """Drop assumed PVs the lister shows bound (or gone), as kube's assume cache
        drops an assumed object once the informer brings a newer one, and those assumed
        longer than ASSUME_TTL_S ago."""
        expired = time.monotonic() - ASSUME_TTL_S
        with self._lock:
            for pv_name, (_, since) in list(self._assumed.items()):
                pv = self.volumes.volume(pv_name)
                if pv is None or pv.claim_ref is not None or since < expired:
                    del self._assumed[pv_name]

    # ------------------------------------------------------------------ PreBind
    def binding_needs_state(self, state: CycleState) -> bool:
        """kube's PreBindPreFlight: Skip when every claim was bound already."""
        return bool(state.get(PLAN_KEY))

    def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        plan = state.get(PLAN_KEY)
        if not plan:
            return None
        if self.bind_volumes is None:
            raise PluginError("no cluster writer to bind the pod's volumes with")
        static = [(pv, claim) for pv, claim in plan["static"]]
        self.bind_volumes(pod, node_name, static, list(plan["provision"]))
        return None


def new(args: dict[str, Any], handle: Handle) -> VolumeBinding:
    return VolumeBinding(handle)


# ---------------------------------------------------------------------- QueueingHints
def queueing_hint(event: ClusterEvent, pod: Pod, old: Any, new: Any, handle: Handle) -> bool | None:
    """kube's isSchedulableAfterPersistentVolumeClaimChange, ...StorageClassChange and
    ...CSINodeChange; PV and node events have none."""
    if event.resource == EventResource.PERSISTENT_VOLUME_CLAIM:
        return uses_claim_hint(pod, new, ephemeral=True)
    if event.resource == EventResource.STORAGE_CLASS:
        if old is None:
            return True
        if not isinstance(old, StorageClass) or not isinstance(new, StorageClass):
            return None
        return old.allowed_topologies != new.allowed_topologies
    if event.resource == EventResource.CSI_STORAGE_CAPACITY:
        if old is None:
            return True
        if not isinstance(old, CSIStorageCapacity) or not isinstance(new, CSIStorageCapacity):
            return None
        before, after = old.volume_limit(), new.volume_limit()
        return after is not None and (before is None or after > before)
    if event.resource == EventResource.CSI_DRIVER:
        # kube queues only pods with inline CSI volumes of the driver, which are not
        # modelled here (a claim's driver is its class's provisioner).
        return False
    if event.resource == EventResource.CSI_NODE:
        # kube queues on an added CSINode, or on a change of its migrated-plugins
        # annotation (CSI migration is not modelled here).
        return old is None
    return None
