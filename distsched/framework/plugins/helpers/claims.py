"""What the volume plugins share about a pod's claims: kube's messages for a claim
missing or not the pod's own, the pod's signature for batching and the QueueingHint for
a claim added or changed."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from distsched.model.objects import Pod
from distsched.model.volumes import PersistentVolumeClaim


def claim_not_found(name: str) -> str:
    """kube's NotFound error for a PersistentVolumeClaim, as the plugins pass it on."""
    return f'persistentvolumeclaim "{name}" not found'


def not_the_pods_claim(pod: Pod, name: str) -> str:
    """kube's ephemeral.VolumeIsForPod error: the claim of a generic ephemeral volume
    exists but is not controlled by the pod."""
    namespace = pod.metadata.namespace
    return (
        f"PVC {namespace}/{name} was not created for pod {namespace}/{pod.metadata.name} "
        "(pod is not owner)"
    )


def claims_signature(pod: Pod) -> Hashable | None:
    """The pod's namespace and claim names (``()`` without claims): what VolumeZone's and
    NodeVolumeLimits' answers depend on of the pod. None with a generic ephemeral volume,
    whose claim is named after the pod."""
    if any(v.ephemeral for v in pod.spec.volumes):
        return None
    claims = tuple(v.claim_name for v in pod.spec.volumes if v.claim_name)
    return (pod.metadata.namespace, claims) if claims else ()


def uses_claim_hint(pod: Pod, new: Any, *, ephemeral: bool) -> bool | None:
    """Queue when the claim added or changed is one of the pod's (with ``ephemeral``,
    generic ephemeral volumes' claims count too, as kube's hints that resolve them);
    None when the object is not a claim that decodes."""
    if not isinstance(new, PersistentVolumeClaim):
        return None
    if new.metadata.namespace != pod.metadata.namespace:
        return False
    name = new.metadata.name
    if ephemeral:
        return any(v.claim_for(pod.metadata.name) == name for v in pod.spec.volumes)
    return any(v.claim_name == name for v in pod.spec.volumes)
