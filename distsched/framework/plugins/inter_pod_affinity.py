"""InterPodAffinity: required pod affinity / anti-affinity (PreFilter, Filter) and preferred
terms (PreScore, Score, NormalizeScore), after kube's interpodaffinity plugin.

Counts are kept per topology pair like kube's topologyToMatchedTermCount, laid out as one
int64 array per topology key indexed by the snapshot's domain ids for that key (plus a
sentinel 0 read by nodes without the label), so Filter answers every candidate with a
few gathers. The per-node pod counts behind them come from the snapshot's PodIndex,
maintained incrementally (see helpers/pod_index.py).

Args: ``hardPodAffinityWeight`` (0..100, default 1), ``ignorePreferredTermsOfExistingPods``.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np

from distsched.framework.cycle_state import CycleState
from distsched.framework.events import (
    NODE_ADD_OR_SCHEDULING_CHANGE,
    ActionType,
    ClusterEvent,
    EventResource,
)
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
from distsched.framework.plugins.helpers.pod_index import TermGroup, pod_index
from distsched.framework.plugins.helpers.prefilter_state import CountingPreFilterExtensions
from distsched.framework.podinfo import PodInfo, cycle_pod_info
from distsched.framework.snapshot import Snapshot
from distsched.framework.status import PluginError, Status
from distsched.model.labels import (
    AffinityTerm,
    InvalidSelector,
    NamespaceLabelsOf,
    compile_term,
    compile_terms,
)
from distsched.model.objects import Node, Pod

NAME = "InterPodAffinity"
EVENTS: tuple[ClusterEvent, ...] = (
    ClusterEvent(
        EventResource.POD, ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.DELETE
    ),
    ClusterEvent(EventResource.NODE, NODE_ADD_OR_SCHEDULING_CHANGE),
)
ERR_REASON_AFFINITY = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
ERR_REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
DEFAULT_HARD_POD_AFFINITY_WEIGHT = 1

_PRE_FILTER_KEY = "PreFilter" + NAME
_PRE_SCORE_KEY = "PreScore" + NAME

# topology key -> int64[domains + 1] (last entry: the sentinel 0)
TopologyCounts = dict[str, np.ndarray]


def _positive(counts: TopologyCounts) -> bool:
    return any(bool((array > 0).any()) for array in counts.values())


def _add_domains(counts: TopologyCounts, key: str, sums: np.ndarray) -> None:
    current = counts.get(key)
    counts[key] = sums if current is None else current + sums


def _update(
    counts: TopologyCounts, snapshot: Snapshot, key: str, node_index: int, delta: int
) -> None:
    """kube's topologyToMatchedTermCount.update for the node's value of ``key``."""
    ids, values = snapshot.topology_domains(key)
    domain = int(ids[node_index])
    if domain < 0:
        return
    array = counts.get(key)
    if array is None or array.size != len(values) + 1:
        array = np.zeros(len(values) + 1, dtype=np.int64)
    else:
        array = array.copy()  # arrays may be shared with the state this one was cloned from
    array[domain] += delta
    counts[key] = array


@dataclass(slots=True)
class _PreFilterState:
    namespace_labels: NamespaceLabelsOf
    namespace: str
    labels: dict[str, str]
    affinity_terms: tuple[AffinityTerm, ...]
    anti_affinity_terms: tuple[AffinityTerm, ...]
    # Pods whose terms match all the incoming pod's affinity terms, per topology pair.
    affinity: TopologyCounts
    # Pods matching each of the incoming pod's anti-affinity terms, per topology pair.
    anti_affinity: TopologyCounts
    # Placed pods with a required anti-affinity term matching the incoming pod.
    existing_anti_affinity: TopologyCounts
    # The pod matches all its own affinity terms (the first pod of a group may schedule).
    matches_own_affinity: bool

    def clone(self) -> _PreFilterState:
        # Arrays are copied on write by _update, so sharing them is safe.
        return _PreFilterState(
            self.namespace_labels,
            self.namespace,
            self.labels,
            self.affinity_terms,
            self.anti_affinity_terms,
            dict(self.affinity),
            dict(self.anti_affinity),
            dict(self.existing_anti_affinity),
            self.matches_own_affinity,
        )

    def update_with_pod(
        self, info: PodInfo, snapshot: Snapshot, node_index: int, delta: int
    ) -> None:
        """kube's preFilterState.updateWithPod: ``info`` added to (delta 1) or removed from
        (delta -1) the node."""
        namespace_labels = self.namespace_labels
        for declared in info.required_anti_affinity_terms:
            existing = compile_term(declared, info.namespace)
            if existing.matches(self.namespace, self.labels, namespace_labels):
                _update(
                    self.existing_anti_affinity, snapshot, existing.topology_key, node_index, delta
                )
        if self.affinity_terms and all(
            t.matches(info.namespace, info.labels, namespace_labels) for t in self.affinity_terms
        ):
            for term in self.affinity_terms:
                _update(self.affinity, snapshot, term.topology_key, node_index, delta)
        for term in self.anti_affinity_terms:
            if term.matches(info.namespace, info.labels, namespace_labels):
                _update(self.anti_affinity, snapshot, term.topology_key, node_index, delta)


@dataclass(slots=True)
class _PreScoreState:
    # topology key -> int64[domains + 1]: summed weights, like kube's scoreMap
    topology_score: TopologyCounts


class InterPodAffinity(
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

    def __init__(
        self, *, hard_pod_affinity_weight: int, ignore_preferred_of_existing: bool, handle: Handle
    ) -> None:
        self.hard_pod_affinity_weight = hard_pod_affinity_weight
        self.ignore_preferred_of_existing = ignore_preferred_of_existing
        self.handle = handle

    def sign_pod(self, pod: Pod, info: PodInfo, snapshot: Snapshot) -> Hashable | None:
        # Only a pod this plugin has nothing to say about: no (anti-)affinity of its own
        # and no placed pod with any, so PreFilter and PreScore both Skip. Otherwise a
        # node's verdict depends on the pods of its whole topology domain.
        if info.has_affinity or snapshot.pods_with_affinity:
            return None
        return ()

    # -------------------------------------------------------------- filtering
    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status | None]:
        info = cycle_pod_info(state, pod)
        try:
            affinity_terms = compile_terms(info.required_affinity_terms, info.namespace)
            anti_terms = compile_terms(info.required_anti_affinity_terms, info.namespace)
        except InvalidSelector as exc:
            return None, Status.unresolvable(f"parsing pod: {exc}")
        namespace_labels = self.handle.listers.namespaces.of
        index = pod_index(snapshot, namespace_labels)

        existing: TopologyCounts = {}
        for group in index.groups.required_anti_affinity.values():
            if group.term.matches(info.namespace, info.labels, namespace_labels):
                key = group.term.topology_key
                _add_domains(existing, key, group.domain_counts(snapshot, key))
        if not _positive(existing) and not affinity_terms and not anti_terms:
            return None, Status.skip()

        affinity: TopologyCounts = {}
        if affinity_terms:
            query = tuple(t.without_topology() for t in affinity_terms)
            for term in affinity_terms:
                key = term.topology_key
                _add_domains(affinity, key, index.domain_counts(snapshot, query, key))
        anti_affinity: TopologyCounts = {}
        for term in anti_terms:
            key = term.topology_key
            sums = index.domain_counts(snapshot, (term.without_topology(),), key)
            _add_domains(anti_affinity, key, sums)

        matches_own = bool(affinity_terms) and all(
            t.matches(info.namespace, info.labels, namespace_labels) for t in affinity_terms
        )
        state.write(
            _PRE_FILTER_KEY,
            _PreFilterState(
                namespace_labels,
                info.namespace,
                info.labels,
                affinity_terms,
                anti_terms,
                affinity,
                anti_affinity,
                existing,
                matches_own,
            ),
        )
        return None, None

    def filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, indices: np.ndarray
    ) -> FilterResult:
        s: _PreFilterState | None = state.get(_PRE_FILTER_KEY)
        if s is None:
            raise PluginError(f"reading {_PRE_FILTER_KEY!r} from cycleState: not found")
        result = FilterResult()
        decided: np.ndarray | None = None

        if s.affinity_terms:
            has_keys = np.ones(indices.size, dtype=bool)
            pods_exist = np.ones(indices.size, dtype=bool)
            for term in s.affinity_terms:
                domains = snapshot.topology_domains(term.topology_key)[0][indices]
                has_keys &= domains >= 0
                counts = s.affinity.get(term.topology_key)
                if counts is None:
                    pods_exist[:] = False
                else:
                    pods_exist &= _gather(counts, domains) > 0
            ok = has_keys & pods_exist
            if not ok.all() and not _positive(s.affinity) and s.matches_own_affinity:
                ok = has_keys  # the first pod of a group that has affinity to itself
            decided = ~ok
            result.add(ERR_REASON_AFFINITY, decided, unresolvable=True)

        if s.anti_affinity_terms and _positive(s.anti_affinity):
            failed = np.zeros(indices.size, dtype=bool)
            for term in s.anti_affinity_terms:
                counts = s.anti_affinity.get(term.topology_key)
                if counts is not None:
                    domains = snapshot.topology_domains(term.topology_key)[0][indices]
                    failed |= _gather(counts, domains) > 0
            decided = _report(result, ERR_REASON_ANTI_AFFINITY, failed, decided)

        if _positive(s.existing_anti_affinity):
            failed = np.zeros(indices.size, dtype=bool)
            for key, counts in s.existing_anti_affinity.items():
                domains = snapshot.topology_domains(key)[0][indices]
                failed |= _gather(counts, domains) > 0
            _report(result, ERR_REASON_EXISTING_ANTI_AFFINITY, failed, decided)
        return result

    # -------------------------------------------------------------- scoring
    def pre_score(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, indices: np.ndarray
    ) -> Status | None:
        if indices.size == 0:
            return Status.skip()
        info = cycle_pod_info(state, pod)
        has_constraints = bool(info.preferred_affinity_terms or info.preferred_anti_affinity_terms)
        if self.ignore_preferred_of_existing and not has_constraints:
            return Status.skip()
        namespace_labels = self.handle.listers.namespaces.of
        index = pod_index(snapshot, namespace_labels)
        scores: TopologyCounts = {}
        touched = False

        def add(key: str, sums: np.ndarray, weight: int) -> None:
            nonlocal touched
            if sums.any():
                touched = True
                _add_domains(scores, key, sums * weight)

        try:
            for weighted, sign in (
                *((w, 1) for w in info.preferred_affinity_terms),
                *((w, -1) for w in info.preferred_anti_affinity_terms),
            ):
                term = compile_term(weighted.term, info.namespace)
                key = term.topology_key
                sums = index.domain_counts(snapshot, (term.without_topology(),), key)
                add(key, sums, sign * weighted.weight)
        except InvalidSelector as exc:
            raise PluginError(f"parsing pod: {exc}") from exc

        groups: list[tuple[TermGroup, int]] = []
        if self.hard_pod_affinity_weight > 0:
            groups += [
                (g, self.hard_pod_affinity_weight) for g in index.groups.required_affinity.values()
            ]
        groups += [(g, g.weight) for g in index.groups.preferred_affinity.values()]
        groups += [(g, -g.weight) for g in index.groups.preferred_anti_affinity.values()]
        for group, weight in groups:
            if group.term.matches(info.namespace, info.labels, namespace_labels):
                key = group.term.topology_key
                add(key, group.domain_counts(snapshot, key), weight)

        if not touched:
            return Status.skip()
        state.write(_PRE_SCORE_KEY, _PreScoreState(scores))
        return None

    def score(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, indices: np.ndarray
    ) -> np.ndarray:
        s: _PreScoreState | None = state.get(_PRE_SCORE_KEY)
        if s is None:
            raise PluginError(f"reading {_PRE_SCORE_KEY!r} from cycleState: not found")
        total = np.zeros(indices.size, dtype=np.int64)
        for key, sums in s.topology_score.items():
            total += _gather(sums, snapshot.topology_domains(key)[0][indices])
        return total

    def normalize_score(self, state: CycleState, pod: Pod, scores: np.ndarray) -> np.ndarray:
        s: _PreScoreState | None = state.get(_PRE_SCORE_KEY)
        if s is None or not s.topology_score or scores.size == 0:
            return scores
        low = int(scores.min())
        spread = int(scores.max()) - low
        if spread <= 0:
            return np.zeros(scores.size, dtype=np.int64)
        # float64 math and truncation exactly as kube's NormalizeScore.
        return (float(MAX_NODE_SCORE) * ((scores - low) / float(spread))).astype(np.int64)


def _gather(counts: np.ndarray, domains: np.ndarray) -> np.ndarray:
    """counts[domain] per node; nodes without the label (-1) read the sentinel 0."""
    return counts[domains]


def _report(
    result: FilterResult, reason: str, failed: np.ndarray, decided: np.ndarray | None
) -> np.ndarray:
    """Add the failures not already reported by an earlier check (kube returns the first
    failing check's status); returns the updated set of decided nodes."""
    if decided is not None:
        failed &= ~decided
    result.add(reason, failed)
    return failed if decided is None else decided | failed


def new(args: dict[str, Any], handle: Handle) -> InterPodAffinity:
    unknown = set(args) - {"hardPodAffinityWeight", "ignorePreferredTermsOfExistingPods"}
    if unknown:
        raise PluginArgsError(sorted(unknown)[0], "unknown field")
    weight = args.get("hardPodAffinityWeight", DEFAULT_HARD_POD_AFFINITY_WEIGHT)
    if not isinstance(weight, int) or isinstance(weight, bool) or not 0 <= weight <= 100:
        raise PluginArgsError("hardPodAffinityWeight", "must be an integer in [0, 100]")
    ignore = args.get("ignorePreferredTermsOfExistingPods", False)
    if not isinstance(ignore, bool):
        raise PluginArgsError("ignorePreferredTermsOfExistingPods", "must be a boolean")
    return InterPodAffinity(
        hard_pod_affinity_weight=weight, ignore_preferred_of_existing=ignore, handle=handle
    )


# ---------------------------------------------------------------------- QueueingHint
def _required_terms(pod: Pod, anti: bool) -> tuple[AffinityTerm, ...]:
    affinity = pod.spec.affinity
    group = None
    if affinity is not None:
        group = affinity.pod_anti_affinity if anti else affinity.pod_affinity
    if group is None or not group.required:
        return ()
    try:
        return compile_terms(group.required, pod.metadata.namespace)
    except InvalidSelector:
        return ()


def _after_node_change(pod: Pod, old: Node | None, new: Node) -> bool:
    """kube's isSchedulableAfterNodeChange: Queue when a node gains (or, added, has) an
    affinity term's topology key or changes its value, or loses an anti-affinity term's
    key or changes its value (an added node: a new domain). A pod with no terms of its
    own was kept out by existing pods' anti-affinity: any added node may help."""
    affinity = _required_terms(pod, anti=False)
    anti = _required_terms(pod, anti=True)
    if old is None:
        if not affinity and not anti:
            return True
        return bool(anti) or any(t.topology_key in new.metadata.labels for t in affinity)
    before, after = old.metadata.labels, new.metadata.labels
    for term in affinity:
        key = term.topology_key
        if key in after and (key not in before or before[key] != after[key]):
            return True
    for term in anti:
        key = term.topology_key
        if key in before and (key not in after or before[key] != after[key]):
            return True
    return False


def queueing_hint(event: ClusterEvent, pod: Pod, old: Any, new: Any, handle: Handle) -> bool | None:
    """kube's isSchedulableAfterPodChange for assigned-pod events (node events: see
    :func:`_after_node_change`).

    Added: Queue when the pod matches one of the pending pod's required affinity terms.
    Updated: Queue when it starts matching an affinity term or stops matching an
    anti-affinity term. Deleted: Queue when it matched an anti-affinity term of the
    pending pod, or had required anti-affinity of its own (which may have kept the
    pending pod out)."""
    if event.resource == EventResource.NODE and isinstance(new, Node):
        return _after_node_change(pod, old if isinstance(old, Node) else None, new)
    if event.resource != EventResource.ASSIGNED_POD:
        return None
    affinity = _required_terms(pod, anti=False)
    anti = _required_terms(pod, anti=True)

    namespace_labels = handle.listers.namespaces.of

    def matches(other: Pod, terms: tuple[AffinityTerm, ...]) -> bool:
        meta = other.metadata
        return any(t.matches(meta.namespace, meta.labels, namespace_labels) for t in terms)

    if isinstance(new, Pod) and isinstance(old, Pod):
        return (not matches(old, affinity) and matches(new, affinity)) or (
            matches(old, anti) and not matches(new, anti)
        )
    if isinstance(new, Pod):
        return matches(new, affinity)
    if isinstance(old, Pod):
        return matches(old, anti) or bool(_required_terms(old, anti=True))
    return None
