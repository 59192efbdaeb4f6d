"""Opportunistic batching, exact: equal pods reuse each other's Filter verdicts and raw
Scores, node by node, for as long as the node's state is unchanged.

kube 1.35's OpportunisticBatching reuses the previous pod's sorted node list only when
that pod filled its node (one pod per node). Here the cache is finer: per profile and
per pod *signature* (``Framework.sign_pod``, built from every fact a PreFilter, Filter,
PreScore or Score plugin reads), it keeps for every node slot

- the Filter verdict (passes every filter or not),
- the weighted sum of the raw scores of the plugins whose NormalizeScore is the
  identity, and the raw score of each other plugin,

each valid while the slot's ``Snapshot.generation`` has not moved. A pod with a known
signature then runs exactly ``schedule_pod``'s algorithm on those values: the same
rotating ``next_start_node_index``, the same ``num_feasible_nodes_to_find`` and cutoff,
NormalizeScore over the feasible nodes, the weights, and ``select_position`` with the
framework's rng. Only nodes whose generation moved are filtered and scored again, when
the search reaches one of them, all together in one call per plugin.

PreFilter and PreScore run once per signature: what they wrote to the CycleState, their
Skip sets and the PreFilter node narrowing are replayed for the next pods, so a pod's
CycleState ends up as ``schedule_pod`` would leave it.

Anything else takes ``schedule_pod`` itself: a pod some plugin cannot sign (inter-pod
affinity where pods with affinity exist, topology spread constraints, out-of-tree
plugins without ``sign_pod``), a pod with ``status.nominatedNodeName``, any pod while
the nominator holds nominated pods, a pod that fits no node (so the FitError and its
diagnosis are exactly today's), and a plugin error. The cache is dropped when the
snapshot changes in ways the generations do not cover: another snapshot object, slot
capacity growth, a new resource column, a non-empty nominator.
"""

from __future__ import annotations

import logging
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from distsched.framework.cycle_state import CycleState
from distsched.framework.diagnosis import ScheduleResult
from distsched.framework.interface import MAX_NODE_SCORE, MIN_NODE_SCORE, ScorePlugin
from distsched.framework.podinfo import POD_INFO_STATE_KEY, PodInfo, cycle_pod_info
from distsched.framework.schedule import schedule_pod, select_position
from distsched.framework.status import Status
from distsched.model.objects import Pod

if TYPE_CHECKING:
    from distsched.framework.runtime import Framework
    from distsched.framework.snapshot import Snapshot

log = logging.getLogger(__name__)

# Signatures kept per profile (least recently used dropped first). Each entry holds a few
# arrays over node slots: 17 bytes per slot, plus 8 per plugin with its own NormalizeScore
# (about 200 KB at 8192 slots).
MAX_SIGNATURES = 32

_NO_NODES = np.zeros(0, dtype=np.int64)
_DELETED = object()


_SCHEDULERS: weakref.WeakKeyDictionary[Framework, BatchScheduler] = weakref.WeakKeyDictionary()
"""Each profile's batching scheduler, kept here rather than on the Framework (the runtime
knows nothing of batching), for as long as the framework lives."""


def batch_scheduler(fw: Framework) -> BatchScheduler:
    """The profile's batching scheduler (its cache lives as long as the framework)."""
    scheduler = _SCHEDULERS.get(fw)
    if scheduler is None:
        scheduler = _SCHEDULERS[fw] = BatchScheduler(fw)
    return scheduler


def use_batch_scheduler(fw: Framework, scheduler: BatchScheduler) -> None:
    """Make ``scheduler`` the profile's batching scheduler (tests)."""
    _SCHEDULERS[fw] = scheduler


def schedule_pod_batched(
    fw: Framework, state: CycleState, pod: Pod, snapshot: Snapshot
) -> ScheduleResult:
    """``schedule_pod`` with the profile's signature cache: the same result, the same
    framework state (start index, rng) and CycleState, the same errors."""
    return batch_scheduler(fw).schedule(state, pod, snapshot)


class _Recorder(CycleState):
    """A CycleState that remembers what PreFilter/PreScore plugins wrote or deleted."""

    __slots__ = ("written",)

    def __init__(self, info: PodInfo, base: dict[str, Any]) -> None:
        super().__init__()
        self.written: dict[str, Any] = {}
        CycleState.write(self, POD_INFO_STATE_KEY, info)
        for key, value in base.items():
            if value is not _DELETED:
                CycleState.write(self, key, value)

    def write(self, key: str, value: Any) -> None:
        super().write(key, value)
        self.written[key] = value

    def delete(self, key: str) -> None:
        super().delete(key)
        self.written[key] = _DELETED


