"""PodTopologySpread: DoNotSchedule constraints (PreFilter, Filter) and ScheduleAnyway
constraints (PreScore, Score, NormalizeScore), after kube's podtopologyspread plugin.

Per constraint the PreFilter state holds, indexed by the snapshot's domain ids of the
constraint's topology key, the matching pods per eligible domain and which domains are
eligible (a node is eligible when it has every constraint's key and passes the
constraint's nodeAffinityPolicy / nodeTaintsPolicy). The global minimum is exact, as in
recent kube (older releases tracked only two "critical paths").

Default constraints (args ``defaultConstraints``/``defaultingType``) are accepted but
never apply: kube applies them only to pods selected by a Service, ReplicationController,
ReplicaSet or StatefulSet (helper.DefaultSelector), and distsched models none of those,
so the default selector is always empty and kube itself would skip them.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np

from distsched.framework.cycle_state import CycleState
from distsched.framework.events import ActionType, ClusterEvent, EventResource
from distsched.framework.interface import (
    MAX_NODE_SCORE,
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
from distsched.framework.plugins.helpers.node_selector import required_affinity_mask
from distsched.framework.plugins.helpers.pod_index import pod_index
from distsched.framework.plugins.helpers.prefilter_state import CountingPreFilterExtensions
from distsched.framework.podinfo import PodInfo
from distsched.framework.snapshot import Snapshot
from distsched.framework.status import PluginError, Status
from distsched.model.labels import (
    NOTHING,
    AffinityTerm,
    InvalidSelector,
    Selector,
    compile_selector,
)
from distsched.model.objects import LABEL_HOSTNAME, Node, Pod, Toleration
from distsched.model.taints import DO_NOT_SCHEDULE_EFFECTS, tolerations_tolerate

NAME = "PodTopologySpread"
EVENTS: tuple[ClusterEvent, ...] = (
    ClusterEvent(
        EventResource.POD, ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.DELETE
    ),
    ClusterEvent(
        EventResource.NODE,
        ActionType.ADD
        | ActionType.DELETE
        | ActionType.UPDATE_NODE_LABEL
        | ActionType.UPDATE_NODE_TAINT,
    ),
)
ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"
DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR = "Honor"

_PRE_FILTER_KEY = "PreFilter" + NAME
_PRE_SCORE_KEY = "PreScore" + NAME
_MAX_INT32 = 2**31 - 1


@dataclass(frozen=True, slots=True)
class Constraint:
    """kube's topologySpreadConstraint: a pod's constraint with its selector parsed."""

    max_skew: int
    topology_key: str
    selector: Selector
    min_domains: int
    honor_node_affinity: bool
    honor_node_taints: bool


def pod_constraints(pod: Pod, action: str) -> tuple[Constraint, ...]:
    """kube's filterTopologySpreadConstraints: the pod's constraints for ``action``, with
    matchLabelKeys merged into the selector."""
    labels = pod.metadata.labels
    found = []
    for c in pod.spec.topology_spread_constraints:
        if c.when_unsatisfiable != action:
            continue
        selector = compile_selector(c.label_selector)
        if c.match_label_keys:
            selector = selector.with_labels(
                {k: labels[k] for k in c.match_label_keys if k in labels}
            )
        found.append(
            Constraint(
                c.max_skew,
                c.topology_key,
                selector,
                c.min_domains if c.min_domains is not None else 1,
                c.node_affinity_policy == HONOR,
                c.node_taints_policy == HONOR,
            )
        )
    return tuple(found)


@dataclass(slots=True)
class _PreFilterState:
    constraints: tuple[Constraint, ...]
    namespace: str
    # Per constraint: bool[capacity] nodes counted for it (all keys + inclusion policies).
    eligible_nodes: list[np.ndarray]
    # Per constraint, indexed by domain id (+ a sentinel read by id -1):
    counts: list[np.ndarray]  # int64 matching pods in the domain's eligible nodes
    eligible: list[np.ndarray]  # bool: the domain has an eligible node
    self_match: list[int]  # 1 when the incoming pod matches the constraint's selector

    def min_match(self, i: int) -> int:
        """kube's minMatchNum: the global minimum, 0 with fewer domains than minDomains."""
        eligible = self.eligible[i]
        domains = int(eligible.sum())
        if domains < self.constraints[i].min_domains:
            return 0
        if domains == 0:
            return _MAX_INT32
        return int(self.counts[i][eligible].min())

    def clone(self) -> _PreFilterState:
        return _PreFilterState(
            self.constraints,
            self.namespace,
            self.eligible_nodes,
            [c.copy() for c in self.counts],
            self.eligible,
            self.self_match,
        )

    def update_with_pod(
        self, info: PodInfo, snapshot: Snapshot, node_index: int, delta: int
    ) -> None:
        """kube's updateWithPod (preemption's AddPod/RemovePod)."""
        if info.namespace != self.namespace:
            return
        for i, constraint in enumerate(self.constraints):
            # kube matches the selector here without the Empty() shortcut of its counting.
            if not self.eligible_nodes[i][node_index] or not constraint.selector.matches(
                info.labels
            ):
                continue
            domain = int(snapshot.topology_domains(constraint.topology_key)[0][node_index])
            if domain >= 0:
                self.counts[i][domain] += delta


