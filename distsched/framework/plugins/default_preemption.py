"""DefaultPreemption (PostFilter): when no node fits, find the node where evicting the
fewest / least important lower-priority pods lets the pod fit (kube's preemption
Evaluator with the DefaultPreemption strategy).

This plugin decides only. On success it returns a ``PreemptionResult``: the nominated
node, the victims to delete, and the lower-priority pods nominated to that node whose
nomination should be cleared. The scheduling worker deletes the victims through the
store, sets the pod's status.nominatedNodeName and clears those nominations.

Dry runs change the worker's snapshot and restore it (framework/what_if.py), so the
plugin needs its framework to run the filters: the framework hands itself over through
``attach_framework`` when it builds its plugins. Nominated pods and budgets come from
the Handle's listers (framework/listers.py), which the worker's informer feeds.

PodDisruptionBudgets count as kube counts them: on each node the potential victims that
would take a budget below zero (``status.disruptionsAllowed``, spent pod by pod, see
model/pdbs.py) are reprieved first, and candidates with fewer PDB violations win before
every other criterion. A budget is best effort, as in kube: when every candidate
violates one, the fewest violations win. When a budget decided something (a pod spared
on the chosen node, or a node passed over for its violations) the plugin says so in the
diagnosis' PostFilter message, which ends the pod's "0/N nodes are available" line that
``distsched explain`` shows.

kube's eligibility check holds: a pod nominated to a node where a lower-priority pod is
still being preempted (it carries DisruptionTarget, reason PreemptionByScheduler) does
not preempt again but waits for that deletion. kube also asks for the victim's
deletionTimestamp (graceful termination); a deleted pod leaves the store at once here,
so a condition older than :data:`PREEMPTION_GRACE_S` counts as a preemption that did not
happen (its deletion failed) instead. Standalone, victims are deleted as they are
preempted; through an API server their deletions queue behind its writes, and a
preemptor tried again meanwhile preempted on another node. A deleted victim leaves the
workers' pod lists at once but keeps its room in the shared ledger until the handlers
release it: a pod nominated to a node whose ledger still counts a pod the store has
deleted waits too (kube's victim holds its resources in the cache until it is gone).

Not modelled: extenders.

Args (kube's DefaultPreemptionArgs): ``minCandidateNodesPercentage`` (0..100, default
10) and ``minCandidateNodesAbsolute`` (>= 0, default 100), not both 0.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import random
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from distsched.framework.cycle_state import CycleState
from distsched.framework.diagnosis import Diagnosis, FitError, ReasonEntry, SchedulingError
from distsched.framework.events import ClusterEvent
from distsched.framework.interface import (
    Handle,
    PluginArgsError,
    PostFilterPlugin,
    PostFilterResult,
)
from distsched.framework.nominated_rows import NominatedRows
from distsched.framework.nominator import PodNominator, nominated_to_add
from distsched.framework.podinfo import PodInfo, cycle_pod_info
from distsched.framework.snapshot import Snapshot, preferred_slots
from distsched.framework.status import Code, Status
from distsched.framework.what_if import (
    NodeEdit,
    fits_on_node,
    fits_together,
    node_edit,
    nodes_are_independent,
    one_node_statuses,
    overridden_free,
    rejected_positions,
    unplaced_rows,
    usage_decides,
)
from distsched.model.objects import Pod
from distsched.model.pdbs import Budget

if TYPE_CHECKING:
    from distsched.framework.runtime import FilterOutcome, Framework

NAME = "DefaultPreemption"
EVENTS: tuple[ClusterEvent, ...] = ()
NEVER = "Never"
NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
NOT_ELIGIBLE_TERMINATING = "not eligible due to a terminating pod on the nominated node."
PREEMPTION_GRACE_S = 30.0
"""How long a victim's DisruptionTarget counts as a deletion under way (kube's default
termination grace period)."""
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE = 10
DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE = 100
_PRIORITY_OFFSET = 2**31  # kube adds MaxInt32+1 so that every summed priority is >= 0


@dataclass(frozen=True, slots=True)
class PreemptionResult(PostFilterResult):
    """The nominated node plus what the worker must do for it."""

    victims: tuple[Pod, ...] = ()
    # Lower-priority pods nominated to the same node: their nomination is to be cleared.
    clear_nominations: tuple[Pod, ...] = ()


def victims_for(result: PostFilterResult | None) -> tuple[Pod, ...]:
    """The pods to delete for ``result`` (none for other PostFilter results)."""
    return result.victims if isinstance(result, PreemptionResult) else ()


@dataclass(slots=True)
class Candidate:
    node_index: int
    node_name: str
    victims: list[PodInfo]  # most important first
    num_pdb_violations: int = 0
    # (pod key, budget key) of each pod a budget protected: evicted anyway (a violation)
    # or spared on this node.
    violations: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    spared: list[tuple[str, str]] = dataclasses.field(default_factory=list)


def filter_pods_with_pdb_violation(
    infos: list[PodInfo], budgets: list[Budget]
) -> tuple[list[PodInfo], list[PodInfo], dict[str, str]]:
    """kube's filterPodsWithPDBViolation: (violating, non-violating, pod key -> the budget
    it violates), order kept. Each matching pod spends one of its budgets' disruptions."""
    allowed = [b.disruptions_allowed for b in budgets]
    violating: list[PodInfo] = []
    fine: list[PodInfo] = []
    which: dict[str, str] = {}
    for info in infos:
        violated = ""
        if info.labels:
            for i, budget in enumerate(budgets):
                if not budget.selects(info.namespace, info.labels):
                    continue
                allowed[i] -= 1
                if allowed[i] < 0 and not violated:
                    violated = budget.key
        if violated:
            violating.append(info)
            which[info.key] = violated
        else:
            fine.append(info)
    return violating, fine, which


