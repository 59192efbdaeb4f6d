"""NodeResourcesFit: the node must have room for the pod's requests (PreFilter, Filter), and
nodes are scored by a strategy over requested/allocatable (PreScore, Score).

Args (kube's NodeResourcesFitArgs): ``ignoredResources``, ``ignoredResourceGroups`` and
``scoringStrategy: {type: LeastAllocated|MostAllocated|RequestedToCapacityRatio,
resources: [{name, weight}], requestedToCapacityRatio: {shape: [{utilization, score}]}}``.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np

from distsched.framework.cycle_state import CycleState
from distsched.framework.events import ActionType, ClusterEvent, EventResource
from distsched.framework.interface import (
    FilterPlugin,
    FilterResult,
    Handle,
    PluginArgsError,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ScorePlugin,
    SignPlugin,
)
from distsched.framework.plugins.helpers.resource_allocation import (
    DEFAULT_RESOURCES,
    ResourceSpec,
    allocatable_and_requested,
    least_allocated,
    most_allocated,
    parse_resources,
    parse_shape,
    pod_request_list,
    requested_to_capacity_ratio,
)
from distsched.framework.podinfo import PODS, PodInfo, cycle_pod_info
from distsched.framework.snapshot import PODS_COL, Snapshot
from distsched.framework.status import Status
from distsched.model import pod_requests
from distsched.model.objects import Node, Pod

NAME = "NodeResourcesFit"
EVENTS: tuple[ClusterEvent, ...] = (
    ClusterEvent(EventResource.POD, ActionType.DELETE),
    ClusterEvent(
        EventResource.NODE,
        ActionType.ADD
        | ActionType.UPDATE_NODE_ALLOCATABLE
        | ActionType.UPDATE_NODE_TAINT
        | ActionType.UPDATE_NODE_LABEL,
    ),
)
TOO_MANY_PODS = "Too many pods"
LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"

_PRE_FILTER_KEY = "PreFilter" + NAME
_REQUESTS_CACHE_SIZE = 4096
_PRE_SCORE_KEY = "PreScore" + NAME


def is_extended_resource(name: str) -> bool:
    """Extended resources are domain-qualified names outside kubernetes.io/ (kube's
    IsExtendedResourceName); only those can be ignored by args."""
    if "/" not in name or name.startswith("requests."):
        return False
    domain = name.split("/", 1)[0]
    return not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io"))


@dataclass(frozen=True, slots=True)
class _FitRequest:
    columns: tuple[int, ...]  # resource columns with a positive request to check
    amounts: tuple[int, ...]  # the requests for ``columns``
    reasons: tuple[str, ...]  # "Insufficient <resource>" per column
    unknown: tuple[str, ...]  # requested resources no node has: never satisfiable


class NodeResourcesFit(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, SignPlugin):
    name = NAME
    reads_only_its_node = True
    reads_only_its_node_usage = True
    scores_in_range = True

    def __init__(
        self,
        *,
        ignored_resources: frozenset[str],
        ignored_groups: frozenset[str],
        strategy: str,
        resources: tuple[ResourceSpec, ...],
        shape: tuple[tuple[int, int], ...],
    ) -> None:
        self.ignored_resources = ignored_resources
        self.ignored_groups = ignored_groups
        self.strategy = strategy
        self.resources = resources
        self.weights = [r.weight for r in resources]
        self.shape = shape
        self._requests_cache: dict[tuple[object, ...], _FitRequest] = {}

    def sign_pod(self, pod: Pod, info: PodInfo, snapshot: Snapshot) -> Hashable | None:
        # Requests (containers, init containers, pod-level resources, overhead) and the
        # non-zero cpu/memory that scoring uses.
        return tuple(info.requests.items()), info.nonzero_cpu, info.nonzero_memory

    # -------------------------------------------------------------- filtering
    def _ignored(self, resource: str) -> bool:
        if not is_extended_resource(resource):
            return False
        return (
            resource in self.ignored_resources or resource.split("/", 1)[0] in self.ignored_groups
        )

    def _fit_request(self, info: PodInfo, snapshot: Snapshot) -> _FitRequest:
        # Pods of one workload share their requests: remember the answer per request set
        # (and per column layout, which grows when a new extended resource appears).
        key = (tuple(info.requests.items()), len(snapshot.resource_names))
        cached = self._requests_cache.get(key)
        if cached is not None:
            return cached
        names = snapshot.resource_names
        index = snapshot.resource_index
        columns: list[int] = []
        amounts: list[int] = []
        unknown: list[str] = []
        for resource, amount in info.requests.items():
            if amount <= 0 or resource == PODS or self._ignored(resource):
                continue
            col = index.get(resource)
            if col is None:
                unknown.append(resource)
            else:
                columns.append(col)
                amounts.append(amount)
        order = sorted(range(len(columns)), key=columns.__getitem__)
        request = _FitRequest(
            tuple(columns[i] for i in order),
            tuple(amounts[i] for i in order),
            tuple(f"Insufficient {names[columns[i]]}" for i in order),
            tuple(unknown),
        )
        if len(self._requests_cache) >= _REQUESTS_CACHE_SIZE:
            self._requests_cache.clear()
        self._requests_cache[key] = request
        return request

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status | None]:
        state.write(_PRE_FILTER_KEY, self._fit_request(cycle_pod_info(state, pod), snapshot))
        return None, None

    def filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, indices: np.ndarray
    ) -> FilterResult:
        request: _FitRequest | None = state.get(_PRE_FILTER_KEY)
        if request is None:
            request = self._fit_request(cycle_pod_info(state, pod), snapshot)
        free = snapshot.free
        too_many = free[:, PODS_COL][indices] < 1
        shorts = [
            free[:, col][indices] < amount
            for col, amount in zip(request.columns, request.amounts, strict=True)
        ]
        if not request.unknown:
            any_short = too_many
            for short in shorts:
                any_short = any_short | short
            if not any_short.any():
                return FilterResult.all_pass()
        result = FilterResult()
        result.add(TOO_MANY_PODS, too_many)
        for reason, short in zip(request.reasons, shorts, strict=True):
            result.add(reason, short)
        for resource in request.unknown:
            result.add(f"Insufficient {resource}", np.ones(indices.size, dtype=bool))
        return result

    # -------------------------------------------------------------- scoring
    def pre_score(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, indices: np.ndarray
    ) -> Status | None:
        info = cycle_pod_info(state, pod)
        state.write(_PRE_SCORE_KEY, pod_request_list(info, self.resources, use_requested=False))
        return None

    def score(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, indices: np.ndarray
    ) -> np.ndarray:
        requests: list[int] | None = state.get(_PRE_SCORE_KEY)
        if requests is None:
            requests = pod_request_list(
                cycle_pod_info(state, pod), self.resources, use_requested=False
            )
        columns = allocatable_and_requested(
            snapshot, indices, self.resources, requests, use_requested=False
        )
        n = int(indices.size)
        if self.strategy == LEAST_ALLOCATED:
            return least_allocated(columns, self.weights, n)
        if self.strategy == MOST_ALLOCATED:
            return most_allocated(columns, self.weights, n)
        return requested_to_capacity_ratio(columns, self.weights, n, self.shape)


def new(args: dict[str, Any], handle: Handle) -> NodeResourcesFit:
    known = {"ignoredResources", "ignoredResourceGroups", "scoringStrategy"}
    unknown = set(args) - known
    if unknown:
        raise PluginArgsError(sorted(unknown)[0], "unknown field")
    ignored = args.get("ignoredResources", [])
    groups = args.get("ignoredResourceGroups", [])
    for field, value in (("ignoredResources", ignored), ("ignoredResourceGroups", groups)):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise PluginArgsError(field, "must be a list of strings")
    for i, group in enumerate(groups):
        if "/" in group:
            raise PluginArgsError(f"ignoredResourceGroups[{i}]", "must not contain '/'")
    strategy_args = args.get("scoringStrategy") or {}
    if not isinstance(strategy_args, dict):
        raise PluginArgsError("scoringStrategy", "must be a mapping")
    strategy = strategy_args.get("type", LEAST_ALLOCATED)
    if strategy not in (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO):
        raise PluginArgsError("scoringStrategy.type", f"unsupported strategy {strategy!r}")
    resources: tuple[ResourceSpec, ...] = DEFAULT_RESOURCES
    if "resources" in strategy_args:
        resources = parse_resources(strategy_args["resources"], "scoringStrategy.resources")
    shape: tuple[tuple[int, int], ...] = ()
    if strategy == REQUESTED_TO_CAPACITY_RATIO:
        ratio = strategy_args.get("requestedToCapacityRatio") or {}
        if not isinstance(ratio, dict):
            raise PluginArgsError("scoringStrategy.requestedToCapacityRatio", "must be a mapping")
        shape = parse_shape(ratio.get("shape"), "scoringStrategy.requestedToCapacityRatio.shape")
    return NodeResourcesFit(
        ignored_resources=frozenset(ignored),
        ignored_groups=frozenset(groups),
        strategy=strategy,
        resources=resources,
        shape=shape,
    )


# ---------------------------------------------------------------------- QueueingHint
def queueing_hint(event: ClusterEvent, pod: Pod, old: Any, new: Any, handle: Handle) -> bool | None:
    """kube's isSchedulableAfterNodeChange / isSchedulableAfterPodEvent.

    Node added or updated: Queue when the node's allocatable could hold the pod at all
    (every requested resource, one pod slot) and, for an update, some resource the pod
    requests grew. Assigned pod deleted: Queue (its room is free now)."""
    if event.resource == EventResource.ASSIGNED_POD and event.has(ActionType.DELETE):
        return True
    if event.resource != EventResource.NODE or not isinstance(new, Node):
        return None
    requests = {name: amount for name, amount in pod_requests(pod).items() if amount}
    allocatable = new.status.allocatable
    if allocatable.get(PODS, 0) < 1:
        return False
    if any(amount > allocatable.get(name, 0) for name, amount in requests.items()):
        return False
    if not isinstance(old, Node):
        return True
    before = old.status.allocatable
    return any(allocatable.get(n, 0) > before.get(n, 0) for n in (*requests, PODS))
