"""Standalone volume binding: what a cluster's PersistentVolume controller and its
dynamic provisioners do, so that manifests with storage (a StatefulSet's
``volumeClaimTemplates``) run end to end without a cluster.

- A new PV without a claim becomes Available (VolumeBinding matches only those).
- A claim naming a PV (``spec.volumeName``, pre-bound by its author) is bound to it both
  ways once the PV exists and is free for it (the PV controller's syncClaim).
- A claim not bound whose class has a provisioner (not ``kubernetes.io/no-provisioner``)
  gets a PersistentVolume ``pvc-<claim uid>`` of its size, access modes and class, bound
  to it both ways (the PV's ``claimRef``, the claim's ``spec.volumeName`` and
  ``pv.kubernetes.io/bind-completed``, both phases Bound), with a CSI source named after
  the provisioner so that NodeVolumeLimits counts it: at once for an Immediate class;
  for a WaitForFirstConsumer class once the scheduler chose a node
  (``volume.kubernetes.io/selected-node``, VolumeBinding's PreBind), the PV then made
  in that node's topology (node affinity and labels on the class's allowedTopologies
  keys, else the node's zone, else its hostname), as a topology-aware CSI provisioner
  makes it.
- A pod's generic ephemeral volumes get their claims ``<pod>-<volume>`` from the
  volume's ``volumeClaimTemplate``, owned by the pod (kube's ephemeral volume
  controller), deleted with it.
- A claim naming no class takes the default class (annotated
  ``storageclass.kubernetes.io/is-default-class: "true"``), as kube's
  DefaultStorageClass admission gives it one; a claim with no usable class stays
  Pending, as in kube.

In the Kubernetes mode the controller role does not run: the cluster's controllers do
this.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from distsched.controllers.pods import claim_from_template
from distsched.model.objects import LABEL_HOSTNAME, Node
from distsched.model.volumes import (
    BIND_COMPLETED_ANNOTATION,
    IMMEDIATE,
    LABEL_ZONE,
    NO_PROVISIONER,
    SELECTED_NODE_ANNOTATION,
    StorageClass,
    bound_pair,
    claim_from_dict,
    decoded_by_key,
    storage_class_from_dict,
)
from distsched.store.codec import Obj


def classes_of(objs: Iterable[Obj]) -> dict[str, StorageClass]:
    return decoded_by_key(objs, storage_class_from_dict)


def default_class(classes: dict[str, StorageClass]) -> StorageClass | None:
    """kube's GetDefaultClass: of several defaults, the newest (then the name)."""
    defaults = [c for c in classes.values() if c.is_default]
    if not defaults:
        return None
    return max(defaults, key=lambda c: (c.metadata.creation_timestamp, c.metadata.name))


def provision(
    claim_obj: Obj, classes: dict[str, StorageClass], nodes: dict[str, Node]
) -> tuple[Obj, Obj] | None:
    """(the new PV, the claim bound to it) when the claim is to be provisioned now."""
    try:
        claim = claim_from_dict(claim_obj)
    except ValueError:
        return None
    if claim.volume_name or claim.deleting:
        return None
    if claim.storage_class_name is None:
        chosen = default_class(classes)
    else:
        chosen = classes.get(claim.storage_class_name) if claim.storage_class_name else None
    if chosen is None or chosen.provisioner == NO_PROVISIONER:
        return None
    topology: dict[str, str] = {}
    if chosen.volume_binding_mode != IMMEDIATE:
        node = nodes.get(claim.metadata.annotations.get(SELECTED_NODE_ANNOTATION, ""))
        if node is None:
            return None  # no node chosen yet (or it is gone): the scheduler's turn
        topology = node_topology(chosen, node)
    meta = claim.metadata
    name = f"pvc-{meta.uid}"
    spec: dict[str, Any] = claim_obj.get("spec") or {}
    storage = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "0")
    volume_spec: dict[str, Any] = {
        "capacity": {"storage": storage},
        "accessModes": list(claim.access_modes),
        "storageClassName": chosen.metadata.name,
        "persistentVolumeReclaimPolicy": "Delete",
        "csi": {"driver": chosen.provisioner, "volumeHandle": name},
    }
    if topology:
        expressions = [
            {"key": key, "operator": "In", "values": [value]} for key, value in topology.items()
        ]
        volume_spec["nodeAffinity"] = {
            "required": {"nodeSelectorTerms": [{"matchExpressions": expressions}]}
        }
    volume: Obj = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": name,
            "labels": {k: v for k, v in topology.items() if k != LABEL_HOSTNAME},
            "annotations": {"pv.kubernetes.io/provisioned-by": chosen.provisioner},
        },
        "spec": volume_spec,
    }
    with_class = {**claim_obj, "spec": {**spec, "storageClassName": chosen.metadata.name}}
    return bound_pair(volume, with_class)


def node_topology(storage_class: StorageClass, node: Node) -> dict[str, str]:
    """The topology a provisioned volume gets on ``node``: the node's values of the
    class's allowedTopologies keys, else its zone, else its hostname."""
    labels = {LABEL_HOSTNAME: node.metadata.name, **node.metadata.labels}
    keys = [k for term in storage_class.allowed_topologies for k, _ in term.requirements]
    if not keys:
        keys = [LABEL_ZONE] if LABEL_ZONE in labels else [LABEL_HOSTNAME]
    return {k: labels[k] for k in dict.fromkeys(keys) if k in labels}


def complete_prebound(claim_obj: Obj, pv_obj: Obj | None) -> tuple[Obj, Obj] | None:
    """A claim naming its PV, bound both ways once that PV exists and is free for it."""
    meta = claim_obj.get("metadata") or {}
    if BIND_COMPLETED_ANNOTATION in (meta.get("annotations") or {}) or pv_obj is None:
        return None
    if meta.get("deletionTimestamp"):
        return None
    ref = (pv_obj.get("spec") or {}).get("claimRef")
    if ref and (ref.get("namespace"), ref.get("name")) != (meta.get("namespace"), meta.get("name")):
        return None  # the PV is someone else's: the claim stays Pending, as in kube
    return bound_pair(pv_obj, claim_obj)


def available(pv_obj: Obj) -> Obj | None:
    """A PV without a claim, marked Available (None: nothing to change)."""
    if (pv_obj.get("spec") or {}).get("claimRef"):
        return None
    status = pv_obj.get("status") or {}
    if status.get("phase") in ("Available", "Released", "Failed"):
        return None
    return {**pv_obj, "status": {**status, "phase": "Available"}}


def ephemeral_claims(pod: Obj) -> list[Obj]:
    """kube's ephemeral volume controller: a claim ``<pod>-<volume>`` for each generic
    ephemeral volume, from its template, the pod its controller (so that VolumeBinding
    accepts it as the pod's own)."""
    meta = pod.get("metadata") or {}
    owner = {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "controller": True,
        "blockOwnerDeletion": True,
    }
    claims = []
    for volume in (pod.get("spec") or {}).get("volumes") or ():
        if not isinstance(volume, dict):
            continue
        template = (volume.get("ephemeral") or {}).get("volumeClaimTemplate")
        if isinstance(template, dict):
            name = f"{meta.get('name')}-{volume.get('name')}"
            namespace = meta.get("namespace") or "default"
            claims.append(
                claim_from_template(template, name=name, namespace=namespace, owner=owner)
            )
    return claims