@dataclass(slots=True)
class _Replay:
    """One extension point's effect on the CycleState, for every pod of a signature."""

    status: Status
    written: dict[str, Any]
    skip: frozenset[str]

    def apply(self, state: CycleState) -> None:
        for key, value in self.written.items():
            if value is _DELETED:
                state.delete(key)
            else:
                state.write(key, value)

    def undo(self, state: CycleState) -> None:
        for key in self.written:
            state.delete(key)


@dataclass(slots=True)
class _PreFilter(_Replay):
    node_names: frozenset[str] | None  # PreFilterResult's narrowing; None: all nodes


class _Entry:
    """Cached answers for one signature, per node slot.

    Slot i's answers are valid while ``gen[i] == snapshot.generation[i]`` (the slot's
    generation when they were computed; -1: never): the verdict ``passed[i]`` and, when
    it passes and PreScore has run for the signature, its scores in ``summed[i]`` and
    ``raw[name][i]``.
    """

    __slots__ = (
        "drop",
        "gen",
        "nonzero",
        "normalized",
        "passed",
        "picks",
        "pre_filter",
        "pre_score",
        "raw",
        "scanned",
        "summed",
        "summed_plugins",
        "zeros_normalized",
    )

    def __init__(self, snapshot: Snapshot) -> None:
        capacity = snapshot.capacity
        self.gen = np.full(capacity, -1, dtype=np.int64)
        self.scanned = snapshot.version  # with_stale looked at changes up to this version
        self.passed = np.zeros(capacity, dtype=bool)
        self.pre_filter: _PreFilter | None = None
        self.pre_score: _Replay | None = None
        # Set with pre_score: plugins whose NormalizeScore is the identity (their weighted
        # raw scores are summed per node) and the others (raw scores kept per plugin).
        self.summed_plugins: list[tuple[ScorePlugin, int]] = []
        self.normalized: list[tuple[ScorePlugin, int]] = []
        self.summed = np.zeros(0, dtype=np.int64)
        self.raw: dict[str, np.ndarray] = {}
        # Per such plugin: how many slots have a non-zero raw score cached (valid or not);
        # when none has, NormalizeScore sees zeros, and its answer per size is kept here
        # with whether it is the same for every node (then it cannot change the winner).
        self.nonzero: dict[str, int] = {}
        self.zeros_normalized: dict[tuple[str, int], tuple[np.ndarray, bool]] = {}
        # The nodes the last pods of the signature went to (slot -> its score and the
        # snapshot's version then), and what one such pod costs a node's score (0: not
        # seen yet). A pod's sample of nodes rotates, so the node the previous pod went to
        # is seldom in the next one's: a few picks are kept.
        self.picks: dict[int, tuple[int, int]] = {}
        self.drop = 0

    def one_pod_drop(self, snapshot: Snapshot, feasible: np.ndarray, scores: np.ndarray) -> int:
        """What one pod of this signature costs a node's score, as last observed: the
        score of a node a recent pod went to, then and now, when nothing but that pod's
        placement changed the node since (it touches the slot once or twice, right after
        the pick; any later change gives the slot a later generation)."""
        if not self.picks:
            return self.drop
        # A sample of nodes that all passed is usually one run of consecutive slots: a
        # slot's position in it is then arithmetic, not a search. (Feasible slots ascend
        # but for one wrap to the first node, so first..last holding exactly its size
        # means a run.)
        first, last = int(feasible[0]), int(feasible[-1])
        run = last - first + 1 == feasible.size
        generation = snapshot.generation
        for slot, (before, version) in list(self.picks.items()):
            if not version < int(generation[slot]) <= version + 2:
                del self.picks[slot]
                continue
            if run:
                if not first <= slot <= last:
                    continue
                at = slot - first
            else:
                found = (feasible == slot).nonzero()[0]
                if not found.size:
                    continue
                at = int(found[0])
            drop = before - int(scores[at])
            if drop > 0:
                self.drop = drop
            del self.picks[slot]
        return self.drop

    def picked(self, slot: int, score: int, version: int) -> None:
        if len(self.picks) >= _KEPT_PICKS:
            del self.picks[next(iter(self.picks))]
        self.picks[slot] = (score, version)

    def fresh(self, snapshot: Snapshot, where: slice | np.ndarray) -> np.ndarray:
        """Whether the cached answers of the slots ``where`` selects still hold."""
        return self.gen[where] == snapshot.generation[where]

    def with_stale(self, snapshot: Snapshot, slots: np.ndarray, limit: int) -> np.ndarray:
        """``slots`` (the search needs them now) plus every other slot whose answers went
        stale since the last call, to refresh them all in one plugin call rather than one
        pod at a time; only ``slots`` when more than ``limit`` slots changed (the search
        refreshes those it reaches). Only an economy: freshness is checked where used."""
        changed = (snapshot.generation > self.scanned).nonzero()[0]
        self.scanned = snapshot.version
        if changed.size > limit:  # e.g. a relist: refreshed where the searches reach
            return slots
        gen = self.gen[changed]
        known = (gen >= 0) & (gen != snapshot.generation[changed])
        stale = changed[known & snapshot.valid[changed]]
        if not stale.size:
            return slots
        return np.union1d(slots, stale)


