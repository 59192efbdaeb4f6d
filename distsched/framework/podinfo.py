"""Per-pod facts the scheduler reads again and again, computed once per pod.

Requests, non-zero requests (scoring), host ports and priority come from
``distsched.model.resources`` (kube's resource helpers: containers add up, init containers
peak, sidecars count, overhead on top; a container naming no cpu/memory request counts as
100m/200Mi for scoring only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from distsched.framework.cycle_state import CycleState
from distsched.model.objects import (
    Pod,
    PodAffinityTerm,
    PodSpec,
    ResourceList,
    WeightedPodAffinityTerm,
)
from distsched.model.quantity import CPU, EPHEMERAL_STORAGE, MEMORY, PODS
from distsched.model.resources import (
    DEFAULT_HOST_IP,
    HostPort,
    pod_host_ports,
    pod_nonzero_requests,
    pod_priority,
    pod_requests,
)

__all__ = [
    "CPU",
    "DEFAULT_HOST_IP",
    "EPHEMERAL_STORAGE",
    "MEMORY",
    "PODS",
    "POD_INFO_STATE_KEY",
    "PodInfo",
    "cycle_pod_info",
]


@dataclass(slots=True)
class PodInfo:
    """A pod as the snapshot keeps it: the object plus everything derived from it once."""

    pod: Pod
    key: str
    uid: str
    namespace: str
    labels: dict[str, str]
    priority: int
    requests: ResourceList
    nonzero_cpu: int
    nonzero_memory: int
    host_ports: tuple[HostPort, ...]
    required_affinity_terms: tuple[PodAffinityTerm, ...]
    required_anti_affinity_terms: tuple[PodAffinityTerm, ...]
    preferred_affinity_terms: tuple[WeightedPodAffinityTerm, ...]
    preferred_anti_affinity_terms: tuple[WeightedPodAffinityTerm, ...]

    @classmethod
    def of(cls, pod: Pod) -> PodInfo:
        meta = pod.metadata
        facts = _spec_facts(pod)
        return cls(
            pod, f"{meta.namespace}/{meta.name}", meta.uid, meta.namespace, meta.labels, *facts
        )

    @property
    def has_affinity(self) -> bool:
        """kube's podWithAffinity: the pod declares pod affinity or anti-affinity at all."""
        affinity = self.pod.spec.affinity
        return affinity is not None and (
            affinity.pod_affinity is not None or affinity.pod_anti_affinity is not None
        )

    @property
    def has_required_anti_affinity(self) -> bool:
        return bool(self.required_anti_affinity_terms)


class _SpecFacts(NamedTuple):
    """What PodInfo derives from the spec alone, in PodInfo's field order."""

    priority: int
    requests: ResourceList
    nonzero_cpu: int
    nonzero_memory: int
    host_ports: tuple[HostPort, ...]
    required_affinity_terms: tuple[PodAffinityTerm, ...]
    required_anti_affinity_terms: tuple[PodAffinityTerm, ...]
    preferred_affinity_terms: tuple[WeightedPodAffinityTerm, ...]
    preferred_anti_affinity_terms: tuple[WeightedPodAffinityTerm, ...]


def _compute_facts(pod: Pod) -> _SpecFacts:
    affinity = pod.spec.affinity
    pod_affinity = affinity.pod_affinity if affinity else None
    anti_affinity = affinity.pod_anti_affinity if affinity else None
    cpu, memory = pod_nonzero_requests(pod)
    return _SpecFacts(
        pod_priority(pod),
        pod_requests(pod),
        cpu,
        memory,
        tuple(pod_host_ports(pod)),
        pod_affinity.required if pod_affinity else (),
        anti_affinity.required if anti_affinity else (),
        pod_affinity.preferred if pod_affinity else (),
        anti_affinity.preferred if anti_affinity else (),
    )


# Spec facts by the identity of the spec parts they come from. Pods parsed from one
# template share those parts (the decoder's spec cache; a bound pod's spec differs from
# its template only in nodeName), so the second pod of a template costs a lookup. Each
# entry holds the spec, which keeps the identities it is keyed by from being reused.
_FACTS_SIZE = 1024
_facts: dict[tuple[int | None, ...], tuple[PodSpec, _SpecFacts]] = {}


def _spec_facts(pod: Pod) -> _SpecFacts:
    spec = pod.spec
    key = (
        id(spec.containers),
        id(spec.init_containers),
        id(spec.overhead),
        id(spec.resources),
        id(spec.affinity),
        spec.priority,
    )
    entry = _facts.get(key)
    if entry is not None:
        return entry[1]
    facts = _compute_facts(pod)
    if len(_facts) >= _FACTS_SIZE:
        for oldest in _facts:
            _facts.pop(oldest, None)
            break
    _facts[key] = (spec, facts)
    return facts


# CycleState key under which the pod being scheduled has its PodInfo.
POD_INFO_STATE_KEY = "PodInfo"


def cycle_pod_info(state: CycleState, pod: Pod) -> PodInfo:
    """The PodInfo of the pod being scheduled, computed once per cycle and shared by the
    plugins (and by the worker, which adds it to the snapshot when it assumes the pod)."""
    info = state.get(POD_INFO_STATE_KEY)
    if info is None or info.pod is not pod:
        info = PodInfo.of(pod)
        state.write(POD_INFO_STATE_KEY, info)
    return info
