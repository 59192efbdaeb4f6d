"""Which pods are on which node: the pod lists plugins read, parked and deferred pods.

Pods are kept per node slot as ``PodInfo`` (key ``namespace/name``), plus the cluster-wide
subsets with pod (anti-)affinity that the inter-pod plugins walk, and observers told of
every pod put on or taken off a node (indexes kept outside the snapshot:
plugins/helpers/pod_index.py). A pod whose node is not (or no longer) in the table is
parked until the node appears, like kube's cache keeps a NodeInfo without a Node.

Placing a pod charges its requests and host ports to the usage part, unless the usage
comes from the ledger (then ``usage`` is None and placement feeds only the pod lists).

Deferred pods. A worker's snapshot takes resources from the ledger, so most pods other
workers bind matter to nobody until a decision reads pod lists. ``defer_pod`` places a
pod by key with a loader instead of a ``PodInfo``; it is parsed (materialized) when
something reads the pods of its node (``pods_on``, ``pod_info``) or of every node
(``iter_pods``, ``materialize``; the PodIndex's label queries), in its place in the
node's order, so every reader sees exactly what ``add_pod`` would have shown. The caller
must defer only pods without pod (anti-)affinity: ``pods_with_affinity`` and
``pods_with_required_anti_affinity`` (and the PodIndex's term groups built from them)
are complete without materializing anything. A deferred pod is counted by nothing
(requests, ports, non-zero requests all come from the ledger in that mode) until then.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from functools import partial
from typing import cast

import numpy as np

from distsched.framework.podinfo import PodInfo
from distsched.framework.snapshot.table import NodeTable
from distsched.framework.snapshot.usage import Usage
from distsched.model.objects import Pod

log = logging.getLogger(__name__)


class DeferredPod(partial["Pod | None"]):
    """A pod placed on a node but not parsed yet: ``load()`` gives it when a reader needs
    it (None: it cannot be had, and it is dropped). See "Deferred pods" above. A partial:
    ``DeferredPod(loader, *args)`` is one object where a loader bound to its arguments and
    a wrapper around it were two (a worker defers every other worker's bound pod)."""

    __slots__ = ()

    def load(self) -> Pod | None:
        return self()


# What a node's pod dict holds: parsed pods, and deferred ones until they are read.
_Placed = PodInfo | DeferredPod


class PodPlacement:
    def __init__(self, table: NodeTable, usage: Usage | None) -> None:
        self._table = table
        self._usage = usage
        self._pods: list[dict[str, _Placed]] = [{} for _ in range(table.capacity)]
        self._pod_node: dict[str, int] = {}
        self._parked: dict[str, dict[str, _Placed]] = {}  # node name -> pods awaiting it
        # pod key -> the node it is parked for (so that removing a pod looks up one
        # dict: pods listed before their nodes park by the thousand)
        self._parked_on: dict[str, str] = {}
        # Slots that may hold deferred pods (a superset: emptied as they materialize).
        self._deferred_slots: set[int] = set()
        self.pods_with_affinity: dict[str, PodInfo] = {}
        self.pods_with_required_anti_affinity: dict[str, PodInfo] = {}
        # Called as ``observer(slot, info, +1 | -1)`` whenever a parsed pod is placed on
        # or taken off a node.
        self.pod_observers: list[Callable[[int, PodInfo, int], None]] = []
        # "namespace/claim" -> how many parsed pods on the table's nodes use the
        # PersistentVolumeClaim (kube's PVCRefCounts summed over nodes: StorageInfos'
        # IsPVCUsedByPods, which VolumeRestrictions reads for ReadWriteOncePod claims).
        self.claim_users: dict[str, int] = {}

    # ------------------------------------------------------------------ reads
    def pods_on(self, index: int) -> dict[str, PodInfo]:
        """Pods (assigned or assumed) on the node, by ``namespace/name`` (read-only)."""
        if index in self._deferred_slots:
            self._materialize(index)
        return cast(dict[str, PodInfo], self._pods[index])

    def pod_node_index(self, pod_key: str) -> int | None:
        """The slot of the pod's node, deferred pods included (nothing is parsed)."""
        return self._pod_node.get(pod_key)

    def pod_info(self, pod_key: str) -> PodInfo | None:
        index = self._pod_node.get(pod_key)
        return None if index is None else self.pods_on(index).get(pod_key)

    def iter_pods(self, *, materialize: bool = True) -> Iterator[tuple[int, PodInfo]]:
        """Every pod placed on a node in the table, with the node's slot; without
        ``materialize``, only the pods parsed so far (what pod observers have seen)."""
        if materialize:
            self.materialize()
        for index in self._table.node_indices():
            for info in self._pods[index].values():
                if type(info) is not DeferredPod:
                    yield int(index), cast(PodInfo, info)

    @property
    def has_deferred(self) -> bool:
        """Whether some node may hold pods not parsed yet."""
        return bool(self._deferred_slots)

    def materialize(self) -> None:
        """Parse every deferred pod on the table's nodes (see "Deferred pods")."""
        for index in sorted(self._deferred_slots):
            self._materialize(index)

    def _materialize(self, index: int) -> None:
        pods = self._pods[index]
        for key, entry in list(pods.items()):
            if type(entry) is not DeferredPod:
                continue
            pod = cast(DeferredPod, entry).load()
            if pod is None:
                log.warning("deferred pod %s could not be loaded; dropped", key)
                del pods[key]
                del self._pod_node[key]
                continue
            info = PodInfo.of(pod)
            pods[key] = info  # in place: the node keeps the order add_pod would have given
            self._count(index, info)
        self._deferred_slots.discard(index)  # last: a loader that raises leaves the rest

    # ------------------------------------------------------------------ pod mutations
    def defer_pod(self, pod_key: str, node_name: str, load: Callable[[], Pod | None]) -> None:
        """Place a pod on ``node_name`` without parsing it: ``load`` gives it when a reader
        needs it (see "Deferred pods"; the pod must not declare pod (anti-)affinity).
        Replaces the pod wherever it was, like :meth:`add_pod`."""
        self.defer_pods([(pod_key, node_name, load)])

    def defer_pods(self, placed: list[tuple[str, str, Callable[[], Pod | None]]]) -> None:
        """:meth:`defer_pod` for each ``(pod key, node name, load)``, in order (the
        bindings of a batch entry of the event stream come in one call); a ``load`` that
        is a :class:`DeferredPod` already is placed as it is."""
        pod_node, pods, parked_on = self._pod_node, self._pods, self._parked_on
        get_index, deferred_slots = self._table.index_lookup(), self._deferred_slots
        touched: list[int] = []
        for pod_key, node_name, load in placed:
            if pod_key in pod_node or pod_key in parked_on:
                self.remove_pod(pod_key)
            entry = load if type(load) is DeferredPod else DeferredPod(load)
            index = get_index(node_name)
            if index is None:
                self._park(node_name, pod_key, entry)
                continue
            pods[index][pod_key] = entry
            pod_node[pod_key] = index
            deferred_slots.add(index)
            touched.append(index)
        self._table.touch_many(np.unique(np.asarray(touched, dtype=np.int64)))

    def holds_as(self, pod_key: str, node_name: str, pod: Pod) -> bool:
        """Whether ``pod`` itself (this very object, parsed) is placed on ``node_name``
        under ``pod_key``: an assumed pod, whose binding to that node changes nothing
        the snapshot holds (kube's cache confirms an assumed pod the same way)."""
        index = self._pod_node.get(pod_key)
        if index is None or self._table.get_index(node_name) != index:
            return False
        entry = self._pods[index].get(pod_key)
        return type(entry) is PodInfo and cast(PodInfo, entry).pod is pod

    def add_pod(self, pod: Pod, node_name: str = "", *, info: PodInfo | None = None) -> PodInfo:
        """Account ``pod`` (assigned or assumed) on ``node_name`` (default: spec.nodeName).

        Adding a pod that is already present replaces it (an assumed pod confirmed by its
        binding, or a pod moved elsewhere).
        """
        node_name = node_name or pod.spec.node_name
        if not node_name:
            raise ValueError(f"pod {pod.key} has no node to be added to")
        if info is None:
            info = PodInfo.of(pod)
        self.remove_pod(info.key)
        index = self._table.get_index(node_name)
        if index is None:
            self._park(node_name, info.key, info)
            return info
        self._place(index, info)
        self._table.touch(index)
        return info

    def remove_pod(self, pod_key: str) -> PodInfo | None:
        """Forget the pod wherever it is; returns what was removed (None if unknown, or
        deferred: never parsed)."""
        index = self._pod_node.get(pod_key)
        if index is not None:
            info = self._unplace(index, pod_key)
            self._table.touch(index)
            return None if type(info) is DeferredPod else cast(PodInfo, info)
        node_name = self._parked_on.pop(pod_key, None)
        if node_name is None:
            return None
        parked = self._parked[node_name]
        found = parked.pop(pod_key)
        if not parked:
            del self._parked[node_name]
        return None if type(found) is DeferredPod else cast(PodInfo, found)

    def _park(self, node_name: str, pod_key: str, entry: _Placed) -> None:
        self._parked.setdefault(node_name, {})[pod_key] = entry
        self._parked_on[pod_key] = node_name

    # ------------------------------------------------------------------ node lifecycle
    def node_added(self, index: int, node_name: str) -> None:
        """The node now holds slot ``index``: the pods parked for it are placed there."""
        parked = self._parked.pop(node_name, None)
        if not parked:
            return
        for key, entry in parked.items():
            del self._parked_on[key]
            if type(entry) is DeferredPod:
                self._pods[index][key] = entry
                self._pod_node[key] = index
                self._deferred_slots.add(index)
            else:
                self._place(index, cast(PodInfo, entry))

    def node_removed(self, index: int, node_name: str) -> None:
        """The node leaves slot ``index``: its pods stay parked until they are removed or
        it comes back."""
        pods = self._pods[index]
        if pods:
            for key in list(pods):
                self._park(node_name, key, self._unplace(index, key))
        self._deferred_slots.discard(index)

    def grow(self, capacity: int) -> None:
        self._pods.extend({} for _ in range(capacity - len(self._pods)))

    # ------------------------------------------------------------------ bookkeeping
    def _place(self, index: int, info: PodInfo) -> None:
        self._pods[index][info.key] = info
        self._pod_node[info.key] = index
        self._count(index, info)

    def _count(self, index: int, info: PodInfo) -> None:
        """A parsed pod now on the node: usage, affinity subsets, observers."""
        if self._usage is not None:
            self._usage.charge(index, info, 1)
        if info.has_affinity:
            self.pods_with_affinity[info.key] = info
        if info.has_required_anti_affinity:
            self.pods_with_required_anti_affinity[info.key] = info
        if info.pod.spec.volumes:
            self._count_claims(info, 1)
        for observer in self.pod_observers:
            observer(index, info, 1)

    def _count_claims(self, info: PodInfo, sign: int) -> None:
        users = self.claim_users
        for volume in info.pod.spec.volumes:
            if volume.claim_name:
                key = f"{info.namespace}/{volume.claim_name}"
                count = users.get(key, 0) + sign
                if count > 0:
                    users[key] = count
                else:
                    users.pop(key, None)

    def _unplace(self, index: int, pod_key: str) -> _Placed:
        info = self._pods[index].pop(pod_key)
        del self._pod_node[pod_key]
        if type(info) is DeferredPod:
            return info
        parsed = cast(PodInfo, info)
        if self._usage is not None:
            self._usage.charge(index, parsed, -1)
        self.pods_with_affinity.pop(pod_key, None)
        self.pods_with_required_anti_affinity.pop(pod_key, None)
        if parsed.pod.spec.volumes:
            self._count_claims(parsed, -1)
        for observer in self.pod_observers:
            observer(index, parsed, -1)
        return info
