"""Pods (and ReplicaSets) made from templates the way kube's controllers make them.

Every made object has the owner's namespace, the template's labels and annotations, and
one ownerReference to its owner with ``controller: true`` and ``blockOwnerDeletion:
true`` (controller.NewControllerRef). Per kind:

- ReplicaSet of a Deployment: the Deployment's selector, template and replicas, plus
  the label ``pod-template-hash`` on itself, its selector and its template.
- StatefulSet pods: labels ``statefulset.kubernetes.io/pod-name``,
  ``apps.kubernetes.io/pod-index`` and ``controller-revision-hash``; ``spec.hostname``
  (the pod's name) and ``spec.subdomain`` (the serviceName); a volume per
  ``volumeClaimTemplates`` entry naming the ordinal's PersistentVolumeClaim
  ``<template>-<set>-<ordinal>``, which is made first and kept when the pod goes.
- DaemonSet pods: the required node affinity replaced by the one term the DaemonSet
  controller uses (util.ReplaceDaemonSetPodNodeNameNodeAffinity: ``matchFields
  metadata.name In [node]``, preferred terms kept) and the tolerations it adds
  (util.AddOrUpdateDaemonPodTolerations): not-ready and unreachable NoExecute,
  disk-pressure, memory-pressure, pid-pressure and unschedulable NoSchedule, and
  network-unavailable NoSchedule for hostNetwork pods.
- Job pods: labels ``batch.kubernetes.io/controller-uid``, ``batch.kubernetes.io/job-name``
  and their legacy twins ``controller-uid``, ``job-name``; Indexed Jobs also
  ``batch.kubernetes.io/job-completion-index`` (label and annotation).
"""

from __future__ import annotations

import copy
from typing import Any

from distsched.store.codec import Obj

POD_TEMPLATE_HASH = "pod-template-hash"
STS_POD_NAME = "statefulset.kubernetes.io/pod-name"
STS_POD_INDEX = "apps.kubernetes.io/pod-index"
STS_REVISION = "controller-revision-hash"
JOB_UID = "batch.kubernetes.io/controller-uid"
JOB_NAME = "batch.kubernetes.io/job-name"
JOB_INDEX = "batch.kubernetes.io/job-completion-index"
NODE_NAME_FIELD = "metadata.name"

DAEMON_TOLERATIONS: tuple[tuple[str, str], ...] = (
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"),
    ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "NoSchedule"),
    ("node.kubernetes.io/unschedulable", "NoSchedule"),
)
HOST_NETWORK_TOLERATION = ("node.kubernetes.io/network-unavailable", "NoSchedule")


