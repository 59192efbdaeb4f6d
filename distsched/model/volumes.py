"""Volumes as the scheduler reads them: a pod's ``spec.volumes`` and the storage objects
they lead to (PersistentVolumeClaim, PersistentVolume, StorageClass, CSINode).

Each decoder takes the object as the API server would hold it and raises
:class:`~distsched.model.errors.ManifestError` naming the field that is wrong, so
``apply`` refuses a bad object with its path (exit 2, nothing written) and a worker that
meets one anyway (written by another client) counts it as absent. Only the fields the
volume plugins read are decoded; the API server's defaults for them are applied here
(a StorageClass without ``volumeBindingMode`` is Immediate, an RBD volume without a pool
uses "rbd").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from distsched.model import names
from distsched.model.decode_common import (
    decode_label_selector,
    decode_meta,
    decode_node_selector_term,
)
from distsched.model.fields import INT32_MAX, Fields, expect_object, quote
from distsched.model.objects import LabelSelector, NodeSelectorTerm, ObjectMeta
from distsched.model.quantity import parse_quantity

READ_WRITE_ONCE = "ReadWriteOnce"
READ_ONLY_MANY = "ReadOnlyMany"
READ_WRITE_MANY = "ReadWriteMany"
READ_WRITE_ONCE_POD = "ReadWriteOncePod"
ACCESS_MODES = (READ_WRITE_ONCE, READ_ONLY_MANY, READ_WRITE_MANY, READ_WRITE_ONCE_POD)

IMMEDIATE = "Immediate"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
BINDING_MODES = (IMMEDIATE, WAIT_FOR_FIRST_CONSUMER)

# The storage class of a claim before spec.storageClassName existed (still honoured).
BETA_STORAGE_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
# Set on a claim by the PV controller once it completed the claim's binding (kube's
# isPVCFullyBound reads it), and on a PV or claim it bound itself.
BIND_COMPLETED_ANNOTATION = "pv.kubernetes.io/bind-completed"
BOUND_BY_CONTROLLER_ANNOTATION = "pv.kubernetes.io/bound-by-controller"
# The node a WaitForFirstConsumer claim's volume is to be provisioned for.
SELECTED_NODE_ANNOTATION = "volume.kubernetes.io/selected-node"
# StorageClass provisioner of classes without dynamic provisioning.
NO_PROVISIONER = "kubernetes.io/no-provisioner"

# PersistentVolume labels VolumeZone reads (beta and GA zone and region).
LABEL_ZONE_BETA = "failure-domain.beta.kubernetes.io/zone"
LABEL_REGION_BETA = "failure-domain.beta.kubernetes.io/region"
LABEL_ZONE = "topology.kubernetes.io/zone"
LABEL_REGION = "topology.kubernetes.io/region"
ZONE_LABELS = (LABEL_ZONE_BETA, LABEL_REGION_BETA, LABEL_ZONE, LABEL_REGION)
# The GA label a node may carry instead of a PV's beta one (kube's translateToGALabel).
GA_LABEL = {LABEL_ZONE_BETA: LABEL_ZONE, LABEL_REGION_BETA: LABEL_REGION}
# A PV in several zones lists them in one label value joined by this (kube's
# volumehelpers.LabelMultiZoneDelimiter).
MULTI_ZONE_DELIMITER = "__"

T = TypeVar("T")

VOLUME_KINDS = (
    "PersistentVolumeClaim",
    "PersistentVolume",
    "StorageClass",
    "CSINode",
    "CSIDriver",
    "CSIStorageCapacity",
)


# --------------------------------------------------------------------------- pod volumes
@dataclass(frozen=True, slots=True)
class GCEPersistentDisk:
    pd_name: str
    read_only: bool = False


@dataclass(frozen=True, slots=True)
class ISCSIDisk:
    iqn: str
    read_only: bool = False


@dataclass(frozen=True, slots=True)
class RBDImage:
    monitors: tuple[str, ...]
    pool: str
    image: str
    read_only: bool = False


@dataclass(frozen=True, slots=True)
class PodVolume:
    """One entry of ``spec.volumes``, as far as scheduling goes: the claim it uses (a
    persistentVolumeClaim, or a generic ephemeral volume, whose claim is
    ``<pod name>-<volume name>``) and the in-tree disks VolumeRestrictions checks for
    conflicts. Any other source (emptyDir, configMap, ...) leaves everything empty."""

    name: str
    claim_name: str = ""  # persistentVolumeClaim.claimName
    ephemeral: bool = False  # spec.volumes[].ephemeral
    gce_pd: GCEPersistentDisk | None = None
    aws_volume_id: str = ""  # awsElasticBlockStore.volumeID
    iscsi: ISCSIDisk | None = None
    rbd: RBDImage | None = None

    @property
    def has_disk(self) -> bool:
        """Whether VolumeRestrictions checks this volume against the node's pods."""
        return bool(self.gce_pd or self.aws_volume_id or self.iscsi or self.rbd)

    def claim_for(self, pod_name: str) -> str:
        """The name of the claim this volume uses in a pod named ``pod_name`` ("" none)."""
        if self.ephemeral:
            return f"{pod_name}-{self.name}"
        return self.claim_name