def start_time(info: PodInfo) -> float:
    """When the pod started, for ordering: its creationTimestamp (distsched keeps no
    status.startTime); unknown counts as now, i.e. later than any known time."""
    return _timestamp(info.pod.metadata.creation_timestamp)


@functools.lru_cache(maxsize=65536)
def _timestamp(text: str) -> float:
    """Seconds of an RFC 3339 time (a dry run sorts the same pods again and again)."""
    if not text:
        return math.inf
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return math.inf


def importance(info: PodInfo) -> tuple[int, float]:
    """Sort key putting kube's MoreImportantPod first: higher priority, then earlier start."""
    return (-info.priority, start_time(info))


# Nodes dry-run together at the least (more than enough candidates costs a few spare nodes).
_MIN_CHUNK = 16


@dataclass(slots=True)
class _DryRun:
    """One node's dry run: its potential victims (most important first), the reprieve
    order (PDB-violating first, with that flag), the budgets they hit, the nominated pods
    its checks add (kube's addGENominatedPods), and the candidate it builds."""

    potential: list[PodInfo]
    order: list[tuple[PodInfo, bool]]
    which: dict[str, str]
    nominated: list[PodInfo]
    candidate: Candidate

    @classmethod
    def plan(
        cls,
        snapshot: Snapshot,
        node_index: int,
        priority: int,
        budgets: list[Budget],
        nominator: PodNominator | None,
        pod: Pod,
        nominated: list[PodInfo] | None = None,
    ) -> _DryRun | None:
        """The dry run of ``node_index`` for a pod of ``priority`` (None: no pod there has
        a lower priority, nothing to evict); ``nominated``: the node's nominated pods to
        add, when the caller has them already."""
        potential = [i for i in snapshot.pods_on(node_index).values() if i.priority < priority]
        if not potential:
            return None
        potential.sort(key=importance)
        violating, fine, which = filter_pods_with_pdb_violation(potential, budgets)
        order = [(info, True) for info in violating] + [(info, False) for info in fine]
        name = snapshot.node_name(node_index)
        if nominated is None:
            nominated = nominated_to_add(nominator, pod, priority, name)
        return cls(potential, order, which, nominated, Candidate(node_index, name, []))

    def settle(self, info: PodInfo, counts: bool, fits: bool) -> None:
        """Book the reprieve of ``info``: spared when the pod still fits with it back, else
        a victim (``counts``: its eviction violates a budget)."""
        candidate = self.candidate
        if fits:
            if counts:
                candidate.spared.append((info.key, self.which[info.key]))
            return
        candidate.victims.append(info)
        if counts:
            candidate.num_pdb_violations += 1
            candidate.violations.append((info.key, self.which[info.key]))

    def result(self) -> Candidate:
        self.candidate.victims.sort(key=importance)
        return self.candidate


