"""Per-pod facts the scheduler reads again and again, computed once per pod.

Requests, non-zero requests (scoring), host ports and priority come from
``distsched.model.resources`` (kube's resource helpers: containers add up, init containers
peak, sidecars count, overhead on top; a container naming no cpu/memory request counts as
100m/200Mi for scoring only).
"""

from __future__ import annotations

from dataclasses import dataclass

from distsched.framework.cycle_state import CycleState
from distsched.model.objects import Pod, PodAffinityTerm, ResourceList, WeightedPodAffinityTerm
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
        affinity = pod.spec.affinity
        pod_affinity = affinity.pod_affinity if affinity else None
        anti_affinity = affinity.pod_anti_affinity if affinity else None
        cpu, memory = pod_nonzero_requests(pod)
        return cls(
            pod=pod,
            key=pod.key,
            uid=pod.metadata.uid,
            namespace=pod.metadata.namespace,
            labels=pod.metadata.labels,
            priority=pod_priority(pod),
            requests=pod_requests(pod),
            nonzero_cpu=cpu,
            nonzero_memory=memory,
            host_ports=tuple(pod_host_ports(pod)),
            required_affinity_terms=pod_affinity.required if pod_affinity else (),
            required_anti_affinity_terms=anti_affinity.required if anti_affinity else (),
            preferred_affinity_terms=pod_affinity.preferred if pod_affinity else (),
            preferred_anti_affinity_terms=anti_affinity.preferred if anti_affinity else (),
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