def decode_pod_volumes(spec: Fields) -> tuple[PodVolume, ...]:
    """``spec.volumes``: names unique DNS-1123 labels; the sources the plugins read."""
    out: list[PodVolume] = []
    seen: set[str] = set()
    for f in spec.get_objs("volumes"):
        name = f.get_str("name", required=True)
        f.check_str("name", name, names.dns1123_label)
        if name in seen:
            f.fail("name", f"duplicate volume {quote(name)}")
        seen.add(name)
        out.append(_decode_pod_volume(f, name))
    return tuple(out)


def _decode_pod_volume(f: Fields, name: str) -> PodVolume:
    claim = f.get_obj("persistentVolumeClaim")
    claim_name = ""
    if claim is not None:
        claim_name = claim.get_str("claimName", required=True)
        claim.check_str("claimName", claim_name, names.dns1123_subdomain)
    gce = f.get_obj("gcePersistentDisk")
    aws = f.get_obj("awsElasticBlockStore")
    iscsi = f.get_obj("iscsi")
    rbd = f.get_obj("rbd")
    return PodVolume(
        name=name,
        claim_name=claim_name,
        ephemeral=f.has("ephemeral"),
        gce_pd=(
            GCEPersistentDisk(gce.get_str("pdName", required=True), gce.get_bool("readOnly"))
            if gce is not None
            else None
        ),
        aws_volume_id=aws.get_str("volumeID", required=True) if aws is not None else "",
        iscsi=(
            ISCSIDisk(iscsi.get_str("iqn", required=True), iscsi.get_bool("readOnly"))
            if iscsi is not None
            else None
        ),
        rbd=(
            RBDImage(
                tuple(rbd.get_strs("monitors")),
                rbd.get_str("pool") or "rbd",
                rbd.get_str("image", required=True),
                rbd.get_bool("readOnly"),
            )
            if rbd is not None
            else None
        ),
    )


# --------------------------------------------------------------------------- storage objects
@dataclass(frozen=True, slots=True)
class OwnerReference:
    uid: str
    controller: bool = False


@dataclass(frozen=True, slots=True)
class PersistentVolumeClaim:
    metadata: ObjectMeta
    access_modes: tuple[str, ...] = ()
    # spec.storageClassName, else the beta annotation; None: neither (the default
    # class applies), "": explicitly none.
    storage_class_name: str | None = None
    volume_name: str = ""  # spec.volumeName: the PV it is bound (or pre-bound) to
    storage_request: int = 0  # spec.resources.requests.storage, bytes
    selector: LabelSelector | None = None
    phase: str = "Pending"
    deleting: bool = False  # metadata.deletionTimestamp set
    owners: tuple[OwnerReference, ...] = ()
    kind = "PersistentVolumeClaim"

    @property
    def key(self) -> str:
        return f"{self.metadata.namespace}/{self.metadata.name}"

    @property
    def class_name(self) -> str:
        """kube's GetPersistentVolumeClaimClass: the class, "" when none is given."""
        return self.storage_class_name or ""

    def is_for_pod(self, pod_uid: str) -> bool:
        """kube's ephemeral.VolumeIsForPod: the pod is the claim's controller."""
        return any(o.controller and o.uid == pod_uid for o in self.owners)