# Dry-run outcomes kept per node (see DefaultPreemption._remember).
_DRY_RUN_CACHE = 16384


@dataclass(frozen=True, slots=True)
class _Outcome:
    """A node's dry-run outcome for one kind of preemptor, with what it was computed
    from that a key cannot hold by value (kept alive so that their ids stay theirs)."""

    candidate: Candidate | None
    status: Status | None
    inputs: tuple[Any, ...]

    def copy(self) -> tuple[Candidate | None, Status | None]:
        c = self.candidate
        return (None if c is None else _copy_candidate(c)), self.status


def _copy_candidate(c: Candidate) -> Candidate:
    """A candidate whose lists are its own (the one kept is never handed out)."""
    return Candidate(
        c.node_index, c.node_name, list(c.victims), c.num_pdb_violations,
        list(c.violations), list(c.spared),
    )  # fmt: skip


class DefaultPreemption(PostFilterPlugin):
    name = NAME
    # False: dry-run one node at a time even when nodes are independent (the reference
    # the lockstep dry run is tested against).
    lockstep = True
    # False: move pods in lockstep dry runs even when only the nodes' free resources
    # matter to the filters (the reference the usage-only dry run is tested against).
    by_usage = True
    # False: dry-run every node for every preemptor (the reference the remembered
    # outcomes are tested against).
    remember = True

    def __init__(
        self, *, min_percentage: int, min_absolute: int, handle: Handle, rng: random.Random
    ) -> None:
        self.min_percentage = min_percentage
        self.min_absolute = min_absolute
        self.handle = handle
        self.rng = rng
        self.framework: Framework | None = None
        self._outcomes: dict[tuple[Any, ...], _Outcome] = {}
        self._outcomes_of: Snapshot | None = None
        self._kind_ids: dict[tuple[Any, ...], int] = {}  # the kinds of _outcomes' keys

    def attach_framework(self, framework: Framework) -> None:
        self.framework = framework

    @property
    def nominator(self) -> PodNominator:
        return self.handle.listers.nominator

    # -------------------------------------------------------------- PostFilter
    def post_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status | None]:
        if self.framework is None:
            return None, Status(Code.ERROR, "DefaultPreemption is not attached to a framework")
        if pod.spec.preemption_policy == NEVER:
            return None, Status.unschedulable("preemption: " + NOT_ELIGIBLE_NEVER)
        if not self._eligible(state, pod, snapshot, diagnosis):
            return None, Status.unschedulable("preemption: " + NOT_ELIGIBLE_TERMINATING)
        try:
            candidates, statuses, errors = self.find_candidates(state, pod, snapshot, diagnosis)
        except SchedulingError as exc:
            return None, Status(Code.ERROR, f"preemption: {exc}")
        if not candidates:
            if errors:
                return None, Status(Code.ERROR, "preemption: " + "; ".join(errors))
            statuses.node_to_status.absent_status = Status.unresolvable(NOT_HELPFUL)
            message = str(FitError(pod, snapshot.num_nodes, statuses))
            return PreemptionResult(""), Status.unschedulable("preemption: " + message)
        best = select_candidate(candidates)
        note = pdb_note(best, candidates)
        if note:
            diagnosis.post_filter_msg = note
        return PreemptionResult(
            best.node_name,
            tuple(v.pod for v in best.victims),
            self._lower_priority_nominated(
                pod, cycle_pod_info(state, pod).priority, best.node_name
            ),
        ), Status.success()

    def _eligible(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, diagnosis: Diagnosis
    ) -> bool:
        """kube's PodEligibleToPreemptOthers past preemptionPolicy: not while a
        lower-priority pod on the pod's nominated node is being preempted (it carries the
        preemption's condition, or this worker's writer has its deletion in flight),
        unless the filters found that node hopeless for it."""
        node = pod.status.nominated_node_name
        index = snapshot.get_index(node) if node else None
        if index is None:
            return True
        status = diagnosis.node_to_status.status_of(index)
        if status is not None and status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
            return True
        priority = cycle_pod_info(state, pod).priority
        now = self.handle.listers.clock.now_ms() / 1000
        lower = [info for info in snapshot.pods_on(index).values() if info.priority < priority]
        if any(terminating_by_preemption(info.pod, now) for info in lower):
            return False
        if lower and self.handle.listers.deleting([info.key for info in lower]):
            return False
        # A victim deleted from the store has left the snapshot's pod list at once, but
        # its room stays taken until the handlers release it in the ledger: kube's
        # terminating victim, still in its cache with its resources.
        return not self.handle.listers.releasing(node)

    def calculate_num_candidates(self, num_nodes: int) -> int:
        n = num_nodes * self.min_percentage // 100
        return min(max(n, self.min_absolute), num_nodes)

    def find_candidates(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, diagnosis: Diagnosis
    ) -> tuple[list[Candidate], Diagnosis, list[str]]:
        """(candidates, the dry run's per-node statuses, error messages): kube's
        findCandidates + DryRunPreemption, one node after another from a random offset
        until enough candidates are found.

        When every filter in play judges a node by that node alone (see
        :meth:`nodes_are_independent`), the nodes are dry-run together, a chunk at a
        time (:meth:`select_victims_on_nodes`): the same answers, one vectorized filter
        run per reprieve step instead of one per node and step. Nodes past the point
        where enough candidates were found are dropped unread, as if never tried."""
        statuses = Diagnosis()
        potential = diagnosis.node_to_status.nodes_that_might_help(snapshot.node_indices())
        if potential.size == 0:
            return [], statuses, []
        n = int(potential.size)
        offset = self.rng.randrange(n)
        wanted = self.calculate_num_candidates(n)
        rolled = np.roll(potential, -offset)  # kube's potential[(offset + i) % n]
        prefer = snapshot.tie_preference
        if prefer is not None:
            # Several workers: each samples its own share of the nodes first (kube's
            # sample is any window from a random node), so that two preempting at once
            # do not pick one node, which kube's criteria (the victims' start times
            # among them) would otherwise make them do; and the first of candidates
            # still tied after the criteria is then one of its share.
            mine = preferred_slots(prefer, rolled)
            rolled = np.concatenate((rolled[mine], rolled[~mine]))
        in_order = rolled.tolist()
        together = self.lockstep and self.nodes_are_independent(state)
        candidates: list[Candidate] = []
        errors: list[str] = []
        failed: dict[tuple[str, bool, tuple[str, ...]], list[int]] = {}
        start = 0
        while start < n:
            size = max(wanted - len(candidates), _MIN_CHUNK) if together else 1
            chunk = in_order[start : start + size]
            start += len(chunk)
            if together:
                results = self.select_victims_on_nodes(state, pod, snapshot, chunk)
            else:
                results = [self.select_victims_on_node(state, pod, snapshot, chunk[0])]
            for node_index, (candidate, status) in zip(chunk, results, strict=True):
                victims = candidate.victims if candidate is not None else []
                if status is None and candidate is not None and victims:
                    candidates.append(candidate)
                    if len(candidates) >= wanted:
                        _record(statuses, failed)
                        return candidates, statuses, errors
                    continue
                if status is None:
                    name = snapshot.node_name(node_index)
                    status = Status(
                        Code.ERROR, f"expected at least one victim pod on node {name!r}"
                    )
                if status.code == Code.ERROR:
                    errors.append(status.message())
                unresolvable = status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
                kind = (status.plugin or NAME, unresolvable, tuple(status.reasons))
                failed.setdefault(kind, []).append(node_index)
        _record(statuses, failed)
        return candidates, statuses, errors

    def nodes_are_independent(self, state: CycleState) -> bool:
        """See :func:`distsched.framework.what_if.nodes_are_independent`."""
        assert self.framework is not None
        return nodes_are_independent(self.framework, state)

    def select_victims_on_nodes(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, nodes: list[int]
    ) -> list[tuple[Candidate | None, Status | None]]:
        """:meth:`select_victims_on_node` for each of ``nodes`` (independent ones, see
        :meth:`nodes_are_independent`), in lockstep: every node's potential victims come
        off at once, then reprieve step k puts back each node's k-th pod, and
        :func:`fits_together` judges all those nodes in one or two filter runs."""
        fw = self.framework
        assert fw is not None
        priority = cycle_pod_info(state, pod).priority
        budgets = self.handle.listers.budgets.all()
        results: dict[int, tuple[Candidate | None, Status | None]] = {}
        plans: list[_DryRun] = []
        by_usage = self.by_usage and usage_decides(fw, state)
        kind = self._kind(state, pod, snapshot, priority, budgets) if by_usage else None
        keys: dict[int, tuple[tuple[Any, ...], list[PodInfo]]] = {}
        by_slot = self._nominated_by_slot(snapshot, pod, priority) if kind is not None else {}
        generations = snapshot.generation[nodes].tolist() if kind is not None else []
        kind_id = self._kind_ids.setdefault(kind, len(self._kind_ids)) if kind is not None else 0
        outcomes = self._outcomes
        for at, node_index in enumerate(nodes):
            nominated = None
            if kind is not None:
                # The kind (a long tuple) is hashed once, as kind_id, not per node.
                key: tuple[Any, ...] = (kind_id, node_index, generations[at])
                nominated = by_slot.get(node_index)
                if nominated:
                    key += tuple(map(id, nominated))
                else:
                    nominated = []
                known = outcomes.get(key)
                if known is not None:
                    results[node_index] = known.copy()
                    continue
                keys[node_index] = (key, nominated)
            plan = _DryRun.plan(
                snapshot, node_index, priority, budgets, self.nominator, pod, nominated
            )
            if plan is None:
                results[node_index] = (None, Status.unresolvable(NO_VICTIMS))
            else:
                plans.append(plan)
        if by_usage:
            if plans:
                results.update(self._dry_run_by_usage(state, pod, snapshot, plans))
            if kind is not None:
                self._remember(keys, results, (kind, budgets))
            return [results[n] for n in nodes]
        shared = state.clone()  # told nothing: every extension is skipped
        edits = [NodeEdit(fw, shared, pod, snapshot, p.candidate.node_index) for p in plans]
        try:
            for plan, edit in zip(plans, edits, strict=True):
                for info in plan.potential:
                    edit.remove(info)
            live = list(zip(plans, edits, strict=True))
            verdicts = self._fit(shared, pod, snapshot, live)
            for (plan, _), status in zip(live, verdicts, strict=True):
                if status is not None:
                    results[plan.candidate.node_index] = (None, status)
            live = [pair for pair, status in zip(live, verdicts, strict=True) if status is None]
            step = 0
            while live:
                live = [(p, e) for p, e in live if step < len(p.order)]
                for plan, edit in live:
                    edit.add(plan.order[step][0])
                verdicts = self._fit(shared, pod, snapshot, live)
                for (plan, edit), status in zip(live, verdicts, strict=True):
                    info, counts = plan.order[step]
                    if status is not None:
                        edit.remove(info)
                    plan.settle(info, counts, fits=status is None)
                step += 1
        finally:
            for edit in reversed(edits):
                edit.restore()
        for plan in plans:
            if plan.candidate.node_index not in results:
                results[plan.candidate.node_index] = (plan.result(), None)
        return [results[n] for n in nodes]

    def _nominated_by_slot(
        self, snapshot: Snapshot, pod: Pod, priority: int
    ) -> dict[int, list[PodInfo]]:
        """:func:`nominated_to_add` of every node ``snapshot`` holds at once, keyed by
        slot (nodes with none left out; do not change the answer)."""
        nominator = self.nominator
        if nominator is None or not len(nominator):
            return {}
        return NominatedRows.current(nominator, snapshot).by_slot(pod, priority)

    def _kind(
        self,
        state: CycleState,
        pod: Pod,
        snapshot: Snapshot,
        priority: int,
        budgets: list[Budget],
    ) -> tuple[Any, ...] | None:
        """What, besides a node's own state and its nominated pods, decides the usage-only
        dry run of that node: the pod's signature (its filters' view of it), its
        priority, and the budgets (by identity: a changed budget is a new object). None:
        not remembered (unsigned pod, or remembering off)."""
        if not self.remember:
            return None
        if snapshot is not self._outcomes_of:
            self._forget_outcomes()
            self._outcomes_of = snapshot
        assert self.framework is not None
        signature = self.framework.sign_pod(pod, cycle_pod_info(state, pod), snapshot)
        if signature is None:
            return None
        return (signature, priority, tuple(id(b) for b in budgets))

    def _forget_outcomes(self) -> None:
        self._outcomes.clear()
        self._kind_ids.clear()

    def _remember(
        self,
        keys: dict[int, tuple[tuple[Any, ...], list[PodInfo]]],
        results: dict[int, tuple[Candidate | None, Status | None]],
        inputs: tuple[Any, ...],
    ) -> None:
        """Keep each node's dry-run outcome: another preemptor of the same kind finds it
        again while the node (its generation) and its nominated pods are unchanged, the
        usual case for all but the node the previous preemptor was nominated to."""
        if len(self._outcomes) + len(keys) > _DRY_RUN_CACHE:
            self._forget_outcomes()
            return  # the keys name a kind id just forgotten
        for node_index, (key, nominated) in keys.items():
            candidate, status = results[node_index]
            if candidate is not None:
                candidate = _copy_candidate(candidate)
            # The key holds ids: the nominated pods and budgets stay referenced here so
            # that no other object can take their ids while the outcome is kept.
            self._outcomes[key] = _Outcome(candidate, status, (inputs, nominated))

    def _dry_run_by_usage(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, plans: list[_DryRun]
    ) -> dict[int, tuple[Candidate | None, Status | None]]:
        """The lockstep dry run when only the nodes' free resources matter to the filters
        (:func:`usage_decides`): no pod is moved; each step sets the nodes' ``free`` rows
        to what they would be with the potential victims off, the reprieved ones back and
        the nominated pods on (kube's first pass, the stricter of its two when usage alone
        decides), runs the filters once over them, and the rows are restored after."""
        fw = self.framework
        assert fw is not None
        row = snapshot.usage.requested_row
        for plan in plans:  # rows first: a pod may bring a new resource column
            for info in plan.potential:
                row(info)
        nominated = [unplaced_rows(snapshot, plan.nominated) for plan in plans]
        slots = np.array([plan.candidate.node_index for plan in plans], dtype=np.int64)
        shared = state.clone()
        results: dict[int, tuple[Candidate | None, Status | None]] = {}
        with overridden_free(snapshot, slots) as free:
            base = free[slots]  # a copy: each node's free resources as the dry run stands
            for i, plan in enumerate(plans):
                for info in plan.potential:
                    base[i] += row(info)
                for nominated_row in nominated[i]:
                    base[i] -= nominated_row

            def judge(live: list[int], trial: np.ndarray) -> FilterOutcome:
                at = slots[live]
                free[at] = trial
                return fw.run_filter_plugins(shared, pod, snapshot, at)

            live = list(range(len(plans)))
            statuses = one_node_statuses(judge(live, base), len(live))
            for i, status in zip(live, statuses, strict=True):
                if status is not None:
                    results[plans[i].candidate.node_index] = (None, status)
            live = [i for i in live if plans[i].candidate.node_index not in results]
            step = 0
            while live:
                live = [i for i in live if step < len(plans[i].order)]
                if not live:
                    break
                trial = np.stack([base[i] - row(plans[i].order[step][0]) for i in live])
                rejected = rejected_positions(judge(live, trial))
                for position, (i, back) in enumerate(zip(live, trial, strict=True)):
                    info, counts = plans[i].order[step]
                    fits = position not in rejected
                    if fits:
                        base[i] = back
                    plans[i].settle(info, counts, fits=fits)
                step += 1
        for plan in plans:
            results.setdefault(plan.candidate.node_index, (plan.result(), None))
        return results

    def _fit(
        self,
        state: CycleState,
        pod: Pod,
        snapshot: Snapshot,
        live: list[tuple[_DryRun, NodeEdit]],
    ) -> list[Status | None]:
        """fits_on_node for each node in ``live`` (None: the pod fits there)."""
        if not live:
            return []
        assert self.framework is not None
        edits = [edit for _, edit in live]
        nominated = [plan.nominated for plan, _ in live]
        return fits_together(self.framework, state, pod, snapshot, edits, nominated)

    def select_victims_on_node(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, node_index: int
    ) -> tuple[Candidate | None, Status | None]:
        """kube's SelectVictimsOnNode: remove every lower-priority pod, check the pod fits,
        then put back (reprieve) as many as possible, most important first: the pods
        whose eviction would violate a PodDisruptionBudget before the others."""
        assert self.framework is not None
        priority = cycle_pod_info(state, pod).priority
        # No nominator for the plan: fits_on_node adds the node's nominated pods itself.
        budgets = self.handle.listers.budgets.all()
        plan = _DryRun.plan(snapshot, node_index, priority, budgets, None, pod)
        if plan is None:
            return None, Status.unresolvable(NO_VICTIMS)
        with node_edit(self.framework, state, pod, snapshot, node_index) as edit:
            for info in plan.potential:
                edit.remove(info)
            status = self._fits(edit.state, pod, snapshot, node_index, priority)
            if status is not None:
                return None, status
            for info, counts in plan.order:
                edit.add(info)
                fits = self._fits(edit.state, pod, snapshot, node_index, priority) is None
                if not fits:
                    edit.remove(info)
                plan.settle(info, counts, fits)
            return plan.result(), None

    def _fits(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, node_index: int, priority: int
    ) -> Status | None:
        assert self.framework is not None
        return fits_on_node(
            self.framework, state, pod, snapshot, node_index, self.nominator, priority
        )

    def _lower_priority_nominated(self, pod: Pod, priority: int, node_name: str) -> tuple[Pod, ...]:
        """kube's getLowerPriorityNominatedPods."""
        return tuple(
            info.pod
            for info in self.nominator.pods_for_node(node_name)
            if info.priority < priority and info.key != pod.key
        )


