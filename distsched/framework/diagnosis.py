"""Why a pod did not fit: per-node statuses as arrays, and kube's FitError message."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from distsched.framework.status import Code, Status
from distsched.model.objects import Pod

NO_NODE_AVAILABLE_MSG = "0/{} nodes are available"


@dataclass(frozen=True, slots=True)
class ReasonEntry:
    """Nodes (snapshot slots) a plugin rejected for one reason."""

    reason: str
    plugin: str
    unresolvable: bool
    nodes: np.ndarray


class NodeToStatus:
    """The status of every node that failed Filter, kept per (plugin, reason) class.

    Each failing node belongs to exactly one plugin (the first filter that rejected it)
    and may carry several reasons of that plugin. Nodes never evaluated explicitly (those
    a PreFilter result excluded, or all nodes when PreFilter rejected the pod) take
    ``absent_status``.
    """

    __slots__ = ("_entries", "_failed", "absent_status")

    def __init__(self) -> None:
        self._entries: list[ReasonEntry] = []
        self._failed: list[np.ndarray] = []
        self.absent_status: Status | None = None

    def record(self, plugin: str, failed_nodes: np.ndarray, entries: list[ReasonEntry]) -> None:
        """Add one filter plugin's verdict: ``failed_nodes`` (no node twice across calls)
        and the reason classes covering them."""
        if failed_nodes.size:
            self._failed.append(failed_nodes)
            self._entries.extend(entries)

    def __len__(self) -> int:
        return sum(int(chunk.size) for chunk in self._failed)

    @property
    def entries(self) -> list[ReasonEntry]:
        return self._entries

    def failed_nodes(self) -> np.ndarray:
        if not self._failed:
            return np.zeros(0, dtype=np.int64)
        return np.concatenate(self._failed)

    def reason_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for entry in self._entries:
            counts[entry.reason] = counts.get(entry.reason, 0) + int(entry.nodes.size)
        return counts

    def plugin_counts(self) -> dict[str, int]:
        """Failing nodes per plugin (each node counted once)."""
        per_plugin: dict[str, set[int]] = {}
        for entry in self._entries:
            per_plugin.setdefault(entry.plugin, set()).update(entry.nodes.tolist())
        return {plugin: len(nodes) for plugin, nodes in per_plugin.items()}

    def unresolvable_nodes(self) -> np.ndarray:
        """Explicitly failed nodes whose status is UnschedulableAndUnresolvable."""
        chunks = [e.nodes for e in self._entries if e.unresolvable]
        if not chunks:
            return np.zeros(0, dtype=np.int64)
        return np.unique(np.concatenate(chunks))

    def status_of(self, node_index: int) -> Status | None:
        """The node's status; None when it has none (it passed, or was never evaluated
        and there is no absent status)."""
        reasons: list[str] = []
        plugin = ""
        unresolvable = False
        for entry in self._entries:
            if np.any(entry.nodes == node_index):
                reasons.append(entry.reason)
                plugin = entry.plugin
                unresolvable = unresolvable or entry.unresolvable
        if not reasons:
            for chunk in self._failed:
                if np.any(chunk == node_index):
                    return None
            return self.absent_status
        code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if unresolvable else Code.UNSCHEDULABLE
        return Status(code, *reasons, plugin=plugin)

    def nodes_that_might_help(self, all_nodes: np.ndarray) -> np.ndarray:
        """Nodes of ``all_nodes`` where preemption could help: those whose status is not
        UnschedulableAndUnresolvable (kube's nodesWherePreemptionMightHelp)."""
        failed = self.failed_nodes()
        absent_hopeless = (
            self.absent_status is not None
            and self.absent_status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        )
        # Masks over the slots rather than set operations (which sort): preemption asks
        # for every pod that fits nowhere.
        size = 1 + max(int(all_nodes.max(initial=-1)), int(failed.max(initial=-1)))
        helps = np.zeros(size, dtype=bool)
        helps[failed] = True
        helps[self.unresolvable_nodes()] = False
        if not absent_hopeless:
            absent = np.zeros(size, dtype=bool)
            absent[all_nodes] = True
            absent[failed] = False
            helps |= absent
        return np.flatnonzero(helps)


@dataclass(slots=True)
class Diagnosis:
    node_to_status: NodeToStatus = field(default_factory=NodeToStatus)
    unschedulable_plugins: set[str] = field(default_factory=set)
    pending_plugins: set[str] = field(default_factory=set)
    pre_filter_msg: str = ""
    post_filter_msg: str = ""

    def add_plugin_status(self, status: Status) -> None:
        if not status.plugin:
            return
        if status.is_rejected():
            self.unschedulable_plugins.add(status.plugin)
        if status.code == Code.PENDING:
            self.pending_plugins.add(status.plugin)


class SchedulingError(Exception):
    """The scheduling cycle could not run (an Error status, no nodes at all)."""


class NoNodesAvailableError(SchedulingError):
    def __init__(self) -> None:
        super().__init__("no nodes available to schedule pods")


class FitError(SchedulingError):
    """No node fits the pod; ``str()`` is kube's FailedScheduling message."""

    def __init__(self, pod: Pod, num_all_nodes: int, diagnosis: Diagnosis) -> None:
        super().__init__()
        self.pod = pod
        self.num_all_nodes = num_all_nodes
        self.diagnosis = diagnosis

    def reason_histogram(self) -> dict[str, int]:
        """Nodes per reason, nodes without an explicit status counted under the absent
        status's reasons (as kube's FitError.Error does)."""
        statuses = self.diagnosis.node_to_status
        counts = statuses.reason_counts()
        explicit = len(statuses)
        absent = statuses.absent_status
        if explicit < self.num_all_nodes and absent is not None:
            for reason in absent.reasons:
                counts[reason] = counts.get(reason, 0) + self.num_all_nodes - explicit
        return counts

    def __str__(self) -> str:
        message = NO_NODE_AVAILABLE_MSG.format(self.num_all_nodes) + ":"
        pre_filter_msg = self.diagnosis.pre_filter_msg
        if pre_filter_msg:
            message += f" {pre_filter_msg}."
        else:
            histogram = sorted(f"{n} {reason}" for reason, n in self.reason_histogram().items())
            if histogram:
                message += f" {', '.join(histogram)}."
        if self.diagnosis.post_filter_msg:
            message += f" {self.diagnosis.post_filter_msg}."
        return message


@dataclass(frozen=True, slots=True)
class ScheduleResult:
    suggested_host: str
    node_index: int
    evaluated_nodes: int
    feasible_nodes: int