@dataclass(frozen=True, slots=True)
class CSISource:
    driver: str
    volume_handle: str


@dataclass(frozen=True, slots=True)
class ClaimRef:
    namespace: str
    name: str
    uid: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class PersistentVolume:
    metadata: ObjectMeta
    capacity: int = 0  # spec.capacity.storage, bytes
    access_modes: tuple[str, ...] = ()
    storage_class_name: str = ""
    csi: CSISource | None = None
    claim_ref: ClaimRef | None = None
    # spec.nodeAffinity.required.nodeSelectorTerms (None: no node affinity)
    node_affinity: tuple[NodeSelectorTerm, ...] | None = None
    phase: str = "Pending"
    kind = "PersistentVolume"

    @property
    def key(self) -> str:
        return self.metadata.name


@dataclass(frozen=True, slots=True)
class TopologySelectorTerm:
    """One term of ``allowedTopologies``: every (key, values) must match."""

    requirements: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class StorageClass:
    metadata: ObjectMeta
    provisioner: str = ""
    volume_binding_mode: str = IMMEDIATE
    allowed_topologies: tuple[TopologySelectorTerm, ...] = ()
    is_default: bool = False
    kind = "StorageClass"

    @property
    def key(self) -> str:
        return self.metadata.name


@dataclass(frozen=True, slots=True)
class CSINode:
    """A node's CSI drivers and how many volumes each may attach (None: no limit)."""

    metadata: ObjectMeta
    drivers: Mapping[str, int | None] = field(default_factory=dict)
    kind = "CSINode"

    @property
    def key(self) -> str:
        return self.metadata.name

    def limits(self) -> dict[str, int]:
        """kube's getVolumeLimits: the drivers with an allocatable count."""
        return {name: count for name, count in self.drivers.items() if count is not None}


@dataclass(frozen=True, slots=True)
class CSIDriver:
    """A CSI driver's object, as far as VolumeBinding reads it."""

    metadata: ObjectMeta
    storage_capacity: bool = False  # spec.storageCapacity: the scheduler checks capacity
    kind = "CSIDriver"

    @property
    def key(self) -> str:
        return self.metadata.name


@dataclass(frozen=True, slots=True)
class CSIStorageCapacity:
    """How much a class's driver can provision on the nodes its topology selects."""

    metadata: ObjectMeta
    storage_class_name: str
    node_topology: LabelSelector | None = None  # None: no node has access
    capacity: int | None = None  # bytes
    maximum_volume_size: int | None = None  # bytes
    kind = "CSIStorageCapacity"

    @property
    def key(self) -> str:
        return f"{self.metadata.namespace}/{self.metadata.name}"

    def volume_limit(self) -> int | None:
        """kube's volumeLimit: maximumVolumeSize when given (more precise), else capacity."""
        return self.maximum_volume_size if self.maximum_volume_size is not None else self.capacity


DEFAULT_CLASS_ANNOTATIONS = (
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
)


def _access_modes(f: Fields) -> tuple[str, ...]:
    modes = f.get_strs("accessModes")
    for i, mode in enumerate(modes):
        if mode not in ACCESS_MODES:
            supported = ", ".join(quote(m) for m in ACCESS_MODES)
            reason = f"unsupported value {quote(mode)}: supported values: {supported}"
            f.fail(f"accessModes[{i}]", reason)
    if READ_WRITE_ONCE_POD in modes and len(modes) > 1:
        f.fail("accessModes", "may not use ReadWriteOncePod with other access modes")
    return tuple(modes)


def _quantity(f: Fields, key: str) -> int | None:
    """A storage quantity in bytes (None when absent)."""
    value = f.data.get(key)
    if value is None:
        return None
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        f.fail(key, "expected a quantity")
    try:
        return parse_quantity(value, "storage")
    except ValueError as exc:
        f.fail(key, str(exc))


def _storage(resources: Fields | None) -> int:
    """The ``storage`` of a resource list (0 when absent)."""
    return (_quantity(resources, "storage") or 0) if resources is not None else 0