_KEPT_PICKS = 8


class BatchScheduler:
    """One profile's signature cache and the algorithm that runs on it."""

    def __init__(self, fw: Framework, *, max_signatures: int = MAX_SIGNATURES) -> None:
        self.fw = fw
        self.max_signatures = max_signatures
        self._entries: dict[tuple[Any, ...], _Entry] = {}
        self._snapshot: Snapshot | None = None
        self._layout = (0, 0)
        # Pods decided on cached answers / by schedule_pod (unsigned, refused or fallback).
        self.batched = 0
        self.full = 0

    def clear(self) -> None:
        self._entries.clear()

    def schedule(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> ScheduleResult:
        entry = None
        try:
            entry = self._entry(state, pod, snapshot)
            result = None if entry is None else self._schedule(entry, state, pod, snapshot)
        except Exception:  # a plugin failed: schedule_pod says how, exactly
            log.debug("batched scheduling of %s failed", pod.key, exc_info=True)
            result = None
        if result is not None:
            self.batched += 1
            return result
        if entry is not None:
            self._undo(entry, state)
        self.full += 1
        return schedule_pod(self.fw, state, pod, snapshot)

    # ------------------------------------------------------------------ the cache
    def _entry(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> _Entry | None:
        fw = self.fw
        if fw.signers is None or snapshot.num_nodes == 0 or pod.status.nominated_node_name:
            return None
        if fw.handle.listers.nominator:  # nominated pods change what fits where
            self.clear()
            return None
        layout = (snapshot.capacity, len(snapshot.resource_names))
        if snapshot is not self._snapshot or layout != self._layout:
            self.clear()
            self._snapshot = snapshot
            self._layout = layout
        signature = fw.sign_pod(pod, cycle_pod_info(state, pod), snapshot)
        if signature is None:
            return None
        entries = self._entries
        entry = entries.pop(signature, None)
        if entry is None:
            entry = _Entry(snapshot)
            if len(entries) >= self.max_signatures:
                del entries[next(iter(entries))]
        entries[signature] = entry  # most recently used last
        return entry

    @staticmethod
    def _undo(entry: _Entry, state: CycleState) -> None:
        """Take the replayed PreFilter/PreScore writes back before schedule_pod runs."""
        for replay in (entry.pre_filter, entry.pre_score):
            if replay is not None:
                replay.undo(state)
        state.skip_filter_plugins = frozenset()
        state.skip_score_plugins = frozenset()

    # ------------------------------------------------------------------ the algorithm
    def _schedule(
        self, entry: _Entry, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> ScheduleResult | None:
        """schedule_pod on cached answers; None when schedule_pod must decide (no node
        fits, or PreFilter/PreScore did not succeed)."""
        fw = self.fw
        pre = entry.pre_filter
        if pre is None:
            pre = entry.pre_filter = self._pre_filter(state, pod, snapshot)
        if not pre.status.is_success():
            return None
        pre.apply(state)
        state.skip_filter_plugins = pre.skip
        all_nodes = snapshot.node_indices()
        nodes = all_nodes if pre.node_names is None else snapshot.indices_of(pre.node_names)
        feasible, evaluated = self._find_feasible(entry, state, pod, snapshot, nodes)
        if feasible.size == 0:
            return None
        next_start = (fw.next_start_node_index + evaluated) % all_nodes.size
        if feasible.size == 1:
            fw.next_start_node_index = next_start
            index = int(feasible[0])
            return ScheduleResult(snapshot.node_name(index), index, evaluated, 1)
        scores = self._prioritize(entry, state, pod, snapshot, feasible)
        if scores is None:
            return None
        fw.next_start_node_index = next_start
        prefer = snapshot.tie_preference
        slack = 0
        if prefer is not None and snapshot.tie_slack_pods:
            slack = entry.one_pod_drop(snapshot, feasible, scores) * snapshot.tie_slack_pods
        position = select_position(feasible, scores, fw.rng.randrange, prefer, slack)
        index = int(feasible[position])
        if prefer is not None:
            entry.picked(index, int(scores[position]), snapshot.version)
        return ScheduleResult(snapshot.node_name(index), index, evaluated, int(feasible.size))

    def _pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> _PreFilter:
        recorder = _Recorder(cycle_pod_info(state, pod), {})
        result, status, _ = self.fw.run_pre_filter_plugins(recorder, pod, snapshot)
        names = result.node_names if result is not None else None
        recorder.written.pop(POD_INFO_STATE_KEY, None)
        return _PreFilter(status, recorder.written, recorder.skip_filter_plugins, names)

    def _find_feasible(
        self, entry: _Entry, state: CycleState, pod: Pod, snapshot: Snapshot, nodes: np.ndarray
    ) -> tuple[np.ndarray, int]:
        """find_nodes_that_pass_filters on cached verdicts: the first
        ``num_feasible_nodes_to_find`` passing nodes in rotation order, and how many nodes
        that search evaluated (up to the last one kept, or all)."""
        n = int(nodes.size)
        if n == 0:
            return _NO_NODES, 0
        fw = self.fw
        want = fw.num_feasible_nodes_to_find(n) if fw.has_score_plugins else 1
        start = fw.next_start_node_index % n
        passed = entry.passed
        found: list[np.ndarray] = []
        found_count = 0
        done = 0
        position = start
        window = want + want // 4
        while done < n and found_count < want:
            # Windows never wrap around the end of ``nodes`` (the result does not depend
            # on where windows end), so a window is a slice of it and, when its slots
            # are consecutive (the usual case), a slice of the cached arrays too.
            size = min(window, n - done, n - position)
            candidates = nodes[position : position + size]
            first = int(candidates[0])
            run = int(candidates[-1]) - first == size - 1
            need = want - found_count
            where: slice | np.ndarray = slice(first, first + size) if run else candidates
            verdicts = passed[where]
            fresh = entry.fresh(snapshot, where)
            if _all(fresh):
                if run and _all(verdicts[:need]):  # the usual case: the next slots all pass
                    taken = min(need, size)
                    found.append(np.arange(first, first + taken))
                    found_count += taken
                    done += taken
                    position = (position + taken) % n
                    window *= 2
                    continue
                positions = verdicts.nonzero()[0]
            else:
                # Stale slots matter only before the cutoff: the need-th passing slot.
                stale_at = int(fresh.argmin())
                positions = verdicts[:stale_at].nonzero()[0]
                if positions.size < need:
                    slots = entry.with_stale(snapshot, candidates[~fresh], window)
                    self._filter(entry, state, pod, snapshot, slots)
                    positions = passed[where].nonzero()[0]
            cutoff = size
            if positions.size >= need:
                positions = positions[:need]
                cutoff = int(positions[-1]) + 1
            found.append(positions + first if run else candidates[positions])
            found_count += int(positions.size)
            done += cutoff
            position = (position + cutoff) % n
            window *= 2
        feasible = found[0] if len(found) == 1 else np.concatenate(found)
        return feasible, done

    def _filter(
        self, entry: _Entry, state: CycleState, pod: Pod, snapshot: Snapshot, slots: np.ndarray
    ) -> None:
        """Cache the verdicts of ``slots`` and, once PreScore is known, the scores of those
        that pass."""
        outcome = self.fw.run_filter_plugins(state, pod, snapshot, slots)
        passing = slots[outcome.passed]
        pre_score = entry.pre_score
        if pre_score is not None and pre_score.status.is_success() and passing.size:
            self._score(entry, state, pod, snapshot, passing, pre_score)
        entry.passed[slots] = False
        entry.passed[passing] = True
        entry.gen[slots] = snapshot.generation[slots]

    def _prioritize(
        self, entry: _Entry, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: np.ndarray
    ) -> np.ndarray | None:
        """prioritize_nodes on cached raw scores (NormalizeScore runs over ``feasible``)."""
        pre = entry.pre_score
        if pre is None:
            pre = entry.pre_score = self._pre_score(entry, state, pod, snapshot, feasible)
        if not pre.status.is_success():
            return None
        pre.apply(state)
        state.skip_score_plugins = pre.skip
        # Copies (NormalizeScore may work in place): slices of a run of slots, else gathers.
        first = int(feasible[0])
        size = int(feasible.size)
        where = slice(first, first + size) if int(feasible[-1]) - first == size - 1 else feasible
        total = entry.summed[where]
        if type(where) is slice:
            total = total.copy()
        for plugin, weight in entry.normalized:
            if entry.nonzero[plugin.name]:
                raw = entry.raw[plugin.name][where]
                scores = plugin.normalize_score(
                    state, pod, raw.copy() if where is not feasible else raw
                )
            else:  # every cached raw score is 0: NormalizeScore of zeros, known per size
                known = entry.zeros_normalized.get((plugin.name, size))
                if known is None:
                    scores = plugin.normalize_score(state, pod, np.zeros(size, dtype=np.int64))
                    if len(entry.zeros_normalized) >= 64:
                        entry.zeros_normalized.clear()
                    constant = bool(scores.min() == scores.max())
                    entry.zeros_normalized[(plugin.name, size)] = (scores, constant)
                else:
                    scores, constant = known
                if constant and _in_range(plugin, scores):
                    continue  # the same for every node: no effect on which node wins
            if not _in_range(plugin, scores):
                return None  # schedule_pod raises the error
            if weight == 1:
                total += scores
            else:
                total += scores * weight
        return total

    def _pre_score(
        self, entry: _Entry, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: np.ndarray
    ) -> _Replay:
        """Run PreScore once for the signature and score every slot known to pass."""
        assert entry.pre_filter is not None
        recorder = _Recorder(cycle_pod_info(state, pod), entry.pre_filter.written)
        recorder.skip_filter_plugins = entry.pre_filter.skip
        status = self.fw.run_pre_score_plugins(recorder, pod, snapshot, feasible)
        recorder.written.pop(POD_INFO_STATE_KEY, None)
        pre = _Replay(status, recorder.written, recorder.skip_score_plugins)
        if not status.is_success():
            return pre
        capacity = snapshot.capacity
        for plugin, weight in self.fw.score_plugins:
            if plugin.name in pre.skip:
                continue
            if plugin.scores_in_range and _identity_normalize(plugin):
                entry.summed_plugins.append((plugin, weight))
            else:
                entry.normalized.append((plugin, weight))
                entry.raw[plugin.name] = np.zeros(capacity, dtype=np.int64)
                entry.nonzero[plugin.name] = 0
        entry.summed = np.zeros(capacity, dtype=np.int64)
        passing = (entry.fresh(snapshot, slice(None)) & entry.passed).nonzero()[0]
        self._score(entry, state, pod, snapshot, passing, pre)
        return pre

    def _score(
        self,
        entry: _Entry,
        state: CycleState,
        pod: Pod,
        snapshot: Snapshot,
        slots: np.ndarray,
        pre: _Replay,
    ) -> None:
        """Raw scores of ``slots``, on a CycleState as this pod's would be after PreScore
        (its own is left alone: the search may end with one feasible node, and then
        schedule_pod runs no PreScore)."""
        assert entry.pre_filter is not None
        state = _Recorder(cycle_pod_info(state, pod), entry.pre_filter.written)
        state.skip_filter_plugins = entry.pre_filter.skip
        pre.apply(state)
        state.skip_score_plugins = pre.skip
        total = np.zeros(slots.size, dtype=np.int64)
        for plugin, weight in entry.summed_plugins:
            scores = plugin.score(state, pod, snapshot, slots)
            if weight == 1:
                total += scores
            else:
                total += scores * weight
        for plugin, _ in entry.normalized:
            raw = entry.raw[plugin.name]
            scores = plugin.score(state, pod, snapshot, slots)
            entry.nonzero[plugin.name] += int(np.count_nonzero(scores)) - int(
                np.count_nonzero(raw[slots])
            )
            raw[slots] = scores
        entry.summed[slots] = total


_all = np.logical_and.reduce  # ndarray.all without its Python-level wrapper


def _in_range(plugin: ScorePlugin, scores: np.ndarray) -> bool:
    """run_score_plugins' check of normalized scores (skipped where in range by design)."""
    if plugin.scores_in_range or not scores.size:
        return True
    return bool(scores.max() <= MAX_NODE_SCORE and scores.min() >= MIN_NODE_SCORE)


def _identity_normalize(plugin: ScorePlugin) -> bool:
    return type(plugin).normalize_score is ScorePlugin.normalize_score
