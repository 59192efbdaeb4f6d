"""Gang scheduling's pieces that do not need the worker: what a failed gang reports, whether
a gang could fit even in an empty cluster, and the preemption plan of a whole gang.

The cycle itself is the worker's (:meth:`SchedulingWorker._schedule_gang`): the queue pops a
gang whole (``lua/lib/gang.lua``), the worker places every member on its snapshot, each
seeing its siblings' assumptions, and reserves them in one all-or-nothing ledger call.
Nothing of a gang is ever held while it is incomplete: there is no Permit wait, so none
of Coscheduling's partial holds, deadlocks between gangs or timeouts of waiting members.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from distsched.framework.cycle_state import CycleState
from distsched.framework.diagnosis import FitError
from distsched.framework.plugins.default_preemption import PreemptionResult
from distsched.framework.podinfo import PodInfo
from distsched.framework.runtime import Framework
from distsched.framework.snapshot import Snapshot
from distsched.model import Pod
from distsched.model.quantity import format_quantity

Outcome = FitError | tuple[str, str] | None
"""What placing one pod gave: None (placed), a FitError, or (message, node its Reserve
plugins ran for)."""


@dataclass
class GangPlan:
    """One gang's members as popped, its group's minimum (the queue's: a worker whose
    informer has not seen the PodGroup yet still decides the gang whole), and how many of
    the group were placed before."""

    key: str  # the pod group, "ns/name"
    minimum: int
    members: list  # list[Attempt] (the worker's; kept untyped to avoid an import cycle)
    placed: int = 0

    @property
    def need(self) -> int:
        """Members of this pop that must fit for the group to reach its minimum."""
        return max(0, self.minimum - self.placed)


def gang_message(plan: GangPlan, outcomes: Sequence[Outcome], never: str = "") -> str:
    """The explain line of a gang that did not fit, e.g. "gang ns/train: 6/8 members fit,
    minimum 8; 2 do not: 0/10 nodes are available: 10 Insufficient cpu." (members placed
    earlier count as fitting)."""
    total = len(outcomes) + plan.placed
    fit = sum(1 for o in outcomes if o is None) + plan.placed
    head = f"gang {plan.key}: {fit}/{total} members fit, minimum {plan.minimum}"
    if never:
        head = f"gang {plan.key} can never be placed: {never}"
    unfit = [o for o in outcomes if o is not None]
    if not unfit:
        return head
    first = unfit[0]
    why = str(first) if isinstance(first, FitError) else first[0]
    noun = "does" if len(unfit) == 1 else "do"
    return f"{head}; {len(unfit)} {noun} not: {why}"


def never_fits(snapshot: Snapshot, members: Sequence[Pod], minimum: int) -> str:
    """Why ``minimum`` of the members could not all fit even on empty nodes ("" if they
    might): a member larger than every node, or the smallest ``minimum`` members together
    asking for more of a resource than all nodes have (plus one pod slot each)."""
    indices = snapshot.node_indices()
    if len(indices) == 0:
        return "the cluster has no nodes"
    infos = [PodInfo.of(pod) for pod in members]
    allocatable = snapshot.table.allocatable
    totals: dict[str, int] = {}
    largest: dict[str, int] = {}
    names: set[str] = set()
    for info in infos:
        names.update(r for r, amount in info.requests.items() if amount > 0)
    for name in names | {"pods"}:
        col = snapshot.resource_index.get(name)
        if col is None:
            totals[name] = largest[name] = 0
            continue
        column = allocatable[indices, col]
        totals[name], largest[name] = int(column.sum()), int(column.max())
    for info in infos:
        for name, amount in info.requests.items():
            if amount > largest.get(name, 0):
                return (
                    f"member {info.key} requests {format_quantity(amount, name)} {name}, "
                    f"more than any node has ({format_quantity(largest.get(name, 0), name)})"
                )
    wanted: dict[str, int] = {"pods": minimum}
    for name in names:
        smallest = sorted(info.requests.get(name, 0) for info in infos)[:minimum]
        wanted[name] = sum(smallest)
    for name in sorted(wanted):
        if wanted[name] > totals.get(name, 0):
            return (
                f"its minimum of {minimum} members needs {format_quantity(wanted[name], name)} "
                f"{name}, all nodes together have {format_quantity(totals.get(name, 0), name)}"
            )
    return ""


@dataclass
class Eviction:
    """A member's share of a gang's preemption: its node and the victims to delete there."""

    pod: Pod
    node: str
    victims: tuple[Pod, ...]
    clear: tuple[Pod, ...] = field(default=())


def plan_gang_preemption(
    snapshot: Snapshot,
    members: Sequence[tuple[Framework, CycleState, Pod, FitError]],
) -> list[Eviction] | None:
    """One dry run of PostFilter for the members that do not fit, in order, each on the
    snapshot as the earlier ones' evictions and placements would leave it. The plan
    covers every such member, or there is none (None): a gang never evicts pods for
    part of itself. The snapshot is as it was when this returns."""
    undo: list[tuple[str, Pod, PodInfo, int]] = []  # (action, pod, info, node index)
    plan: list[Eviction] = []
    try:
        for fw, state, pod, err in members:
            if not fw.post_filter_plugins:
                return None
            result, _status = fw.run_post_filter_plugins(state, pod, snapshot, err.diagnosis)
            if result is None or not result.nominated_node_name:
                return None
            node = result.nominated_node_name
            index = snapshot.get_index(node)
            if index is None:
                return None
            victims = result.victims if isinstance(result, PreemptionResult) else ()
            clear = result.clear_nominations if isinstance(result, PreemptionResult) else ()
            for victim in victims:
                info = snapshot.remove_pod(victim.key) or PodInfo.of(victim)
                snapshot.add_usage(index, info, -1)
                undo.append(("evicted", victim, info, index))
            info = PodInfo.of(pod)
            snapshot.add_pod(pod, node, info=info)
            snapshot.add_usage(index, info)
            undo.append(("placed", pod, info, index))
            plan.append(Eviction(pod, node, tuple(victims), tuple(clear)))
        return plan
    finally:
        for action, pod, info, index in reversed(undo):
            if action == "placed":
                snapshot.remove_pod(pod.key)
                snapshot.add_usage(index, info, -1)
            else:
                snapshot.add_pod(pod, snapshot.node_name(index), info=info)
                snapshot.add_usage(index, info)
