"""kube's nominator: pods that preemption nominated to a node and that are not bound yet.

One ``PodNominator`` per worker, in the listers its profiles' Handle carries
(framework/listers.py): the worker's local cache keeps it in step with pod events, the
filters with nominated pods and DefaultPreemption read it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from distsched.framework.podinfo import PodInfo
from distsched.model.objects import Pod

if TYPE_CHECKING:
    from distsched.framework.nominated_rows import NominatedRows


class PodNominator:
    """Pods that preemption nominated to a node (status.nominatedNodeName) and that are
    not bound yet: kube's nominator. The scheduling worker keeps it in step with pod
    events (add/update with the new status, delete when bound or deleted)."""

    def __init__(self) -> None:
        self._by_node: dict[str, dict[str, PodInfo]] = {}
        self._node_of: dict[str, str] = {}
        self._version = 0
        # What framework.what_if derived from the nominations last (its own key inside).
        self.derived: tuple[object, ...] | None = None
        # The nominations as arrays, kept up to date from the journal below
        # (NominatedRows.current).
        self.rows: NominatedRows | None = None
        # The keys whose nomination came, went or moved, in order (see changed_since).
        self._journal: list[str] = []
        self._journal_base = 0  # how many entries were dropped before _journal[0]

    @property
    def version(self) -> int:
        """Changes whenever a nomination comes, goes or moves."""
        return self._version

    def __len__(self) -> int:
        return len(self._node_of)

    def add(self, pod: Pod, info: PodInfo | None = None) -> None:
        """Record ``pod`` under its nominatedNodeName (none or bound: forget it)."""
        self.delete(pod.key)
        node = pod.status.nominated_node_name
        if not node or pod.spec.node_name:
            return
        self._changed(pod.key)
        self._by_node.setdefault(node, {})[pod.key] = info if info is not None else PodInfo.of(pod)
        self._node_of[pod.key] = node

    def delete(self, pod_key: str) -> None:
        node = self._node_of.pop(pod_key, None)
        if node is None:
            return
        self._changed(pod_key)
        pods = self._by_node[node]
        pods.pop(pod_key, None)
        if not pods:
            del self._by_node[node]

    def _changed(self, pod_key: str) -> None:
        self._version += 1
        if len(self._journal) >= _JOURNAL_LENGTH:
            self._journal_base += len(self._journal)
            self._journal = []
        self._journal.append(pod_key)

    @property
    def journal_end(self) -> int:
        """The position after the journal's last entry (see :meth:`changed_since`)."""
        return self._journal_base + len(self._journal)

    def changed_since(self, position: int) -> list[str] | None:
        """The keys of the pods whose nomination came, went or moved since the journal
        was at ``position`` (:attr:`journal_end` then), in order and possibly repeated;
        None when those entries were dropped (read every nomination again)."""
        if position < self._journal_base:
            return None
        return self._journal[position - self._journal_base :]

    def nomination(self, pod_key: str) -> tuple[str, PodInfo] | None:
        """The node ``pod_key`` is nominated to and its PodInfo (None: not nominated)."""
        node = self._node_of.get(pod_key)
        return None if node is None else (node, self._by_node[node][pod_key])

    def nominations(self) -> list[tuple[str, str, PodInfo]]:
        """(pod key, node, PodInfo) of every nominated pod."""
        return [
            (key, node, info) for node, pods in self._by_node.items() for key, info in pods.items()
        ]

    def node_names(self) -> list[str]:
        return list(self._by_node)

    def has_pods_on(self, node_name: str) -> bool:
        return node_name in self._by_node

    def pods_for_node(self, node_name: str) -> list[PodInfo]:
        return list(self._by_node.get(node_name, {}).values())


# Journal entries kept: a reader further behind reads every nomination again.
_JOURNAL_LENGTH = 4096


def nominated_to_add(
    nominator: PodNominator | None, pod: Pod, priority: int, node_name: str
) -> list[PodInfo]:
    """kube's addGENominatedPods selection: pods nominated to the node with priority
    >= the pod's, other than the pod itself."""
    if nominator is None or not len(nominator):
        return []
    uid = pod.metadata.uid
    key = pod.key
    return [
        info
        for info in nominator.pods_for_node(node_name)
        if info.priority >= priority and info.uid != uid and info.key != key
    ]
