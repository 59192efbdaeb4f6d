"""TaintToleration: Filter out nodes with an untolerated NoSchedule/NoExecute taint; Score
nodes by how few PreferNoSchedule taints the pod does not tolerate."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np

from distsched.framework.cycle_state import CycleState
from distsched.framework.events import NODE_ADD_OR_SCHEDULING_CHANGE, ClusterEvent, EventResource
from distsched.framework.interface import (
    FilterPlugin,
    FilterResult,
    Handle,
    PreScorePlugin,
    ScorePlugin,
    SignPlugin,
)
from distsched.framework.plugins.helpers.normalize import default_normalize_score
from distsched.framework.podinfo import PodInfo
from distsched.framework.snapshot import Snapshot
from distsched.framework.status import Status
from distsched.model.objects import Node, Pod, Taint, Toleration
from distsched.model.taints import (
    DO_NOT_SCHEDULE_EFFECTS,
    PREFER_NO_SCHEDULE,
    find_untolerated_taint,
    tolerations_tolerate,
)

NAME = "TaintToleration"
EVENTS: tuple[ClusterEvent, ...] = (
    ClusterEvent(EventResource.NODE, NODE_ADD_OR_SCHEDULING_CHANGE),
)
_PRE_SCORE_KEY = "PreScore" + NAME


def untolerated_reason(taint: Taint) -> str:
    return f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"


@dataclass(frozen=True, slots=True)
class _Untolerated:
    """For one set of tolerations, over the current taints of the snapshot."""

    taints: tuple[Taint, ...]  # untolerated NoSchedule/NoExecute taints
    hits: np.ndarray | None  # int8[capacity]: how many of them each node carries


class TaintToleration(FilterPlugin, PreScorePlugin, ScorePlugin, SignPlugin):
    name = NAME
    reads_only_its_node = True
    reads_only_its_node_usage = True
    scores_in_range = True

    def __init__(self) -> None:
        # Keyed by (tolerations, snapshot id, taint_version): pods of one workload share
        # tolerations and taints change rarely.
        self._filter_cache: dict[tuple[object, ...], _Untolerated] = {}
        self._score_cache: dict[tuple[object, ...], np.ndarray | None] = {}

    def _untolerated(self, snapshot: Snapshot, tolerations: tuple[Toleration, ...]) -> _Untolerated:
        key = (tolerations, id(snapshot), snapshot.taint_version)
        cached = self._filter_cache.get(key)
        if cached is not None:
            return cached
        taints = tuple(
            t
            for t in snapshot.distinct_taints()
            if t.effect in DO_NOT_SCHEDULE_EFFECTS and not tolerations_tolerate(tolerations, t)
        )
        hits = None
        if taints:
            hits = np.zeros(snapshot.capacity, dtype=np.int8)
            for taint in taints:
                hits += snapshot.taint_mask(taint)
        entry = _Untolerated(taints, hits)
        _remember(self._filter_cache, key, entry)
        return entry

    def sign_pod(self, pod: Pod, info: PodInfo, snapshot: Snapshot) -> Hashable | None:
        return pod.spec.tolerations

    def filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, indices: np.ndarray
    ) -> FilterResult:
        tolerations = pod.spec.tolerations
        untolerated = self._untolerated(snapshot, tolerations)
        if untolerated.hits is None:
            return FilterResult.all_pass()
        hits = untolerated.hits[indices]
        if len(untolerated.taints) == 1:
            return FilterResult.of(
                untolerated_reason(untolerated.taints[0]), hits > 0, unresolvable=True
            )
        if not hits.any():
            return FilterResult.all_pass()
        result = FilterResult()
        single = hits == 1
        for taint in untolerated.taints:
            mask = snapshot.taint_mask(taint)[indices] & single
            result.add(untolerated_reason(taint), mask, unresolvable=True)
        # Nodes with several untolerated taints report the first one in the node's order.
        for position in np.flatnonzero(hits > 1):
            first = find_untolerated_taint(
                snapshot.taints(int(indices[position])), tolerations, DO_NOT_SCHEDULE_EFFECTS
            )
            assert first is not None
            mask = np.zeros(indices.size, dtype=bool)
            mask[position] = True
            result.add(untolerated_reason(first), mask, unresolvable=True)
        return result

    def pre_score(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, indices: np.ndarray
    ) -> Status | None:
        state.write(_PRE_SCORE_KEY, _prefer_no_schedule_tolerations(pod))
        return None

    def score(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, indices: np.ndarray
    ) -> np.ndarray:
        prefer: tuple[Toleration, ...] | None = state.get(_PRE_SCORE_KEY)
        if prefer is None:
            prefer = _prefer_no_schedule_tolerations(pod)
        key = (prefer, id(snapshot), snapshot.taint_version)
        if key in self._score_cache:
            counts = self._score_cache[key]
        else:
            counts = None
            for taint in snapshot.distinct_taints():
                if taint.effect == PREFER_NO_SCHEDULE and not tolerations_tolerate(prefer, taint):
                    if counts is None:
                        counts = np.zeros(snapshot.capacity, dtype=np.int64)
                    counts += snapshot.taint_mask(taint)
            _remember(self._score_cache, key, counts)
        if counts is None:
            return np.zeros(indices.size, dtype=np.int64)
        return counts[indices]

    def normalize_score(self, state: CycleState, pod: Pod, scores: np.ndarray) -> np.ndarray:
        return default_normalize_score(scores, reverse=True)


def _prefer_no_schedule_tolerations(pod: Pod) -> tuple[Toleration, ...]:
    # An empty effect tolerates every effect, PreferNoSchedule included.
    return tuple(t for t in pod.spec.tolerations if t.effect in ("", PREFER_NO_SCHEDULE))


_CACHE_SIZE = 1024


def _remember(cache: dict, key: tuple[object, ...], value: object) -> None:  # type: ignore[type-arg]
    if len(cache) >= _CACHE_SIZE:
        cache.clear()
    cache[key] = value


def new(args: dict[str, Any], handle: Handle) -> TaintToleration:
    return TaintToleration()


# ---------------------------------------------------------------------- QueueingHint
def queueing_hint(event: ClusterEvent, pod: Pod, old: Any, new: Any, handle: Handle) -> bool | None:
    """kube's isSchedulableAfterNodeChange: Queue when the node has no untolerated
    NoSchedule/NoExecute taint now and had one before (an added node: none now)."""
    if event.resource != EventResource.NODE or not isinstance(new, Node):
        return None

    def untolerated(node: Node) -> bool:
        taint = find_untolerated_taint(
            node.spec.taints, pod.spec.tolerations, DO_NOT_SCHEDULE_EFFECTS
        )
        return taint is not None

    if untolerated(new):
        return False
    return not isinstance(old, Node) or untolerated(old)