def _owners(meta: Fields) -> tuple[OwnerReference, ...]:
    return tuple(
        OwnerReference(o.get_str("uid"), o.get_bool("controller"))
        for o in meta.get_objs("ownerReferences")
    )


def _root(data: Any) -> tuple[Fields, Fields, Fields]:
    root = expect_object(data, "")
    meta = root.get_obj("metadata", required=True)
    assert meta is not None
    spec = root.get_obj("spec") or Fields({}, "spec")
    return root, meta, spec


def claim_from_dict(data: Any) -> PersistentVolumeClaim:
    root, meta_f, spec = _root(data)
    meta = decode_meta(meta_f, namespaced=True)
    class_name: str | None = None
    if spec.has("storageClassName"):
        class_name = spec.get_str("storageClassName")
    if class_name is None and BETA_STORAGE_CLASS_ANNOTATION in meta.annotations:
        class_name = meta.annotations[BETA_STORAGE_CLASS_ANNOTATION]
    resources = spec.get_obj("resources")
    selector = spec.get_obj("selector")
    status = root.get_obj("status") or Fields({}, "status")
    return PersistentVolumeClaim(
        metadata=meta,
        access_modes=_access_modes(spec),
        storage_class_name=class_name,
        volume_name=spec.get_str("volumeName"),
        storage_request=_storage(resources.get_obj("requests") if resources else None),
        selector=decode_label_selector(selector) if selector is not None else None,
        phase=status.get_str("phase") or "Pending",
        deleting=meta_f.has("deletionTimestamp"),
        owners=_owners(meta_f),
    )


def volume_from_dict(data: Any) -> PersistentVolume:
    root, meta_f, spec = _root(data)
    meta = decode_meta(meta_f, namespaced=False)
    csi = spec.get_obj("csi")
    ref = spec.get_obj("claimRef")
    affinity = spec.get_obj("nodeAffinity")
    terms: tuple[NodeSelectorTerm, ...] | None = None
    if affinity is not None:
        required = affinity.get_obj("required")
        if required is not None:
            terms = tuple(
                decode_node_selector_term(t) for t in required.get_objs("nodeSelectorTerms")
            )
            if not terms:
                required.fail("nodeSelectorTerms", "must have at least one node selector term")
    status = root.get_obj("status") or Fields({}, "status")
    return PersistentVolume(
        metadata=meta,
        capacity=_storage(spec.get_obj("capacity")),
        access_modes=_access_modes(spec),
        storage_class_name=spec.get_str("storageClassName"),
        csi=(
            CSISource(
                csi.get_str("driver", required=True), csi.get_str("volumeHandle", required=True)
            )
            if csi is not None
            else None
        ),
        claim_ref=(
            ClaimRef(ref.get_str("namespace") or "default", ref.get_str("name"), ref.get_str("uid"))
            if ref is not None
            else None
        ),
        node_affinity=terms,
        phase=status.get_str("phase") or "Pending",
    )


def storage_class_from_dict(data: Any) -> StorageClass:
    root, meta_f, _ = _root(data)
    meta = decode_meta(meta_f, namespaced=False)
    provisioner = root.get_str("provisioner", required=True)
    mode = root.get_str("volumeBindingMode") or IMMEDIATE
    root.check_one_of("volumeBindingMode", mode, BINDING_MODES)
    terms = []
    for term in root.get_objs("allowedTopologies"):
        requirements = []
        for req in term.get_objs("matchLabelExpressions"):
            key = req.get_str("key", required=True)
            values = tuple(req.get_strs("values"))
            if not values:
                req.fail("values", "must specify at least one value")
            requirements.append((key, values))
        terms.append(TopologySelectorTerm(tuple(requirements)))
    return StorageClass(
        metadata=meta,
        provisioner=provisioner,
        volume_binding_mode=mode,
        allowed_topologies=tuple(terms),
        is_default=any(meta.annotations.get(a) == "true" for a in DEFAULT_CLASS_ANNOTATIONS),
    )


