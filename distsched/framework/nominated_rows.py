"""Every nominated pod as one row of arrays (its node's slot, its priority, its requested
row), kept up to date from the nominator's journal.

Preemption asks which nominated pods count on which nodes (kube's addGENominatedPods)
for every decision, while hundreds of preemptors wait nominated; walking them all in
Python for each decision cost a single worker more than its filters. A decision now
changes a row or two, and the question is a mask over the arrays.
"""

from __future__ import annotations

from typing import cast

import numpy as np

from distsched.framework.nominator import PodNominator
from distsched.framework.podinfo import PodInfo
from distsched.framework.snapshot import Snapshot
from distsched.model.objects import Pod


class NominatedRows:
    """The nominations of one :class:`PodNominator` laid out for one snapshot table: its
    node slots and its resource columns (:meth:`current` makes a new one when either
    changes)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.table = snapshot.table
        self.nodes = snapshot.node_indices()  # a new array whenever a node comes or goes
        self.width = int(snapshot.free.shape[1])
        self.position = -1  # the nominator's journal, read up to here (-1: never)
        self.at: dict[str, int] = {}  # pod key -> its row
        self.keys: list[str | None] = []
        self.infos: list[PodInfo | None] = []
        self.node_names: list[str] = []
        self.uid_rows: dict[str, set[int]] = {}
        self.free_rows: list[int] = []
        capacity = 64
        self.slot = np.full(capacity, -1, dtype=np.int64)
        self.priority = np.zeros(capacity, dtype=np.int64)
        self.live = np.zeros(capacity, dtype=bool)  # nominated to a node the table holds
        self.rows = np.zeros((capacity, self.width), dtype=np.int64)
        self._asked: tuple[object, ...] | None = None  # by_slot's last question, answer
        self._by_slot: dict[int, list[PodInfo]] = {}

    @classmethod
    def current(cls, nominator: PodNominator, snapshot: Snapshot) -> NominatedRows:
        """The nominator's rows for ``snapshot``, brought up to date. Reading a pod with a
        resource no node has adds that column, and the rows start again in the wider
        layout; the columns only grow, so this ends once every nominated pod's are there."""
        kept = nominator.rows
        while True:
            if kept is None or not kept.fits(snapshot):
                kept = cls(snapshot)
            kept.sync(nominator, snapshot)
            if kept.fits(snapshot):
                nominator.rows = kept
                return kept

    def fits(self, snapshot: Snapshot) -> bool:
        return (
            snapshot.table is self.table
            and snapshot.node_indices() is self.nodes
            and int(snapshot.free.shape[1]) == self.width
        )

    def sync(self, nominator: PodNominator, snapshot: Snapshot) -> None:
        changed = nominator.changed_since(self.position) if self.position >= 0 else None
        self.position = nominator.journal_end
        if changed is None:
            for key in list(self.at):
                self._drop(key)
            for key, node, info in nominator.nominations():
                self._set(key, node, info, snapshot)
            return
        for key in dict.fromkeys(changed):
            now = nominator.nomination(key)
            if now is None:
                self._drop(key)
            else:
                self._set(key, now[0], now[1], snapshot)

    def select(
        self, snapshot: Snapshot, pod: Pod, priority: int
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """The slot and requested row of each pod that ``pod`` must count as nominated on
        its node (:meth:`counted`), less those the snapshot holds already (an assumed pod
        is counted there); None when none is left."""
        placed, keys = snapshot.pod_node_index, self.keys
        kept = [row for row in self.counted(pod, priority) if placed(cast(str, keys[row])) is None]
        if not kept:
            return None
        at = np.asarray(kept, dtype=np.int64)
        return self.slot[at], self.rows[at]

    def by_slot(self, pod: Pod, priority: int) -> dict[int, list[PodInfo]]:
        """The PodInfos :meth:`counted` for ``pod`` by node slot (nodes with none left
        out; kept for the next question about the same pod and nominations: do not
        change the answer)."""
        asked = (self.position, pod.key, pod.metadata.uid, priority)
        if self._asked == asked:
            return self._by_slot
        rows = self.counted(pod, priority)
        found: dict[int, list[PodInfo]] = {}
        infos = self.infos
        for row, slot in zip(rows, self.slot[rows].tolist(), strict=True):
            found.setdefault(slot, []).append(cast(PodInfo, infos[row]))
        self._asked, self._by_slot = asked, found
        return found

    def counted(self, pod: Pod, priority: int) -> list[int]:
        """The rows of the pods ``pod`` must count as nominated on their nodes (kube's
        addGENominatedPods: priority >= ``priority``, not ``pod`` itself by key or uid),
        on nodes the snapshot holds."""
        n = len(self.keys)
        if not n:
            return []
        mask = self.live[:n] & (self.priority[:n] >= priority)
        own = self.at.get(pod.key)
        if own is not None:
            mask[own] = False
        for row in self.uid_rows.get(pod.metadata.uid, ()):
            mask[row] = False
        return cast(list[int], mask.nonzero()[0].tolist())

    def _set(self, key: str, node: str, info: PodInfo, snapshot: Snapshot) -> None:
        row = self.at.get(key)
        if row is not None:
            if self.infos[row] is info and self.node_names[row] == node:
                return
            self._drop(key)
        requested = snapshot.usage.requested_row(info)
        if len(requested) != self.width:
            return  # a new column: the caller starts a new layout
        row = self._new_row()
        self.at[key] = row
        self.keys[row], self.infos[row], self.node_names[row] = key, info, node
        self.uid_rows.setdefault(info.uid, set()).add(row)
        slot = snapshot.get_index(node)
        self.live[row] = slot is not None
        self.slot[row] = -1 if slot is None else slot
        self.priority[row] = info.priority
        self.rows[row] = requested

    def _drop(self, key: str) -> None:
        row = self.at.pop(key, None)
        if row is None:
            return
        info = self.infos[row]
        assert info is not None
        rows = self.uid_rows[info.uid]
        rows.discard(row)
        if not rows:
            del self.uid_rows[info.uid]
        self.keys[row] = self.infos[row] = None
        self.live[row] = False
        self.free_rows.append(row)

    def _new_row(self) -> int:
        if self.free_rows:
            return self.free_rows.pop()
        row = len(self.keys)
        self.keys.append(None)
        self.infos.append(None)
        self.node_names.append("")
        if row == self.slot.size:  # full: every array doubles
            self.slot = np.concatenate([self.slot, np.full(row, -1, dtype=np.int64)])
            self.priority = np.concatenate([self.priority, np.zeros(row, dtype=np.int64)])
            self.live = np.concatenate([self.live, np.zeros(row, dtype=bool)])
            self.rows = np.concatenate([self.rows, np.zeros((row, self.width), dtype=np.int64)])
        return row