def owner_reference(owner: Obj) -> dict[str, Any]:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def controller_uid(obj: Obj) -> str:
    """The uid of the object's controller (the ownerReference with controller: true)."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if isinstance(ref, dict) and ref.get("controller"):
            return str(ref.get("uid") or "")
    return ""


def pod_from_template(
    owner: Obj,
    template: dict[str, Any],
    name: str,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> Obj:
    """A new pod of ``owner`` from ``template`` (copied, never shared)."""
    tmeta = template.get("metadata") or {}
    meta: dict[str, Any] = {
        "name": name,
        "namespace": owner["metadata"]["namespace"],
        "labels": {**(tmeta.get("labels") or {}), **(labels or {})},
        "ownerReferences": [owner_reference(owner)],
    }
    merged_annotations = {**(tmeta.get("annotations") or {}), **(annotations or {})}
    if merged_annotations:
        meta["annotations"] = merged_annotations
    spec = copy.deepcopy(template.get("spec") or {})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def replica_set_for(deployment: Obj, pod_hash: str) -> Obj:
    spec = deployment["spec"]
    template = copy.deepcopy(spec["template"])
    tmeta = template.setdefault("metadata", {})
    tmeta["labels"] = {**(tmeta.get("labels") or {}), POD_TEMPLATE_HASH: pod_hash}
    selector = copy.deepcopy(spec["selector"])
    selector["matchLabels"] = {**(selector.get("matchLabels") or {}), POD_TEMPLATE_HASH: pod_hash}
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": f"{deployment['metadata']['name']}-{pod_hash}",
            "namespace": deployment["metadata"]["namespace"],
            "labels": dict(tmeta["labels"]),
            "ownerReferences": [owner_reference(deployment)],
        },
        "spec": {
            "replicas": int(spec.get("replicas", 1)),
            "selector": selector,
            "template": template,
        },
    }


def stateful_pod(sts: Obj, ordinal: int, revision: str) -> Obj:
    name = f"{sts['metadata']['name']}-{ordinal}"
    labels = {STS_POD_NAME: name, STS_POD_INDEX: str(ordinal), STS_REVISION: revision}
    pod = pod_from_template(sts, sts["spec"]["template"], name, labels=labels)
    pod["spec"]["hostname"] = name
    service = sts["spec"].get("serviceName")
    if service:
        pod["spec"]["subdomain"] = service
    claims = stateful_claims(sts, ordinal)
    if claims:  # kube's updateStorage: each template's volume names the ordinal's claim
        by_template = {
            str(t["metadata"]["name"]): c["metadata"]["name"]
            for t, c in zip(sts["spec"]["volumeClaimTemplates"], claims, strict=True)
        }
        volumes = [v for v in pod["spec"].get("volumes") or () if v.get("name") not in by_template]
        volumes += [
            {"name": template, "persistentVolumeClaim": {"claimName": claim}}
            for template, claim in by_template.items()
        ]
        pod["spec"]["volumes"] = volumes
    return pod


def stateful_claims(sts: Obj, ordinal: int) -> list[Obj]:
    """The PersistentVolumeClaims of one ordinal, as kube's StatefulSet controller makes
    them from ``volumeClaimTemplates``: ``<template>-<set>-<ordinal>`` in the set's
    namespace, the template's labels plus the set's selector matchLabels. No owner: kube's
    default retention (Retain when scaled down or deleted) keeps them."""
    spec, meta = sts["spec"], sts["metadata"]
    selector_labels = (spec.get("selector") or {}).get("matchLabels") or {}
    claims = []
    for template in spec.get("volumeClaimTemplates") or ():
        prefix = (template.get("metadata") or {}).get("name")
        name = f"{prefix}-{meta['name']}-{ordinal}"
        claims.append(
            claim_from_template(
                template, name=name, namespace=meta["namespace"], extra_labels=selector_labels
            )
        )
    return claims


def claim_from_template(
    template: Obj,
    *,
    name: str,
    namespace: str,
    extra_labels: dict[str, str] | None = None,
    owner: Obj | None = None,
) -> Obj:
    """A pending PersistentVolumeClaim from a claim template (a StatefulSet's
    ``volumeClaimTemplates`` entry, an ephemeral volume's ``volumeClaimTemplate``): its
    labels (plus ``extra_labels``), annotations and spec; ``owner`` its controller."""
    tmeta = template.get("metadata") or {}
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    labels = {**(tmeta.get("labels") or {}), **(extra_labels or {})}
    if labels or extra_labels is not None:  # a StatefulSet's claims always carry labels
        meta["labels"] = labels
    if tmeta.get("annotations"):
        meta["annotations"] = dict(tmeta["annotations"])
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": meta,
        "spec": copy.deepcopy(template.get("spec") or {}),
        "status": {"phase": "Pending"},
    }


def daemon_pod(ds: Obj, name: str, node_name: str) -> Obj:
    pod = pod_from_template(ds, ds["spec"]["template"], name)
    spec = pod["spec"]
    affinity = spec.setdefault("affinity", {})
    node_affinity = affinity.setdefault("nodeAffinity", {})
    term = {"matchFields": [{"key": NODE_NAME_FIELD, "operator": "In", "values": [node_name]}]}
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [term]}
    wanted = list(DAEMON_TOLERATIONS)
    if spec.get("hostNetwork"):
        wanted.append(HOST_NETWORK_TOLERATION)
    tolerations = list(spec.get("tolerations") or [])
    for key, effect in wanted:
        tolerations = [
            t for t in tolerations if not (t.get("key") == key and t.get("effect") == effect)
        ]
        tolerations.append({"key": key, "operator": "Exists", "effect": effect})
    spec["tolerations"] = tolerations
    return pod


def daemon_pod_node(pod: Obj) -> str:
    """The node a DaemonSet pod is for: its matchFields term (or spec.nodeName)."""
    spec = pod.get("spec") or {}
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    for term in required.get("nodeSelectorTerms") or ():
        for field in term.get("matchFields") or ():
            if field.get("key") == NODE_NAME_FIELD and field.get("operator") == "In":
                values = field.get("values") or []
                if len(values) == 1:
                    return str(values[0])
    return str(spec.get("nodeName") or "")


def job_pod(job: Obj, name: str, index: int | None) -> Obj:
    uid, job_name = job["metadata"]["uid"], job["metadata"]["name"]
    labels = {JOB_UID: uid, JOB_NAME: job_name, "controller-uid": uid, "job-name": job_name}
    annotations: dict[str, str] = {}
    if index is not None:
        labels[JOB_INDEX] = str(index)
        annotations[JOB_INDEX] = str(index)
    pod = pod_from_template(
        job, job["spec"]["template"], name, labels=labels, annotations=annotations
    )
    if index is not None:
        pod["spec"]["hostname"] = f"{job_name}-{index}"
    return pod
