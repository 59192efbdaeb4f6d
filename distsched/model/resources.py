"""What a pod asks of a node: effective requests, host ports, priority.

Requests follow Kubernetes' resource helpers (component-helpers ``PodRequests``):
regular containers add up; init containers run one at a time, so each needs its own
requests plus the restartable (sidecar, ``restartPolicy: Always``) init containers
started before it; the pod needs the larger of the two, per resource, plus overhead. A
pod-level request (``spec.resources``, kube's PodLevelResources) replaces that aggregate
for its resource.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from distsched.model.objects import Container, Pod, PodSpec, ResourceList
from distsched.model.quantity import CPU, MEMORY

# kube-scheduler's scoring defaults for a container that does not request cpu/memory
# (pkg/scheduler/util: DefaultMilliCPURequest, DefaultMemoryRequest).
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
NON_ZERO_DEFAULTS: Mapping[str, int] = {
    CPU: DEFAULT_MILLI_CPU_REQUEST,
    MEMORY: DEFAULT_MEMORY_REQUEST,
}
DEFAULT_HOST_IP = "0.0.0.0"
DEFAULT_PROTOCOL = "TCP"


class HostPort(NamedTuple):
    """A host port a pod binds; equal to the plain ``(ip, protocol, port)`` tuple.
    ``ip`` is 0.0.0.0 for "all addresses", ``protocol`` defaults to TCP."""

    ip: str
    protocol: str
    port: int


def pod_priority(pod: Pod) -> int:
    """The pod's priority for ordering; a pod without one counts as 0."""
    priority = pod.spec.priority
    return 0 if priority is None else priority


def _add(total: ResourceList, amounts: Mapping[str, int]) -> None:
    for name, amount in amounts.items():
        total[name] = total.get(name, 0) + amount


def _take_max(total: ResourceList, amounts: Mapping[str, int]) -> None:
    for name, amount in amounts.items():
        if name not in total or amount > total[name]:
            total[name] = amount


def _with_defaults(requests: ResourceList, defaults: Mapping[str, int]) -> ResourceList:
    if not defaults:
        return requests
    missing = {name: amount for name, amount in defaults.items() if name not in requests}
    return {**requests, **missing} if missing else requests


def pod_requests(
    pod: Pod,
    *,
    missing_defaults: Mapping[str, int] | None = None,
    exclude_overhead: bool = False,
) -> ResourceList:
    """The pod's effective requests in canonical units (a fresh dict).

    ``missing_defaults`` replaces a container's request for a resource it does not name
    at all (an explicit 0 stays 0), like ``NonMissingContainerRequests``.
    """
    return spec_requests(
        pod.spec, missing_defaults=missing_defaults, exclude_overhead=exclude_overhead
    )


def spec_requests(
    spec: PodSpec,
    *,
    missing_defaults: Mapping[str, int] | None = None,
    exclude_overhead: bool = False,
) -> ResourceList:
    """:func:`pod_requests` of a pod with this spec."""
    total = aggregate_container_requests(spec.containers, spec.init_containers, missing_defaults)
    # Pod-level resources (kube's PodLevelResources): a pod-level request replaces the
    # containers' aggregate for that resource (cpu, memory), overhead still comes on top.
    pod_level = spec.resources
    if pod_level is not None:
        total.update(pod_level.requests)
    if not exclude_overhead:
        _add(total, spec.overhead)
    return total


def aggregate_container_requests(
    containers: Sequence[Container],
    init_containers: Sequence[Container],
    missing_defaults: Mapping[str, int] | None = None,
) -> ResourceList:
    """The containers' requests as one pod needs them (kube's AggregateContainerRequests):
    regular containers and sidecars add up, each init container adds to the sidecars
    started before it, the larger per resource."""
    defaults = missing_defaults or {}
    total: ResourceList = {}
    for container in containers:
        _add(total, _with_defaults(container.resources.requests, defaults))
    sidecars: ResourceList = {}
    init_peak: ResourceList = {}
    for container in init_containers:
        requests = _with_defaults(container.resources.requests, defaults)
        if container.restart_policy == "Always":
            _add(total, requests)
            _add(sidecars, requests)
            _take_max(init_peak, sidecars)
        else:
            running = dict(sidecars)
            _add(running, requests)
            _take_max(init_peak, running)
    _take_max(total, init_peak)
    return total


def pod_nonzero_requests(pod: Pod) -> tuple[int, int]:
    """(millicores, bytes) as kube-scheduler's scoring sees them: a container that does not
    request cpu counts 100m, one that does not request memory counts 200Mi."""
    requests = pod_requests(pod, missing_defaults=NON_ZERO_DEFAULTS)
    return requests.get(CPU, 0), requests.get(MEMORY, 0)


def pod_host_ports(pod: Pod) -> list[HostPort]:
    """The host ports the pod's (regular) containers bind, like the NodePorts plugin:
    hostIP "" means 0.0.0.0, ports without a hostPort are left out."""
    return [
        HostPort(port.host_ip or DEFAULT_HOST_IP, port.protocol or DEFAULT_PROTOCOL, port.host_port)
        for container in pod.spec.containers
        for port in container.ports
        if port.host_port > 0
    ]
