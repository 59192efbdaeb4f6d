"""Filtering "what if" some pods were added to or removed from a node: the framework's
runtime for preemption's dry runs and for kube's RunFilterPluginsWithNominatedPods.

kube runs the filters against a copy of one NodeInfo with pods added or removed, and
tells the PreFilter plugins through their PreFilterExtensions (AddPod/RemovePod) on a
copy of the CycleState. Here the filters are vectorized over the worker's snapshot, so
the snapshot itself is edited and restored; PreFilter state changes go to a clone of the
CycleState, as in kube.

The contract:

- A :class:`NodeEdit` (``node_edit``) moves pods on and off one node of the snapshot it
  is given, in place, charging or refunding the node's usage; every reader of that
  snapshot sees the edited node until ``restore()`` (``node_edit`` restores on exit,
  exceptions included), after which pods, usage, ports and the pod observers (the
  PodIndex) are as before.
- The caller holds the snapshot for the edit's whole life: a worker's scheduling thread
  does (the informer and the ledger's feed touch the snapshot between batches only).
  Nothing may keep an array of the snapshot across an edit expecting the unedited values.
- A NodeEdit tells the PreFilter extensions on its own clone of the CycleState; the
  caller's state is never changed. ``_rejected_with_nominated`` and
  ``_first_pass_together`` share one clone told nothing, which is sound only when
  :func:`nodes_are_independent` (every extension skipped).

Why in place rather than on copies: a copy of the snapshot costs more than what it
would serve. Measured on 5000 nodes and 20000 pods (PreemptionBasic's shape): a whole
PostFilter (candidates, lockstep dry runs, victims) takes ~47 ms with in-place edits,
copying just the snapshot's arrays and per-node pod dicts ~4 ms (and that is no working
snapshot: label, port and pod indexes, the PodIndex and the mask caches would have to
follow), ``copy.deepcopy`` 3.3 s; and a scheduling cycle with one nominated pod takes
~125 us, of which the in-place edit of that one node is ~30 us, where a copy per cycle
would be ~4 ms.

When every filter in play reads only the node it judges
(``FilterPlugin.reads_only_its_node``) and no PreFilter state follows pod edits
(``nodes_are_independent``), edits on many nodes are made at once and judged by one
filter run (``fits_together``, and the nominated-pod pass): the same verdicts as one
node at a time, which kube gets from 16 goroutines and Python would pay for in
per-call overhead.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, cast

import numpy as np

from distsched.framework.cycle_state import CycleState
from distsched.framework.diagnosis import SchedulingError
from distsched.framework.nominated_rows import NominatedRows
from distsched.framework.nominator import PodNominator, nominated_to_add
from distsched.framework.podinfo import PodInfo
from distsched.framework.runtime import FilterOutcome, FilterVerdict
from distsched.framework.snapshot import Snapshot
from distsched.framework.status import Code, PluginError, Status, is_success
from distsched.model.objects import Pod

if TYPE_CHECKING:
    from distsched.framework.runtime import Framework


# ---------------------------------------------------------------------------- extensions
def run_pre_filter_extension_add_pod(
    fw: Framework, state: CycleState, pod: Pod, info: PodInfo, node_index: int, snapshot: Snapshot
) -> Status:
    return _run_extensions(fw, state, pod, info, node_index, snapshot, add=True)


def run_pre_filter_extension_remove_pod(
    fw: Framework, state: CycleState, pod: Pod, info: PodInfo, node_index: int, snapshot: Snapshot
) -> Status:
    return _run_extensions(fw, state, pod, info, node_index, snapshot, add=False)


def _run_extensions(
    fw: Framework,
    state: CycleState,
    pod: Pod,
    info: PodInfo,
    node_index: int,
    snapshot: Snapshot,
    *,
    add: bool,
) -> Status:
    skip = state.skip_filter_plugins
    for plugin in fw.pre_filter_plugins:
        extensions = plugin.pre_filter_extensions()
        if extensions is None or plugin.name in skip:
            continue
        method = extensions.add_pod if add else extensions.remove_pod
        try:
            status = method(state, pod, info, node_index, snapshot)
        except PluginError as exc:
            status = Status.from_error(exc)
        if not is_success(status):
            assert status is not None
            point = "AddPod" if add else "RemovePod"
            return Status(
                Code.ERROR,
                f"running {point} on PreFilter plugin {plugin.name!r}: {status.message()}",
                plugin=plugin.name,
                error=status.error,
            )
    return Status.success()


# ---------------------------------------------------------------------------- snapshot edits
class NodeEdit:
    """Pods taken off / put back on one node of the snapshot, with the PreFilter state
    (a clone) told about each change. ``restore()`` undoes every change."""

    def __init__(
        self, fw: Framework, state: CycleState, pod: Pod, snapshot: Snapshot, node_index: int
    ) -> None:
        self.fw = fw
        self.state = state
        self.pod = pod
        self.snapshot = snapshot
        self.node_index = node_index
        self.node_name = snapshot.node_name(node_index)
        self._removed: dict[str, PodInfo] = {}  # original pods currently off the node
        self._added: dict[str, PodInfo] = {}  # foreign pods currently on the node

    def remove(self, info: PodInfo) -> None:
        self._take_off(info)
        if self._added.pop(info.key, None) is None:
            self._removed[info.key] = info
        self._tell(run_pre_filter_extension_remove_pod, info)

    def add(self, info: PodInfo) -> None:
        self._put_on(info)
        if self._removed.pop(info.key, None) is None:
            self._added[info.key] = info
        self._tell(run_pre_filter_extension_add_pod, info)

    # A worker's snapshot takes requested resources and ports from the ledger, not from
    # its pods (``usage_from_ledger``): pods moved here must be charged or refunded too.
    def _take_off(self, info: PodInfo) -> None:
        self.snapshot.remove_pod(info.key)
        if self.snapshot.usage_from_ledger:
            self.snapshot.add_usage(self.node_index, info, -1)

    def _put_on(self, info: PodInfo) -> None:
        self.snapshot.add_pod(info.pod, self.node_name, info=info)
        if self.snapshot.usage_from_ledger:
            self.snapshot.add_usage(self.node_index, info, 1)

    def _tell(self, run, info: PodInfo) -> None:  # type: ignore[no-untyped-def]
        status = run(self.fw, self.state, self.pod, info, self.node_index, self.snapshot)
        if not status.is_success():
            raise SchedulingError(status.message())

    def restore(self) -> None:
        for info in self._added.values():
            self._take_off(info)
        for info in self._removed.values():
            self._put_on(info)
        self._added.clear()
        self._removed.clear()


@contextmanager
def node_edit(
    fw: Framework, state: CycleState, pod: Pod, snapshot: Snapshot, node_index: int
) -> Iterator[NodeEdit]:
    """A NodeEdit working on a clone of ``state``; the snapshot is restored on exit."""
    edit = NodeEdit(fw, state.clone(), pod, snapshot, node_index)
    try:
        yield edit
    finally:
        edit.restore()


# ---------------------------------------------------------------------------- independence
def nodes_are_independent(fw: Framework, state: CycleState) -> bool:
    """Whether pods added to or removed from one node cannot change another node's
    verdict for this cycle: no PreFilter state that such edits update is live
    (InterPodAffinity's and PodTopologySpread's are cluster-wide; they are skipped for
    pods and clusters without inter-pod rules), and every filter left reads only the node
    it judges. Then what-if edits on many nodes can be judged by one filter run."""
    skip = state.skip_filter_plugins
    for plugin in fw.pre_filter_plugins:
        if plugin.pre_filter_extensions() is not None and plugin.name not in skip:
            return False
    return all(p.reads_only_its_node or p.name in skip for p in fw.filter_plugins)


def usage_decides(fw: Framework, state: CycleState) -> bool:
    """Whether, on independent nodes (:func:`nodes_are_independent`), every live filter
    sees a node's pods only through its free resources (``reads_only_its_node_usage``):
    a what-if of pods added or taken off may then change ``snapshot.free`` alone."""
    skip = state.skip_filter_plugins
    return all(p.reads_only_its_node_usage or p.name in skip for p in fw.filter_plugins)


def fits_together(
    fw: Framework,
    state: CycleState,
    pod: Pod,
    snapshot: Snapshot,
    edits: Sequence[NodeEdit],
    nominated: Sequence[Sequence[PodInfo]],
) -> list[Status | None]:
    """:func:`fits_on_node` for the nodes of ``edits`` (independent ones, see
    :func:`nodes_are_independent`) in two filter runs: the nodes with ``nominated`` pods
    to count with those pods added, then every node not rejected yet without them."""
    statuses: list[Status | None] = [None] * len(edits)
    first = [k for k, pods in enumerate(nominated) if pods]
    if first:
        rejected = _rejected_with_nominated(
            fw, state, pod, snapshot, [edits[k] for k in first], [nominated[k] for k in first]
        )
        for position, verdict in rejected.items():
            statuses[first[position]] = _status_of(verdict)
    rest = [k for k, status in enumerate(statuses) if status is None]
    if rest:
        slots = np.array([edits[k].node_index for k in rest], dtype=np.int64)
        outcome = fw.run_filter_plugins(state, pod, snapshot, slots)
        for position, status in enumerate(one_node_statuses(outcome, len(rest))):
            statuses[rest[position]] = status
    return statuses


def rejected_positions(outcome: FilterOutcome) -> set[int]:
    """The candidates some filter rejected."""
    rejected: set[int] = set()
    for verdict in outcome.verdicts:
        rejected.update(verdict.failed.tolist())
    return rejected


def one_node_statuses(outcome: FilterOutcome, count: int) -> list[Status | None]:
    """The status of each of ``count`` candidates as if filtered alone (None: passed)."""
    statuses: list[Status | None] = [None] * count
    for position, verdict in _one_node_verdicts(outcome).items():
        statuses[position] = _status_of(verdict)
    return statuses


def _rejected_with_nominated(
    fw: Framework,
    state: CycleState,
    pod: Pod,
    snapshot: Snapshot,
    edits: Sequence[NodeEdit],
    nominated: Sequence[Sequence[PodInfo]],
) -> dict[int, FilterVerdict]:
    """kube's first pass on the nodes of independent ``edits`` in one filter run: each
    node with its ``nominated`` pods added (and taken off again after). The one-node
    verdicts of the rejected nodes, by position in ``edits``."""
    added: list[tuple[NodeEdit, PodInfo]] = []
    try:
        for edit, pods in zip(edits, nominated, strict=True):
            for info in pods:
                if snapshot.pod_node_index(info.key) is None:  # assumed: counted already
                    edit.add(info)
                    added.append((edit, info))
        slots = np.array([edit.node_index for edit in edits], dtype=np.int64)
        outcome = fw.run_filter_plugins(state, pod, snapshot, slots)
    finally:
        for edit, info in reversed(added):
            edit.remove(info)
    return _one_node_verdicts(outcome)


# ---------------------------------------------------------------------------- filtering
def filter_status(outcome: FilterOutcome, position: int = 0) -> Status | None:
    """The status a FilterOutcome gives candidate ``position`` (None: it passed)."""
    for verdict in outcome.verdicts:
        if position not in verdict.failed.tolist():
            continue
        hits = [(r, u) for r, u, positions in verdict.reasons if position in positions.tolist()]
        reasons = [r for r, _ in hits]
        unresolvable = any(u for _, u in hits)
        code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if unresolvable else Code.UNSCHEDULABLE
        return Status(code, *reasons, plugin=verdict.plugin)
    return None


def _with_nominated(
    fw: Framework,
    state: CycleState,
    pod: Pod,
    snapshot: Snapshot,
    node_index: int,
    nominated: Sequence[PodInfo],
) -> FilterOutcome:
    """Filters on one node with ``nominated`` pods added (kube's first pass)."""
    with node_edit(fw, state, pod, snapshot, node_index) as edit:
        for info in nominated:
            if snapshot.pod_node_index(info.key) is None:  # an assumed pod is counted already
                edit.add(info)
        return fw.run_filter_plugins(
            edit.state, pod, snapshot, np.array([node_index], dtype=np.int64)
        )


def run_filter_plugins_with_nominated_pods(
    fw: Framework,
    state: CycleState,
    pod: Pod,
    snapshot: Snapshot,
    candidates: np.ndarray,
    nominator: PodNominator | None,
    priority: int,
) -> FilterOutcome:
    """kube's RunFilterPluginsWithNominatedPods over ``candidates``.

    A candidate with nominated pods of priority >= ``priority`` must pass the filters
    both with those pods added and without them; when the first pass fails its status
    is the node's. Other candidates take the plain vectorized pass. Raises
    SchedulingError on plugin errors, like ``Framework.run_filter_plugins``.
    """
    outcome = fw.run_filter_plugins(state, pod, snapshot, candidates)
    if nominator is None or not len(nominator):
        return outcome
    if nodes_are_independent(fw, state) and usage_decides(fw, state):
        lowered = _nominated_requests(snapshot, nominator, pod, priority, candidates)
        if lowered is None:
            return outcome
        at, slots, requests = lowered
        with overridden_free(snapshot, slots) as free:
            free[slots] = free[slots] - requests
            by_usage = fw.run_filter_plugins(state, pod, snapshot, slots)
        return _with_first_pass(outcome, by_usage, at)
    todo = []
    for position, node_index in _nominated_positions(candidates, snapshot, nominator):
        pods = nominated_to_add(nominator, pod, priority, snapshot.node_name(node_index))
        if pods:
            todo.append((position, node_index, pods))
    overrides: dict[int, FilterOutcome] = {}
    independent = bool(todo) and nodes_are_independent(fw, state)
    if independent and len(todo) > 1:
        overrides = _first_pass_together(fw, state, pod, snapshot, todo)
    else:
        for position, node_index, pods in todo:
            first = _with_nominated(fw, state, pod, snapshot, node_index, pods)
            if first.passed.size == 0:
                overrides[position] = first
    if not overrides:
        return outcome
    return _override(outcome, overrides)


def _first_pass_together(
    fw: Framework,
    state: CycleState,
    pod: Pod,
    snapshot: Snapshot,
    todo: list[tuple[int, int, list[PodInfo]]],
) -> dict[int, FilterOutcome]:
    """kube's first pass (nominated pods added) on independent nodes in one filter run:
    position -> that node's one-node outcome, for the nodes it rejects."""
    shared = state.clone()  # told nothing: every extension is skipped
    edits = [NodeEdit(fw, shared, pod, snapshot, node_index) for _, node_index, _ in todo]
    rejected = _rejected_with_nominated(
        fw, shared, pod, snapshot, edits, [pods for _, _, pods in todo]
    )
    return {todo[k][0]: FilterOutcome(_NONE, [verdict]) for k, verdict in rejected.items()}


def unplaced_rows(snapshot: Snapshot, pods: Sequence[PodInfo]) -> list[np.ndarray]:
    """The requested rows (``Usage.requested_row``) of ``pods`` the snapshot does not hold
    yet: nominated pods to count on their node (an assumed one is counted already)."""
    return [
        snapshot.usage.requested_row(info)
        for info in pods
        if snapshot.pod_node_index(info.key) is None
    ]


@contextmanager
def overridden_free(snapshot: Snapshot, slots: np.ndarray) -> Iterator[np.ndarray]:
    """The snapshot's ``free`` array, whose rows ``slots`` the caller may set for what-if
    filter runs; they are restored on exit, exceptions included. Take it after computing
    any requested row: a pod with a new resource grows the table's arrays."""
    free = snapshot.free
    saved = free[slots].copy()
    try:
        yield free
    finally:
        free[slots] = saved


def _nominated_requests(
    snapshot: Snapshot,
    nominator: PodNominator,
    pod: Pod,
    priority: int,
    candidates: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """kube's first pass (nominated pods added) when only free resources matter to the
    filters (:func:`usage_decides`) on independent nodes: the positions in ``candidates``
    (ascending) of the nodes whose nominated pods (:func:`nominated_to_add`'s, less those
    the snapshot holds already) lower their free room, those nodes' slots, and each one's
    summed requested rows; None when there is none. Numpy over the rows of
    :func:`_nominated_rows`: preemption asks while hundreds of nodes hold nominated
    preemptors, and a call per node cost more than the filters themselves."""
    if candidates.size * 4 < len(nominator):  # few nodes asked (a nominated one first)
        found = _unplaced(
            snapshot,
            [
                (slot, nominated_to_add(nominator, pod, priority, snapshot.node_name(slot)))
                for slot in candidates.tolist()
            ],
        )
    else:
        found = _nominated_rows(snapshot, nominator, pod, priority)
    if found is None:
        return None
    nominated_slots, rows = found
    position_of = np.full(snapshot.free.shape[0], -1, dtype=np.int64)
    position_of[candidates] = np.arange(candidates.size, dtype=np.int64)
    positions = position_of[nominated_slots]
    wanted = positions >= 0
    if not wanted.any():
        return None
    at, owner = np.unique(positions[wanted], return_inverse=True)
    requests = np.zeros((at.size, rows.shape[1]), dtype=snapshot.free.dtype)
    np.add.at(requests, owner, rows[wanted])
    return at, candidates[at], requests


def _nominated_rows(
    snapshot: Snapshot, nominator: PodNominator, pod: Pod, priority: int
) -> tuple[np.ndarray, np.ndarray] | None:
    """The slot and requested row of each pod nominated to a node that ``pod`` must count
    there (:meth:`NominatedRows.counted`, less those the snapshot holds already), or None.
    Kept on the nominator until the nominations or the snapshot change: a decision's
    filter pass asks once per chunk of candidates."""
    table = snapshot.table
    asked = (
        nominator.version,
        table.version,
        table.free.shape[1],
        pod.key,
        pod.metadata.uid,
        priority,
    )
    memo = nominator.derived
    if memo is not None and memo[0] is table and memo[1] == asked:
        return cast(tuple[np.ndarray, np.ndarray] | None, memo[2])
    found = NominatedRows.current(nominator, snapshot).select(snapshot, pod, priority)
    nominator.derived = (table, asked, found)
    return found


def _unplaced(
    snapshot: Snapshot, nominated: Sequence[tuple[int | None, Sequence[PodInfo]]]
) -> tuple[np.ndarray, np.ndarray] | None:
    """Each (node slot, its nominated pods) as the slot and requested row of each pod the
    snapshot does not hold yet (an assumed pod is counted already; a slot of None, a
    node the snapshot lacks, is skipped); None when no pod is left."""
    placed = snapshot.pod_node_index
    slots: list[int] = []
    infos: list[PodInfo] = []
    for slot, pods in nominated:
        if slot is None:
            continue
        for info in pods:
            if placed(info.key) is None:
                slots.append(slot)
                infos.append(info)
    if not slots:
        return None
    usage = snapshot.usage
    rows = [usage.requested_row(info) for info in infos]
    width = snapshot.free.shape[1]  # a pod with a new resource added a column meanwhile
    if any(len(row) != width for row in rows):
        rows = [usage.requested_row(info) for info in infos]
    return np.asarray(slots, dtype=np.int64), np.stack(rows)


def _with_first_pass(outcome: FilterOutcome, first: FilterOutcome, at: np.ndarray) -> FilterOutcome:
    """``outcome`` with the candidates kube's first pass rejected taking its verdicts:
    ``first`` judged the candidates at positions ``at`` (ascending) with their nominated
    pods added. :func:`_override`'s answer, by plugin instead of node by node (preemption
    asks with hundreds of nodes holding nominated pods)."""
    taken = [
        FilterVerdict(
            v.plugin, at[v.failed], [(r, u, at[pos]) for r, u, pos in v.reasons if pos.size]
        )
        for v in first.verdicts
        if v.failed.size
    ]
    if not taken:
        return outcome
    rest = _without(outcome, np.concatenate([v.failed for v in taken]))
    rest.verdicts += taken
    return rest


_HERE = np.zeros(1, dtype=np.int64)
_HERE.flags.writeable = False
_NONE = _HERE[:0]


def _one_node_verdicts(outcome: FilterOutcome) -> dict[int, FilterVerdict]:
    """Each rejected candidate's verdict as a one-node verdict (position 0), by position:
    a candidate is rejected by one plugin, the first that failed it."""
    rejected: dict[int, FilterVerdict] = {}
    for verdict in outcome.verdicts:
        reasons = [(r, u, set(positions.tolist())) for r, u, positions in verdict.reasons]
        for position in verdict.failed.tolist():
            rejected[position] = FilterVerdict(
                verdict.plugin,
                _HERE,
                [(r, u, _HERE if position in at else _NONE) for r, u, at in reasons],
            )
    return rejected


def _status_of(verdict: FilterVerdict) -> Status:
    """filter_status of a one-node verdict (one that rejects its node)."""
    status = filter_status(FilterOutcome(_NONE, [verdict]))
    assert status is not None  # the verdict rejects position 0
    return status


def _nominated_positions(
    candidates: np.ndarray, snapshot: Snapshot, nominator: PodNominator
) -> list[tuple[int, int]]:
    """(position, node slot) of the candidates with nominated pods, walking whichever
    side is smaller: preemption asks about one node at a time while hundreds of pods
    may be nominated."""
    if candidates.size <= len(nominator):
        return [
            (position, node_index)
            for position, node_index in enumerate(candidates.tolist())
            if nominator.has_pods_on(snapshot.node_name(node_index))
        ]
    slots = snapshot.indices_of(nominator.node_names())
    if not slots.size:
        return []
    positions = np.flatnonzero(np.isin(candidates, slots))
    return [(position, int(candidates[position])) for position in positions.tolist()]


def _override(outcome: FilterOutcome, overrides: dict[int, FilterOutcome]) -> FilterOutcome:
    """``outcome`` with the candidates in ``overrides`` taking their single-node verdicts."""
    rest = _without(outcome, np.fromiter(overrides, dtype=np.int64, count=len(overrides)))
    for position, single in overrides.items():
        for verdict in single.verdicts:
            at = np.array([position], dtype=np.int64)
            reasons = [(r, u, at) for r, u, pos in verdict.reasons if pos.size]
            rest.verdicts.append(FilterVerdict(verdict.plugin, at, reasons))
    return rest


def _without(outcome: FilterOutcome, replaced: np.ndarray) -> FilterOutcome:
    """``outcome`` with the candidates at positions ``replaced`` left out (a new outcome,
    whose verdict list the caller extends with their new verdicts)."""
    verdicts: list[FilterVerdict] = []
    for verdict in outcome.verdicts:
        keep = ~np.isin(verdict.failed, replaced)
        if not keep.any():
            continue
        reasons = [(r, u, pos[~np.isin(pos, replaced)]) for r, u, pos in verdict.reasons]
        verdicts.append(FilterVerdict(verdict.plugin, verdict.failed[keep], reasons))
    return FilterOutcome(outcome.passed[~np.isin(outcome.passed, replaced)], verdicts)


def fits_on_node(
    fw: Framework,
    state: CycleState,
    pod: Pod,
    snapshot: Snapshot,
    node_index: int,
    nominator: PodNominator | None,
    priority: int,
) -> Status | None:
    """kube's RunFilterPluginsWithNominatedPods for one node: None when the pod fits,
    else the node's status. In kube's order: with the nominated pods first (when there
    are any), then without them only if that passed."""
    name = snapshot.node_name(node_index)
    if nominator is not None and nominator.has_pods_on(name):
        pods = nominated_to_add(nominator, pod, priority, name)
        if pods:
            first = _with_nominated(fw, state, pod, snapshot, node_index, pods)
            if not first.passed.size:
                return filter_status(first)
    outcome = fw.run_filter_plugins(state, pod, snapshot, np.array([node_index], dtype=np.int64))
    if outcome.passed.size:
        return None
    return filter_status(outcome)
