"""NodeAffinity: nodeSelector AND required node affinity (PreFilter, Filter); preferred
node affinity weights (PreScore, Score). Args: ``addedAffinity`` applied to every pod."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from distsched.framework.cycle_state import CycleState
from distsched.framework.events import NODE_ADD_OR_SCHEDULING_CHANGE, ClusterEvent, EventResource
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
from distsched.framework.plugins.helpers.node_selector import (
    parse_preferred_terms,
    parse_term,
    preferred_weights,
    required_affinity_mask,
    terms_mask,
)
from distsched.framework.plugins.helpers.normalize import default_normalize_score
from distsched.framework.podinfo import PodInfo
from distsched.framework.snapshot import Snapshot
from distsched.framework.status import PluginError, Status
from distsched.model.decode_common import NODE_NAME_FIELD
from distsched.model.nodeaffinity import InvalidRequirement, pod_matches_node_selector_and_affinity
from distsched.model.objects import Node, NodeSelectorTerm, Pod, PreferredSchedulingTerm

NAME = "NodeAffinity"
EVENTS: tuple[ClusterEvent, ...] = (
    ClusterEvent(EventResource.NODE, NODE_ADD_OR_SCHEDULING_CHANGE),
)
ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
ERR_REASON_CONFLICT = "pod affinity terms conflict"


class NodeAffinity(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, SignPlugin):
    name = NAME
    reads_only_its_node = True
    reads_only_its_node_usage = True
    scores_in_range = True

    def __init__(
        self,
        added_required: tuple[NodeSelectorTerm, ...] | None,
        added_preferred: tuple[PreferredSchedulingTerm, ...],
    ) -> None:
        self.added_required = added_required
        self.added_preferred = added_preferred

    def sign_pod(self, pod: Pod, info: PodInfo, snapshot: Snapshot) -> Hashable | None:
        affinity = pod.spec.affinity
        node_affinity = affinity.node_affinity if affinity else None
        return tuple(pod.spec.node_selector.items()), node_affinity

    # -------------------------------------------------------------- filtering
    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status | None]:
        affinity = pod.spec.affinity
        node_affinity = affinity.node_affinity if affinity else None
        required = node_affinity.required if node_affinity else None
        if required is None and self.added_required is None and not pod.spec.node_selector:
            return None, Status.skip()
        if not required:
            return None, None
        # Terms pinning metadata.name narrow the candidate set (terms are ORed).
        names: set[str] = set()
        for term in required:
            term_names: set[str] | None = None
            for req in term.match_fields:
                if req.key == NODE_NAME_FIELD and req.operator == "In":
                    values = set(req.values)
                    term_names = values if term_names is None else term_names & values
            if term_names is None:
                return None, None
            names |= term_names
        if not names:
            return None, Status.unresolvable(ERR_REASON_CONFLICT)
        return PreFilterResult(frozenset(names)), None

    def filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, indices: np.ndarray
    ) -> FilterResult:
        result = FilterResult()
        enforced_fail = None
        if self.added_required is not None:
            enforced_fail = ~terms_mask(snapshot, self.added_required)[indices]
            result.add(ERR_REASON_ENFORCED, enforced_fail, unresolvable=True)
        pod_mask = required_affinity_mask(snapshot, pod)
        if pod_mask is not None:
            pod_fail = ~pod_mask[indices]
            if enforced_fail is not None:
                pod_fail &= ~enforced_fail
            result.add(ERR_REASON_POD, pod_fail, unresolvable=True)
        return result

    # -------------------------------------------------------------- scoring
    def pre_score(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, indices: np.ndarray
    ) -> Status | None:
        if not _pod_preferred(pod) and not self.added_preferred:
            return Status.skip()
        return None

    def score(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, indices: np.ndarray
    ) -> np.ndarray:
        counts = np.zeros(indices.size, dtype=np.int64)
        try:
            if self.added_preferred:
                counts += preferred_weights(snapshot, self.added_preferred)[indices]
            preferred = _pod_preferred(pod)
            if preferred:
                counts += preferred_weights(snapshot, preferred)[indices]
        except InvalidRequirement as exc:
            raise PluginError(f"parsing preferred node affinity: {exc}") from exc
        return counts

    def normalize_score(self, state: CycleState, pod: Pod, scores: np.ndarray) -> np.ndarray:
        return default_normalize_score(scores, reverse=False)


def _pod_preferred(pod: Pod) -> tuple[PreferredSchedulingTerm, ...]:
    affinity = pod.spec.affinity
    if affinity is None or affinity.node_affinity is None:
        return ()
    return affinity.node_affinity.preferred


def new(args: dict[str, Any], handle: Handle) -> NodeAffinity:
    unknown = set(args) - {"addedAffinity"}
    if unknown:
        raise PluginArgsError(sorted(unknown)[0], "unknown field")
    added = args.get("addedAffinity")
    if added is None:
        return NodeAffinity(None, ())
    if not isinstance(added, dict):
        raise PluginArgsError("addedAffinity", "must be a mapping")
    required = None
    req = added.get("requiredDuringSchedulingIgnoredDuringExecution")
    if req is not None:
        field = "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        if not isinstance(req, dict) or not isinstance(req.get("nodeSelectorTerms"), list):
            raise PluginArgsError(field, "must hold a nodeSelectorTerms list")
        terms = req["nodeSelectorTerms"]
        if not terms:
            raise PluginArgsError(f"{field}.nodeSelectorTerms", "must have at least one term")
        required = tuple(
            parse_term(t, f"{field}.nodeSelectorTerms[{i}]") for i, t in enumerate(terms)
        )
    preferred = parse_preferred_terms(
        added.get("preferredDuringSchedulingIgnoredDuringExecution", []),
        "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution",
    )
    return NodeAffinity(required, preferred)


# ---------------------------------------------------------------------- QueueingHint
def queueing_hint(event: ClusterEvent, pod: Pod, old: Any, new: Any, handle: Handle) -> bool | None:
    """kube's isSchedulableAfterNodeChange: Queue when the node now matches the pod's
    nodeSelector and required node affinity and did not before (an added node: matches)."""
    if event.resource != EventResource.NODE or not isinstance(new, Node):
        return None
    if not pod_matches_node_selector_and_affinity(pod, new):
        return False
    return not isinstance(old, Node) or not pod_matches_node_selector_and_affinity(pod, old)