def csi_node_from_dict(data: Any) -> CSINode:
    _, meta_f, spec = _root(data)
    meta = decode_meta(meta_f, namespaced=False)
    drivers: dict[str, int | None] = {}
    for d in spec.get_objs("drivers"):
        name = d.get_str("name", required=True)
        if name in drivers:
            d.fail("name", f"duplicate driver {quote(name)}")
        allocatable = d.get_obj("allocatable")
        drivers[name] = (
            allocatable.get_int("count", low=0, high=INT32_MAX) if allocatable is not None else None
        )
    return CSINode(metadata=meta, drivers=drivers)


def csi_driver_from_dict(data: Any) -> CSIDriver:
    _, meta_f, spec = _root(data)
    return CSIDriver(
        metadata=decode_meta(meta_f, namespaced=False),
        storage_capacity=spec.get_bool("storageCapacity"),
    )


def storage_capacity_from_dict(data: Any) -> CSIStorageCapacity:
    root, meta_f, _ = _root(data)
    topology = root.get_obj("nodeTopology")
    return CSIStorageCapacity(
        metadata=decode_meta(meta_f, namespaced=True),
        storage_class_name=root.get_str("storageClassName", required=True),
        node_topology=decode_label_selector(topology) if topology is not None else None,
        capacity=_quantity(root, "capacity"),
        maximum_volume_size=_quantity(root, "maximumVolumeSize"),
    )


StorageObject = (
    PersistentVolumeClaim
    | PersistentVolume
    | StorageClass
    | CSINode
    | CSIDriver
    | CSIStorageCapacity
)
DECODERS: Mapping[str, Callable[[Any], StorageObject]] = {
    "PersistentVolumeClaim": claim_from_dict,
    "PersistentVolume": volume_from_dict,
    "StorageClass": storage_class_from_dict,
    "CSINode": csi_node_from_dict,
    "CSIDriver": csi_driver_from_dict,
    "CSIStorageCapacity": storage_capacity_from_dict,
}


def decoded_by_key(objs: Iterable[Any], decode: Callable[[Any], T]) -> dict[str, T]:
    """Objects of one storage kind, typed, by key; one that does not decode counts as
    absent (as for the scheduler's listers)."""
    out: dict[str, T] = {}
    for obj in objs:
        try:
            typed = decode(obj)
        except ValueError:
            continue
        out[typed.key] = typed  # type: ignore[attr-defined]
    return out


def zones_of_label(value: str) -> frozenset[str] | None:
    """kube's LabelZonesToSet: the zones a PV label names; None when one is empty."""
    zones = value.split(MULTI_ZONE_DELIMITER)
    if any(not z for z in zones):
        return None
    return frozenset(zones)


def bound_pair(pv: dict[str, Any], claim: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The PV and the claim bound to each other, as kube's PV controller writes them
    (the PV's claimRef and phase, the claim's volumeName, annotations, phase, capacity
    and access modes); the inputs keep their resourceVersions, so writing them back is
    conditional on neither having changed."""
    claim_meta = claim.get("metadata") or {}
    pv_meta = pv.get("metadata") or {}
    pv_spec = pv.get("spec") or {}
    ref = {
        "kind": "PersistentVolumeClaim",
        "namespace": claim_meta.get("namespace") or "default",
        "name": claim_meta.get("name"),
        "uid": claim_meta.get("uid", ""),
    }
    new_pv = {
        **pv,
        "metadata": {
            **pv_meta,
            "annotations": {
                **(pv_meta.get("annotations") or {}),
                BOUND_BY_CONTROLLER_ANNOTATION: "yes",
            },
        },
        "spec": {**pv_spec, "claimRef": ref},
        "status": {**(pv.get("status") or {}), "phase": "Bound"},
    }
    new_claim = {
        **claim,
        "metadata": {
            **claim_meta,
            "annotations": {
                **(claim_meta.get("annotations") or {}),
                BIND_COMPLETED_ANNOTATION: "yes",
                BOUND_BY_CONTROLLER_ANNOTATION: "yes",
            },
        },
        "spec": {**(claim.get("spec") or {}), "volumeName": pv_meta.get("name")},
        "status": {
            **(claim.get("status") or {}),
            "phase": "Bound",
            "accessModes": list(pv_spec.get("accessModes") or []),
            "capacity": dict(pv_spec.get("capacity") or {}),
        },
    }
    return new_pv, new_claim
