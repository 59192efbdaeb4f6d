"""Label-selector and pod-affinity-term matching on single objects (event handlers).

Namespaces are not objects in distsched; a namespace's labels are the one label
Kubernetes puts on every namespace, ``kubernetes.io/metadata.name: <name>``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from distsched.model.objects import LabelSelector, Pod, PodAffinityTerm

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def selector_matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector semantics; a None selector matches nothing, an empty one all."""
    if selector is None:
        return False
    for key, value in selector.match_labels.items():
        if labels.get(key) != value:
            return False
    for req in selector.match_expressions:
        have = labels.get(req.key)
        if req.operator == "In" and (have is None or have not in req.values):
            return False
        if req.operator == "NotIn" and have is not None and have in req.values:
            return False
        if req.operator == "Exists" and have is None:
            return False
        if req.operator == "DoesNotExist" and have is not None:
            return False
    return True


def term_matches_pod(term: PodAffinityTerm, owner_namespace: str, pod: Pod) -> bool:
    """Does ``pod`` satisfy an affinity term declared by a pod in ``owner_namespace``."""
    ns = pod.metadata.namespace
    if term.namespace_selector is not None:
        ns_ok = ns in term.namespaces or selector_matches(
            term.namespace_selector, {NAMESPACE_NAME_LABEL: ns}
        )
    else:
        ns_ok = ns in (term.namespaces or (owner_namespace,))
    return ns_ok and selector_matches(term.label_selector, pod.metadata.labels)


def required_affinity_terms(pod: Pod) -> tuple[PodAffinityTerm, ...]:
    affinity = pod.spec.affinity
    if affinity is None or affinity.pod_affinity is None:
        return ()
    return affinity.pod_affinity.required


def pods_with_matching_affinity(candidates: Iterable[Pod], assigned: Iterable[Pod]) -> list[Pod]:
    """kube's getUnschedulablePodsWithMatchingAffinityTerm, for a batch of new pods."""
    assigned_list = list(assigned)
    matching = []
    for pod in candidates:
        terms = required_affinity_terms(pod)
        if not terms:
            continue
        owner_ns = pod.metadata.namespace
        if any(term_matches_pod(t, owner_ns, new) for t in terms for new in assigned_list):
            matching.append(pod)
    return matching