def _record(
    statuses: Diagnosis, failed: dict[tuple[str, bool, tuple[str, ...]], list[int]]
) -> None:
    """The dry run's failed nodes into ``statuses``: one record per (plugin,
    unresolvable, reasons), as the filters record theirs (a node at a time cost more
    than the dry run when hundreds of nodes hold nominated pods)."""
    for (plugin, unresolvable, reasons), slots in failed.items():
        nodes = np.array(slots, dtype=np.int64)
        entries = [ReasonEntry(reason, plugin, unresolvable, nodes) for reason in reasons]
        statuses.node_to_status.record(plugin, nodes, entries)


def select_candidate(candidates: list[Candidate]) -> Candidate:
    """kube's pickOneNodeForPreemption with its default criteria, in order: fewest PDB
    violations, lowest highest-victim priority, smallest sum of victim priorities, fewest
    victims, latest start of the highest-priority victims; then the first candidate (in
    the order they were found: with several workers, one in the worker's share of the
    nodes first, see find_candidates). A candidate without victims wins at once, as in
    kube. The criteria are one key, compared in order, so one pass ranks them all."""
    for candidate in candidates:
        if not candidate.victims:
            return candidate
    return max(candidates, key=_rank)


def _rank(candidate: Candidate) -> tuple[int, int, int, int, float]:
    """select_candidate's criteria as a key (greater is better). Victims are most
    important first, so the first is of the highest priority and, among those, started
    earliest: kube's GetEarliestPodStartTime of the candidate."""
    victims = candidate.victims
    top = victims[0]
    return (
        -candidate.num_pdb_violations,
        -top.priority,
        -sum(v.priority + _PRIORITY_OFFSET for v in victims),
        -len(victims),
        start_time(top),
    )


