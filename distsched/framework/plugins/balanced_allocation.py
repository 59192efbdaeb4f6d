"""NodeResourcesBalancedAllocation: favour nodes whose resource fractions stay close to each
other after placing the pod (Score: ``(1 - std(fractions)) * 100``).

Uses the real requests (no 100m/200Mi defaults) and skips best-effort pods, which would
otherwise all land on the emptiest node (kubernetes/kubernetes#129138).
Args: ``resources: [{name, weight}]`` (default cpu and memory).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from distsched.framework.cycle_state import CycleState
from distsched.framework.events import ClusterEvent
from distsched.framework.interface import (
    Handle,
    PluginArgsError,
    PreScorePlugin,
    ScorePlugin,
    SignPlugin,
)
from distsched.framework.plugins.helpers.resource_allocation import (
    DEFAULT_RESOURCES,
    ResourceColumn,
    ResourceSpec,
    allocatable_and_requested,
    parse_resources,
    pod_request_list,
)
from distsched.framework.podinfo import PodInfo, cycle_pod_info
from distsched.framework.snapshot import Snapshot
from distsched.framework.status import Status
from distsched.model.objects import Pod

NAME = "NodeResourcesBalancedAllocation"
EVENTS: tuple[ClusterEvent, ...] = ()
_PRE_SCORE_KEY = "PreScore" + NAME


class BalancedAllocation(PreScorePlugin, ScorePlugin, SignPlugin):
    name = NAME
    scores_in_range = True

    def __init__(self, resources: tuple[ResourceSpec, ...]) -> None:
        self.resources = resources

    def sign_pod(self, pod: Pod, info: PodInfo, snapshot: Snapshot) -> Hashable | None:
        return tuple(info.requests.items())

    def pre_score(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, indices: np.ndarray
    ) -> Status | None:
        requests = pod_request_list(cycle_pod_info(state, pod), self.resources, use_requested=True)
        if not any(requests):
            return Status.skip()
        state.write(_PRE_SCORE_KEY, requests)
        return None

    def score(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, indices: np.ndarray
    ) -> np.ndarray:
        requests: list[int] | None = state.get(_PRE_SCORE_KEY)
        if requests is None:
            requests = pod_request_list(
                cycle_pod_info(state, pod), self.resources, use_requested=True
            )
            if not any(requests):
                return np.zeros(indices.size, dtype=np.int64)
        columns = allocatable_and_requested(
            snapshot, indices, self.resources, requests, use_requested=True
        )
        return balanced_scores(columns, int(indices.size))


def balanced_scores(columns: list[ResourceColumn | None], n: int) -> np.ndarray:
    """kube's balancedResourceScorer over every node at once, in the same float order."""
    used = [c for c in columns if c is not None]
    if not used:
        return np.full(n, 100, dtype=np.int64)
    if len(used) == 2 and used[0].complete and used[1].complete:
        # The common case (cpu and memory everywhere): std of two values is |a - b| / 2.
        first = np.minimum(used[0].requested / used[0].allocatable, 1.0)
        second = np.minimum(used[1].requested / used[1].allocatable, 1.0)
        std = np.abs(first - second) / 2
        return ((1 - std) * 100).astype(np.int64)
    fractions: list[np.ndarray] = []
    present: list[np.ndarray] = []
    for allocatable, requested, _ in used:
        ok = allocatable > 0
        fraction = np.where(ok, requested / np.where(ok, allocatable, 1), 0.0)
        fractions.append(np.minimum(fraction, 1.0))
        present.append(ok)
    count = np.sum(present, axis=0)
    std = np.zeros(n, dtype=np.float64)
    frac = np.array(fractions)
    mask = np.array(present)
    big = np.where(mask, frac, -np.inf).max(axis=0)
    small = np.where(mask, frac, np.inf).min(axis=0)
    two = count == 2
    std[two] = np.abs(big[two] - small[two]) / 2
    many = count > 2
    if many.any():
        total = np.zeros(n)
        for f, ok in zip(fractions, present, strict=True):
            total = total + np.where(ok, f, 0.0)
        mean = total / np.maximum(count, 1)
        squares = np.zeros(n)
        for f, ok in zip(fractions, present, strict=True):
            squares = squares + np.where(ok, (f - mean) * (f - mean), 0.0)
        std[many] = np.sqrt(squares[many] / count[many])
    return ((1 - std) * 100).astype(np.int64)


def new(args: dict[str, Any], handle: Handle) -> BalancedAllocation:
    unknown = set(args) - {"resources"}
    if unknown:
        raise PluginArgsError(sorted(unknown)[0], "unknown field")
    resources: tuple[ResourceSpec, ...] = DEFAULT_RESOURCES
    if "resources" in args:
        resources = parse_resources(args["resources"], "resources")
    return BalancedAllocation(resources)