@dataclass(slots=True)
class _PreScoreState:
    constraints: tuple[Constraint, ...]
    ignored: np.ndarray  # bool aligned with the scored nodes: missing a topology key
    weights: list[float]  # topologyNormalizingWeight per constraint
    # Per constraint: int64[domains + 1] counts (None for kubernetes.io/hostname, whose
    # per-node counts are read at Score).
    domain_counts: list[np.ndarray | None]
    node_counts: list[np.ndarray]  # per constraint: int64[capacity] matching pods per node


class PodTopologySpread(
    CountingPreFilterExtensions,
    PreFilterPlugin,
    FilterPlugin,
    PreScorePlugin,
    ScorePlugin,
    SignPlugin,
):
    pre_filter_state_key = _PRE_FILTER_KEY

    name = NAME
    scores_in_range = True

    def __init__(self, handle: Handle) -> None:
        self.handle = handle
        self._untolerated_cache: dict[tuple[object, ...], np.ndarray] = {}

    # -------------------------------------------------------------- shared
    def _node_counts(self, snapshot: Snapshot, namespace: str, selector: Selector) -> np.ndarray:
        """int64[capacity]: pods of ``namespace`` matching ``selector`` per node (kube's
        countPodsMatchSelector, which counts nothing for an empty selector)."""
        if selector.empty() or selector.nothing:
            return np.zeros(snapshot.capacity, dtype=np.int64)
        term = AffinityTerm("", selector, frozenset((namespace,)), NOTHING)
        index = pod_index(snapshot, self.handle.listers.namespaces.of)
        return index.counts(snapshot, (term,))

    def _untolerated(self, snapshot: Snapshot, tolerations: tuple[Toleration, ...]) -> np.ndarray:
        """bool[capacity]: nodes with a NoSchedule/NoExecute taint the pod does not tolerate."""
        key = (tolerations, id(snapshot), snapshot.taint_version, snapshot.capacity)
        mask = self._untolerated_cache.get(key)
        if mask is None:
            mask = np.zeros(snapshot.capacity, dtype=bool)
            for taint in snapshot.distinct_taints():
                if taint.effect in DO_NOT_SCHEDULE_EFFECTS and not tolerations_tolerate(
                    tolerations, taint
                ):
                    mask |= snapshot.taint_mask(taint)
            if len(self._untolerated_cache) >= 256:
                self._untolerated_cache.clear()
            self._untolerated_cache[key] = mask
        return mask

    def _eligible_nodes(
        self, snapshot: Snapshot, pod: Pod, constraints: tuple[Constraint, ...]
    ) -> list[np.ndarray]:
        """Per constraint, bool[capacity]: valid nodes with every constraint's topology key
        that pass the constraint's node inclusion policies."""
        base = _has_all_keys(snapshot, constraints)
        affinity = None
        if any(c.honor_node_affinity for c in constraints):
            affinity = required_affinity_mask(snapshot, pod)
        untolerated = None
        if any(c.honor_node_taints for c in constraints):
            untolerated = self._untolerated(snapshot, pod.spec.tolerations)
        masks = []
        for c in constraints:
            mask = base
            if c.honor_node_affinity and affinity is not None:
                mask = mask & affinity
            if c.honor_node_taints and untolerated is not None:
                mask = mask & ~untolerated
            masks.append(mask)
        return masks

    def sign_pod(self, pod: Pod, info: PodInfo, snapshot: Snapshot) -> Hashable | None:
        # Skew depends on the pods of every domain: a pod with constraints is not
        # signable. Default constraints never apply here (see the module docstring), so
        # unlike kube their presence does not stop signing.
        if pod.spec.topology_spread_constraints:
            return None
        return ()

    # -------------------------------------------------------------- filtering
    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status | None]:
        try:
            constraints = pod_constraints(pod, DO_NOT_SCHEDULE)
        except InvalidSelector as exc:
            return None, Status.from_error(
                PluginError(f"obtaining pod's hard topology spread constraints: {exc}")
            )
        if not constraints:
            return None, Status.skip()
        namespace = pod.metadata.namespace
        eligible_nodes = self._eligible_nodes(snapshot, pod, constraints)
        counts: list[np.ndarray] = []
        eligible: list[np.ndarray] = []
        for c, nodes_mask in zip(constraints, eligible_nodes, strict=True):
            ids, values = snapshot.topology_domains(c.topology_key)
            nodes = np.flatnonzero(nodes_mask)
            domains = ids[nodes]
            size = len(values)
            present = np.zeros(size + 1, dtype=bool)
            present[:size] = np.bincount(domains, minlength=size) > 0
            per_node = self._node_counts(snapshot, namespace, c.selector)
            sums = np.zeros(size + 1, dtype=np.int64)
            sums[:size] = np.bincount(domains, weights=per_node[nodes], minlength=size)
            counts.append(sums)
            eligible.append(present)
        self_match = [int(c.selector.matches(pod.metadata.labels)) for c in constraints]
        state.write(
            _PRE_FILTER_KEY,
            _PreFilterState(constraints, namespace, eligible_nodes, counts, eligible, self_match),
        )
        return None, None

    def filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, indices: np.ndarray
    ) -> FilterResult:
        s: _PreFilterState | None = state.get(_PRE_FILTER_KEY)
        if s is None:
            raise PluginError(f"reading {_PRE_FILTER_KEY!r} from cycleState: not found")
        n = indices.size
        decided = np.zeros(n, dtype=bool)
        missing = np.zeros(n, dtype=bool)
        skewed = np.zeros(n, dtype=bool)
        # kube stops at the first constraint a node fails, so earlier constraints decide.
        for i, c in enumerate(s.constraints):
            domains = snapshot.topology_domains(c.topology_key)[0][indices]
            lacks = (domains < 0) & ~decided
            skew = s.counts[i][domains] + s.self_match[i] - s.min_match(i)
            too_skewed = (skew > c.max_skew) & (domains >= 0) & ~decided
            missing |= lacks
            skewed |= too_skewed
            decided |= lacks | too_skewed
        result = FilterResult()
        result.add(ERR_REASON_NODE_LABEL_NOT_MATCH, missing, unresolvable=True)
        result.add(ERR_REASON_CONSTRAINTS_NOT_MATCH, skewed)
        return result

    # -------------------------------------------------------------- scoring
    def pre_score(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, indices: np.ndarray
    ) -> Status | None:
        if snapshot.num_nodes == 0:
            return Status.skip()
        try:
            constraints = pod_constraints(pod, SCHEDULE_ANYWAY)
        except InvalidSelector as exc:
            raise PluginError(f"obtaining pod's soft topology spread constraints: {exc}") from exc
        if not constraints:
            return Status.skip()
        namespace = pod.metadata.namespace
        eligible_nodes = self._eligible_nodes(snapshot, pod, constraints)
        # Without system-default constraints every node must carry all topology keys.
        has_all_keys = _has_all_keys(snapshot, constraints)
        scored = indices[has_all_keys[indices]]
        ignored = ~has_all_keys[indices]
        weights: list[float] = []
        domain_sums: list[np.ndarray | None] = []
        node_counts: list[np.ndarray] = []
        for c, nodes_mask in zip(constraints, eligible_nodes, strict=True):
            per_node = self._node_counts(snapshot, namespace, c.selector)
            node_counts.append(per_node)
            if c.topology_key == LABEL_HOSTNAME:
                weights.append(math.log(scored.size + 2))
                domain_sums.append(None)
                continue
            ids, values = snapshot.topology_domains(c.topology_key)
            size = len(values)
            wanted = np.zeros(size + 1, dtype=bool)
            wanted[:size] = np.bincount(ids[scored], minlength=size) > 0
            weights.append(math.log(int(wanted.sum()) + 2))
            nodes = np.flatnonzero(nodes_mask)
            domains = ids[nodes]
            sums = np.zeros(size + 1, dtype=np.int64)
            sums[:size] = np.bincount(domains, weights=per_node[nodes], minlength=size)
            sums[~wanted] = 0  # only domains of the nodes being scored are counted
            domain_sums.append(sums)
        state.write(
            _PRE_SCORE_KEY, _PreScoreState(constraints, ignored, weights, domain_sums, node_counts)
        )
        return None

    def score(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, indices: np.ndarray
    ) -> np.ndarray:
        s: _PreScoreState | None = state.get(_PRE_SCORE_KEY)
        if s is None:
            raise PluginError(f"reading {_PRE_SCORE_KEY!r} from cycleState: not found")
        total = np.zeros(indices.size, dtype=np.float64)
        for i, c in enumerate(s.constraints):
            sums = s.domain_counts[i]
            if sums is None:
                count = s.node_counts[i][indices]
            else:
                count = sums[snapshot.topology_domains(c.topology_key)[0][indices]]
            total += count * s.weights[i] + float(c.max_skew - 1)
        # Go's math.Round: half away from zero (scores are never negative).
        rounded = np.floor(total + 0.5).astype(np.int64)
        rounded[s.ignored] = 0
        return rounded

    def normalize_score(self, state: CycleState, pod: Pod, scores: np.ndarray) -> np.ndarray:
        s: _PreScoreState | None = state.get(_PRE_SCORE_KEY)
        if s is None or scores.size == 0:
            return scores
        valid = ~s.ignored
        if not valid.any():
            return np.zeros(scores.size, dtype=np.int64)
        low = int(scores[valid].min())
        high = max(int(scores[valid].max()), 0)
        if high == 0:
            return np.where(valid, MAX_NODE_SCORE, 0).astype(np.int64)
        return np.where(valid, MAX_NODE_SCORE * (high + low - scores) // high, 0).astype(np.int64)


def _has_all_keys(snapshot: Snapshot, constraints: tuple[Constraint, ...]) -> np.ndarray:
    """bool[capacity]: nodes carrying every constraint's topology key (kube's
    nodeLabelsMatchSpreadConstraints), cached until node labels change."""
    keys = tuple(sorted({c.topology_key for c in constraints}))

    def compute() -> np.ndarray:
        mask = snapshot.valid.copy()
        for key in keys:
            mask &= snapshot.label_exists_mask(key)
        return mask

    return snapshot.label_cached(("pts-keys", keys), compute)


def new(args: dict[str, Any], handle: Handle) -> PodTopologySpread:
    unknown = set(args) - {"defaultConstraints", "defaultingType"}
    if unknown:
        raise PluginArgsError(sorted(unknown)[0], "unknown field")
    defaulting = args.get("defaultingType", "System")
    if defaulting not in ("System", "List"):
        raise PluginArgsError("defaultingType", "must be System or List")
    constraints = args.get("defaultConstraints", [])
    if not isinstance(constraints, list):
        raise PluginArgsError("defaultConstraints", "must be a list")
    if defaulting == "System" and constraints:
        raise PluginArgsError("defaultConstraints", "should be empty when defaultingType is System")
    return PodTopologySpread(handle)


# ---------------------------------------------------------------------- QueueingHint
def _after_node_change(constraints: tuple[Constraint, ...], old: Node | None, new: Node) -> bool:
    """kube's isSchedulableAfterNodeChange: Queue for an added node that has every
    constraint's topology key; for an update, when the node has them (before or after)
    and a topology value, or its taints (for constraints that honour taints), changed."""

    def has_keys(node: Node) -> bool:
        return all(c.topology_key in node.metadata.labels for c in constraints)

    if old is None:
        return has_keys(new)
    if not has_keys(old) and not has_keys(new):
        return False
    keys = {c.topology_key for c in constraints}
    moved = any(old.metadata.labels.get(k) != new.metadata.labels.get(k) for k in keys)
    taints = any(c.honor_node_taints for c in constraints) and old.spec.taints != new.spec.taints
    return moved or taints


def queueing_hint(event: ClusterEvent, pod: Pod, old: Any, new: Any, handle: Handle) -> bool | None:
    """kube's isSchedulableAfterPodChange for assigned-pod events, and
    isSchedulableAfterNodeChange (:func:`_after_node_change`): Queue when the added,
    deleted or relabelled pod is one the pending pod's DoNotSchedule constraints count
    (same namespace, selector match), before or after the change."""
    constraints = pod_constraints(pod, DO_NOT_SCHEDULE)
    if not constraints:
        return None
    if event.resource == EventResource.NODE and isinstance(new, Node):
        return _after_node_change(constraints, old if isinstance(old, Node) else None, new)
    if event.resource != EventResource.ASSIGNED_POD:
        return None

    def counted(other: Any) -> bool:
        return (
            isinstance(other, Pod)
            and other.metadata.namespace == pod.metadata.namespace
            and any(c.selector.matches(other.metadata.labels) for c in constraints)
        )

    relabelled = isinstance(old, Pod) and isinstance(new, Pod)
    if relabelled and old.metadata.labels == new.metadata.labels:
        return False
    return counted(old) or counted(new)