def terminating_by_preemption(pod: Pod, now_s: float) -> bool:
    """Whether ``pod`` is a victim whose deletion is under way: DisruptionTarget=True,
    reason PreemptionByScheduler, set less than :data:`PREEMPTION_GRACE_S` ago (without
    a time that parses it does not count: nothing could end the wait)."""
    for condition in pod.status.conditions:
        if (
            condition.type == "DisruptionTarget"
            and condition.status == "True"
            and condition.reason == "PreemptionByScheduler"
        ):
            try:
                at = datetime.fromisoformat(condition.last_transition_time).timestamp()
            except ValueError:
                return False
            return now_s - at < PREEMPTION_GRACE_S
    return False


def pdb_note(best: Candidate, candidates: list[Candidate]) -> str:
    """What the PodDisruptionBudgets decided, for the PostFilter message ("" if nothing)."""
    parts = []
    for pod_key, budget in best.spared:
        parts.append(
            f"PodDisruptionBudget {budget} protected pod {pod_key} on node {best.node_name}"
        )
    passed_over = [c for c in candidates if c.num_pdb_violations > best.num_pdb_violations]
    for other in passed_over[:3]:
        pod_key, budget = other.violations[0]
        parts.append(
            f"PodDisruptionBudget {budget} protected pod {pod_key}: node {other.node_name} "
            f"passed over ({other.num_pdb_violations} violation(s))"
        )
    for pod_key, budget in best.violations:
        parts.append(f"evicting pod {pod_key} violates PodDisruptionBudget {budget}")
    if not parts:
        return ""
    return f"preemption: nominated node {best.node_name}; " + "; ".join(parts)


def new(args: dict[str, Any], handle: Handle) -> DefaultPreemption:
    unknown = set(args) - {"minCandidateNodesPercentage", "minCandidateNodesAbsolute"}
    if unknown:
        raise PluginArgsError(sorted(unknown)[0], "unknown field")
    percentage = args.get("minCandidateNodesPercentage", DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE)
    absolute = args.get("minCandidateNodesAbsolute", DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE)
    for field, value in (
        ("minCandidateNodesPercentage", percentage),
        ("minCandidateNodesAbsolute", absolute),
    ):
        if not isinstance(value, int) or isinstance(value, bool):
            raise PluginArgsError(field, "must be an integer")
    if not 0 <= percentage <= 100:
        raise PluginArgsError("minCandidateNodesPercentage", "not in valid range [0, 100]")
    if absolute < 0:
        raise PluginArgsError("minCandidateNodesAbsolute", "not in valid range [0, inf)")
    if percentage == 0 and absolute == 0:
        raise PluginArgsError(
            "", "both minCandidateNodesPercentage and minCandidateNodesAbsolute cannot be zero"
        )
    return DefaultPreemption(
        min_percentage=percentage, min_absolute=absolute, handle=handle, rng=random.Random()
    )
