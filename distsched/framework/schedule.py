"""The scheduling algorithm on a snapshot: kube's schedulePod / findNodesThatFitPod /
prioritizeNodes / selectHost, pure over one framework and one snapshot (no Redis).
``schedule_batch_on_snapshot`` runs it for several pods in turn; the worker's cycle
around it (pop, reserve, bind) is ``workers/schedule_one.py``.

Filter runs over windows of candidates taken in rotation order from the framework's
``next_start_node_index``: each window is evaluated with numpy masks by every filter
plugin, and the pass stops as soon as ``num_feasible_nodes_to_find`` feasible nodes
are known. Nodes after the last feasible node kept in the final window count as not
evaluated, exactly like kube's parallel search that cancels once enough are found.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from distsched.framework.cycle_state import CycleState
from distsched.framework.diagnosis import (
    Diagnosis,
    FitError,
    NoNodesAvailableError,
    ReasonEntry,
    ScheduleResult,
    SchedulingError,
)
from distsched.framework.podinfo import POD_INFO_STATE_KEY, cycle_pod_info
from distsched.framework.runtime import FilterOutcome, go_list
from distsched.framework.snapshot import preferred_slots
from distsched.framework.status import Status
from distsched.framework.what_if import run_filter_plugins_with_nominated_pods
from distsched.model.objects import Pod

if TYPE_CHECKING:
    from distsched.framework.runtime import Framework
    from distsched.framework.snapshot import Snapshot

_NO_NODES = np.zeros(0, dtype=np.int64)


def schedule_pod(fw: Framework, state: CycleState, pod: Pod, snapshot: Snapshot) -> ScheduleResult:
    if snapshot.num_nodes == 0:
        raise NoNodesAvailableError()
    diagnosis = Diagnosis()
    feasible = find_nodes_that_fit_pod(fw, state, pod, snapshot, diagnosis)
    if feasible.size == 0:
        raise FitError(pod, snapshot.num_nodes, diagnosis)
    evaluated = feasible.size + len(diagnosis.node_to_status)
    if feasible.size == 1:
        index = int(feasible[0])
        return ScheduleResult(snapshot.node_name(index), index, evaluated, 1)
    scores = prioritize_nodes(fw, state, pod, snapshot, feasible)
    index = int(
        feasible[select_position(feasible, scores, fw.rng.randrange, snapshot.tie_preference)]
    )
    return ScheduleResult(snapshot.node_name(index), index, evaluated, int(feasible.size))


@dataclass(slots=True)
class BatchOutcome:
    """One pod of ``schedule_batch_on_snapshot``: its cycle state and either a result or
    the error."""

    pod: Pod
    state: CycleState
    result: ScheduleResult | None = None
    error: SchedulingError | None = None


def schedule_batch_on_snapshot(
    fw: Framework, pods: Iterable[Pod], snapshot: Snapshot, *, assume: bool = True
) -> list[BatchOutcome]:
    """Schedule ``pods`` one after another on one snapshot. With ``assume`` each placed pod
    is added to the snapshot on its node, so the next pods see it (the worker later
    reserves them in the ledger and removes any that lose the race)."""
    outcomes: list[BatchOutcome] = []
    for pod in pods:
        outcome = BatchOutcome(pod, CycleState())
        try:
            outcome.result = schedule_pod(fw, outcome.state, pod, snapshot)
        except SchedulingError as exc:
            outcome.error = exc
        else:
            if assume:
                info = outcome.state.get(POD_INFO_STATE_KEY)
                snapshot.add_pod(pod, outcome.result.suggested_host, info=info)
        outcomes.append(outcome)
    return outcomes


def find_nodes_that_fit_pod(
    fw: Framework, state: CycleState, pod: Pod, snapshot: Snapshot, diagnosis: Diagnosis
) -> np.ndarray:
    """Feasible node slots (in evaluation order); failures go into ``diagnosis``."""
    all_nodes = snapshot.node_indices()
    pre_result, status, narrowing = fw.run_pre_filter_plugins(state, pod, snapshot)
    diagnosis.unschedulable_plugins = set(narrowing)
    if not status.is_success():
        if not status.is_rejected():
            raise SchedulingError(status.message())
        diagnosis.node_to_status.absent_status = status
        diagnosis.pre_filter_msg = status.message()
        diagnosis.add_plugin_status(status)
        return _NO_NODES

    # A node nominated by an earlier preemption is likely the only one that fits: try it first.
    nominated = pod.status.nominated_node_name
    if nominated:
        index = snapshot.get_index(nominated)
        if index is not None:
            candidate = np.array([index], dtype=np.int64)
            if _run_filters(fw, state, pod, snapshot, candidate).passed.size:
                return candidate

    nodes = all_nodes
    if pre_result is not None and pre_result.node_names is not None:
        nodes = snapshot.indices_of(pre_result.node_names)
        diagnosis.node_to_status.absent_status = Status.unresolvable(
            f"node(s) didn't satisfy plugin(s) {go_list(sorted(narrowing))}"
        )
    feasible = find_nodes_that_pass_filters(fw, state, pod, snapshot, diagnosis, nodes)
    processed = feasible.size + len(diagnosis.node_to_status)
    fw.next_start_node_index = (fw.next_start_node_index + processed) % all_nodes.size
    return feasible


def find_nodes_that_pass_filters(
    fw: Framework,
    state: CycleState,
    pod: Pod,
    snapshot: Snapshot,
    diagnosis: Diagnosis,
    nodes: np.ndarray,
) -> np.ndarray:
    n = int(nodes.size)
    if n == 0:
        return _NO_NODES
    want = fw.num_feasible_nodes_to_find(n)
    if not fw.has_score_plugins:
        want = 1  # without scoring any feasible node is as good as another
    start = fw.next_start_node_index % n
    if not fw.filter_plugins:
        return _rotated(nodes, start, want)

    found: list[np.ndarray] = []
    found_count = 0
    done = 0
    # A little more than needed: a few infeasible nodes then rarely force a second pass.
    window = want + want // 4
    while done < n and found_count < want:
        size = min(window, n - done)
        candidates = _rotated(nodes, (start + done) % n, size)
        outcome = _run_filters(fw, state, pod, snapshot, candidates)
        passed = outcome.passed
        need = want - found_count
        cutoff = size
        if passed.size >= need:
            passed = passed[:need]
            cutoff = int(passed[-1]) + 1
        _record(diagnosis, outcome, candidates, cutoff, size)
        found.append(candidates[passed])
        found_count += int(passed.size)
        done += cutoff
        window *= 2
    if len(found) == 1:
        return found[0]
    return np.concatenate(found)


def _run_filters(
    fw: Framework, state: CycleState, pod: Pod, snapshot: Snapshot, candidates: np.ndarray
) -> FilterOutcome:
    """kube's RunFilterPluginsWithNominatedPods: where pods nominated by preemption
    (the worker's PodNominator, in the Handle's listers) wait with at least this pod's
    priority, the node must also fit the pod with them added."""
    nominator = fw.handle.listers.nominator
    if not nominator:
        return fw.run_filter_plugins(state, pod, snapshot, candidates)
    priority = cycle_pod_info(state, pod).priority
    return run_filter_plugins_with_nominated_pods(
        fw, state, pod, snapshot, candidates, nominator, priority
    )


def _rotated(nodes: np.ndarray, start: int, size: int) -> np.ndarray:
    """``size`` entries of ``nodes`` from ``start``, wrapping around (a view when possible)."""
    end = start + size
    if end <= nodes.size:
        return nodes[start:end]
    return np.concatenate((nodes[start:], nodes[: end - nodes.size]))


def _record(
    diagnosis: Diagnosis, outcome: FilterOutcome, candidates: np.ndarray, cutoff: int, size: int
) -> None:
    statuses = diagnosis.node_to_status
    for verdict in outcome.verdicts:
        failed = verdict.failed
        reasons = verdict.reasons
        if cutoff < size:
            failed = failed[failed < cutoff]
            reasons = [(r, u, pos[pos < cutoff]) for r, u, pos in reasons]
        if not failed.size:
            continue
        entries = [
            ReasonEntry(reason, verdict.plugin, unresolvable, candidates[pos])
            for reason, unresolvable, pos in reasons
            if pos.size
        ]
        statuses.record(verdict.plugin, candidates[failed], entries)
        diagnosis.unschedulable_plugins.add(verdict.plugin)


def prioritize_nodes(
    fw: Framework, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: np.ndarray
) -> np.ndarray:
    """Total weighted score per feasible node (all 1 when the profile has no scoring)."""
    if not fw.has_score_plugins:
        return np.ones(feasible.size, dtype=np.int64)
    status = fw.run_pre_score_plugins(state, pod, snapshot, feasible)
    if not status.is_success():
        raise SchedulingError(status.message())
    return fw.run_score_plugins(state, pod, snapshot, feasible)


def select_position(  # type: ignore[no-untyped-def]
    feasible: np.ndarray,
    scores: np.ndarray,
    randrange,
    prefer: np.ndarray | None = None,
    slack: int = 0,
) -> int:
    """kube's selectHost: the position in ``feasible`` of a node with the highest score,
    uniformly at random among ties (kube's reservoir). ``prefer`` (a bool per snapshot
    slot, or None) narrows the choice to the preferred nodes when any of them scores
    within ``slack`` of the best (the best preferred ones then, at random among their
    ties): several workers, each preferring its own share of
    the nodes, then rarely pick the same one of equally good nodes, nor leave their own
    share for a node that only looks better because their view lags the others'
    reservations (``slack``: what one more such pod costs a node's score)."""
    top = np.maximum.reduce(scores)
    if prefer is None:
        best = (scores == top).nonzero()[0]
        return int(best[0]) if best.size == 1 and not slack else int(best[randrange(best.size)])
    # Whether each sample node is preferred: a view of the mask when the sample is one
    # run of slots inside it (the usual case), else gathered.
    first, size = int(feasible[0]), int(feasible.size)
    if int(feasible[-1]) - first == size - 1 and first + size <= prefer.size:
        mine = prefer[first : first + size]
    else:
        mine = preferred_slots(prefer, feasible)
    if not slack:
        ties = scores == top
        best = ties.nonzero()[0]
        if best.size > 1:
            narrowed = (ties & mine).nonzero()[0]
            if narrowed.size:
                best = narrowed
            return int(best[randrange(best.size)])
        return int(best[0])
    # The best of the preferred nodes, when it is within the slack of the best, narrows
    # the choice to its ties.
    at = mine.nonzero()[0]
    if at.size:
        theirs = scores[at]
        best_mine = np.maximum.reduce(theirs)
        if best_mine >= top - slack:
            best = at[theirs == best_mine]
            return int(best[randrange(best.size)])
    best = (scores == top).nonzero()[0]
    return int(best[randrange(best.size)])
