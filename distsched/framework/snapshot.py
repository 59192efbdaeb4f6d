"""A scheduling worker's local, vectorized view of every node and the pods on them.

Nodes live in slots ``0..capacity-1``. A node keeps its slot for its whole life; removing
a node frees the slot (``valid[i]`` becomes False) and a later ``add_node`` reuses the
lowest free slot. Arrays are therefore defined over slots, and an entry for a free slot
is meaningless: callers index them with node indices from ``node_indices()`` (or any
other array of valid slots) and never look at free ones.

Per-slot numpy arrays (capacity grows by doubling, so hold on to them only within one
scheduling cycle):

=====================  ===========  ========================================================
array                  shape/dtype  holds
=====================  ===========  ========================================================
allocatable            [N, R] i64   node.status.allocatable per resource column
requested              [N, R] i64   sum of requests of the pods on the node; the ``pods``
                                    column counts the pods
free                   [N, R] i64   allocatable - requested (kept up to date, for Filter)
nonzero_requested      [N, 2] i64   cpu, memory with 100m / 200Mi defaults (scoring only;
                                    with ``usage_from_ledger``, from the ledger too)
unschedulable          [N] bool     node.spec.unschedulable
valid                  [N] bool     the slot holds a node
generation             [N] i64      bumped (from one snapshot-wide counter) on each change
=====================  ===========  ========================================================

Resource columns: 0 cpu (millicores), 1 memory (bytes), 2 ephemeral-storage (bytes),
3 pods (count), then extended resources in order of first appearance (``column``). The
[N, R] arrays are column-major so that ``array[:, col]`` is contiguous: plugins gather
one resource for many nodes (``snapshot.free[:, col][indices]``).

Besides the arrays the snapshot keeps inverted indexes (label key -> value -> slots,
taint -> slots, host port -> slots, image -> slot -> size) from which it builds boolean
masks on demand. Masks derived from labels are cached until a label of some node changes
(node labels change rarely; pods are placed thousands of times per second).

Pods are kept per node as ``PodInfo`` (key ``namespace/name``), plus the cluster-wide
subsets with pod (anti-)affinity that the inter-pod plugins walk. A pod whose node is
not (or no longer) in the snapshot is parked until the node appears, like kube's cache
keeps a NodeInfo without a Node.

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

import heapq
import logging
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from typing import Any, cast

import numpy as np

from distsched.framework.podinfo import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    PODS,
    PodInfo,
)
from distsched.model import HostPort
from distsched.model.objects import Node, Pod, Taint
from distsched.model.quantity import MAX_AMOUNT, format_quantity, over_limit

CPU_COL = 0
MEMORY_COL = 1
EPHEMERAL_STORAGE_COL = 2
PODS_COL = 3
_BASE_RESOURCES = (CPU, MEMORY, EPHEMERAL_STORAGE, PODS)

_EMPTY_INDEX = np.zeros(0, dtype=np.int64)
_LABEL_CACHE_SIZE = 8192

log = logging.getLogger(__name__)


class DeferredPod:
    """A pod placed on a node but not parsed yet: ``load()`` gives it when a reader needs
    it (None: it cannot be had, and it is dropped). See "Deferred pods" above."""

    __slots__ = ("load",)

    def __init__(self, load: Callable[[], Pod | None]) -> None:
        self.load = load


# What a node's pod dict holds: parsed pods, and deferred ones until they are read.
_Placed = PodInfo | DeferredPod


class Snapshot:
    def __init__(self, *, capacity: int = 256, usage_from_ledger: bool = False) -> None:
        capacity = max(1, capacity)
        # In a scheduling worker the Redis ledger is the truth for requested resources,
        # pod counts, host ports and scoring's non-zero requests (it also holds other
        # workers' assumed pods): pods added here then only feed the pod lists, and
        # set_usage/add_usage keep requested/free/ports/nonzero_requested.
        self.usage_from_ledger = usage_from_ledger
        self.resource_names: list[str] = list(_BASE_RESOURCES)
        self.resource_index: dict[str, int] = {n: i for i, n in enumerate(_BASE_RESOURCES)}
        r = len(self.resource_names)
        self.allocatable = np.zeros((capacity, r), dtype=np.int64, order="F")
        self.requested = np.zeros((capacity, r), dtype=np.int64, order="F")
        self.free = np.zeros((capacity, r), dtype=np.int64, order="F")
        self.nonzero_requested = np.zeros((capacity, 2), dtype=np.int64, order="F")
        self.unschedulable = np.zeros(capacity, dtype=bool)
        self.valid = np.zeros(capacity, dtype=bool)
        self.generation = np.zeros(capacity, dtype=np.int64)
        # Bumped on every mutation; caches outside the snapshot may key on it.
        self.version = 0
        # Bumped whenever the node set or any node's labels change.
        self.label_version = 0
        # Bumped whenever the set of distinct taints or the nodes carrying one change.
        self.taint_version = 0
        self.num_unschedulable = 0

        self._nodes: list[Node | None] = [None] * capacity
        self._index_of: dict[str, int] = {}
        self._free: list[int] = list(range(capacity))  # a heap: the lowest free slot first
        self._labels: list[dict[str, str]] = [{} for _ in range(capacity)]
        self._label_index: dict[str, dict[str, set[int]]] = {}
        self._taints: list[tuple[Taint, ...]] = [() for _ in range(capacity)]
        self._taint_index: dict[Taint, set[int]] = {}
        self._ports: list[dict[HostPort, int]] = [{} for _ in range(capacity)]
        self._port_any_ip: dict[tuple[str, int], set[int]] = {}
        self._port_exact: dict[HostPort, set[int]] = {}
        self._images: list[dict[str, int]] = [{} for _ in range(capacity)]
        self._image_nodes: dict[str, dict[int, int]] = {}
        self._pods: list[dict[str, _Placed]] = [{} for _ in range(capacity)]
        self._pod_node: dict[str, int] = {}
        self._parked: dict[str, dict[str, _Placed]] = {}  # node name -> pods awaiting it
        # Slots that may hold deferred pods (a superset: emptied as they materialize).
        self._deferred_slots: set[int] = set()
        self.pods_with_affinity: dict[str, PodInfo] = {}
        self.pods_with_required_anti_affinity: dict[str, PodInfo] = {}
        # Called as ``observer(slot, info, +1 | -1)`` whenever a pod is placed on or taken
        # off a node: indexes kept outside the snapshot (plugins/helpers/pod_index.py).
        self.pod_observers: list[Callable[[int, PodInfo, int], None]] = []

        self._node_indices: np.ndarray | None = None
        self._label_cache: dict[Hashable, Any] = {}
        self._taint_cache: dict[Taint, np.ndarray] = {}
        self._image_cache: dict[str, np.ndarray] = {}
        self._all_have: dict[int, bool] = {}

    # ------------------------------------------------------------------ basic queries
    @property
    def capacity(self) -> int:
        return len(self._nodes)

    @property
    def num_nodes(self) -> int:
        return len(self._index_of)

    def __len__(self) -> int:
        return len(self._index_of)

    def __contains__(self, node_name: object) -> bool:
        return node_name in self._index_of

    def index_of(self, node_name: str) -> int:
        """The slot of ``node_name``; KeyError when the node is not in the snapshot."""
        return self._index_of[node_name]

    def get_index(self, node_name: str) -> int | None:
        return self._index_of.get(node_name)

    def node(self, index: int) -> Node:
        node = self._nodes[index]
        if node is None:
            raise KeyError(f"no node in slot {index}")
        return node

    def node_name(self, index: int) -> str:
        return self.node(index).metadata.name

    def node_by_name(self, node_name: str) -> Node:
        return self.node(self._index_of[node_name])

    def node_indices(self) -> np.ndarray:
        """Slots holding a node, ascending: the order the scheduler walks nodes in."""
        if self._node_indices is None:
            self._node_indices = np.flatnonzero(self.valid)
            self._node_indices.flags.writeable = False
        return self._node_indices

    def indices_of(self, node_names: Iterable[str]) -> np.ndarray:
        """Sorted slots of the named nodes that are in the snapshot (others are dropped)."""
        found = [self._index_of[n] for n in node_names if n in self._index_of]
        found.sort()
        return np.array(found, dtype=np.int64) if found else _EMPTY_INDEX

    def labels(self, index: int) -> dict[str, str]:
        return self._labels[index]

    def taints(self, index: int) -> tuple[Taint, ...]:
        return self._taints[index]

    def host_ports(self, index: int) -> dict[HostPort, int]:
        """Host ports in use on the node, with the number of pods holding each."""
        return self._ports[index]

    def images(self, index: int) -> dict[str, int]:
        """Image name -> size in bytes, for every name of every image on the node."""
        return self._images[index]

    def image_num_nodes(self, image: str) -> int:
        return len(self._image_nodes.get(image, ()))

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
        """Every pod placed on a node in the snapshot, with the node's slot; without
        ``materialize``, only the pods parsed so far (what pod observers have seen)."""
        if materialize:
            self.materialize()
        for index in self.node_indices():
            for info in self._pods[index].values():
                if type(info) is not DeferredPod:
                    yield int(index), cast(PodInfo, info)

    @property
    def has_deferred(self) -> bool:
        """Whether some node may hold pods not parsed yet."""
        return bool(self._deferred_slots)

    def materialize(self) -> None:
        """Parse every deferred pod on the snapshot's nodes (see "Deferred pods")."""
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

    # ------------------------------------------------------------------ resources
    def column(self, resource: str) -> int:
        """The column of ``resource``, adding one (zero everywhere) if it is new."""
        col = self.resource_index.get(resource)
        if col is None:
            col = len(self.resource_names)
            self.resource_names.append(resource)
            self.resource_index[resource] = col
            self._all_have.clear()
            self.allocatable = _add_column(self.allocatable)
            self.requested = _add_column(self.requested)
            self.free = _add_column(self.free)
        return col

    def all_nodes_have(self, col: int) -> bool:
        """Whether every node has a positive allocatable amount in column ``col`` (lets
        scorers skip their per-node "resource absent" handling)."""
        answer = self._all_have.get(col)
        if answer is None:
            answer = bool((self.allocatable[:, col][self.node_indices()] > 0).all())
            self._all_have[col] = answer
        return answer

    def request_vector(self, requests: dict[str, int]) -> tuple[np.ndarray, tuple[str, ...]]:
        """``requests`` as a row over the current columns, plus names with no column.

        Resources no node has ever mentioned get no column (a read never reshapes the
        arrays); the caller treats a positive request for one as unsatisfiable.
        """
        vector = np.zeros(len(self.resource_names), dtype=np.int64)
        unknown: list[str] = []
        for name, amount in requests.items():
            col = self.resource_index.get(name)
            if col is None:
                if amount > 0:
                    unknown.append(name)
            elif col != PODS_COL:
                vector[col] = amount
        return vector, tuple(unknown)

    # ------------------------------------------------------------------ node mutations
    @staticmethod
    def check_node(node: Node) -> None:
        """ValueError when an allocatable amount of ``node`` exceeds MAX_AMOUNT (what the
        ledger can account; manifests are refused such amounts, objects built in Python
        are not): free = allocatable - requested must never overflow int64 either."""
        for resource, amount in node.status.allocatable.items():
            if amount > MAX_AMOUNT:
                shown = format_quantity(amount, resource)
                raise ValueError(f"status.allocatable.{resource}: {over_limit(shown, resource)}")

    def add_node(self, node: Node) -> int:
        """Add ``node`` (or update it when its name is known); returns its slot."""
        self.check_node(node)
        name = node.metadata.name
        if name in self._index_of:
            return self.update_node(node)
        if not self._free:
            self._grow(self.capacity * 2)
        index = heapq.heappop(self._free)
        self._index_of[name] = index
        self._nodes[index] = node
        self.valid[index] = True
        self._set_node_fields(index, node, None)
        self._node_indices = None
        parked = self._parked.pop(name, None)
        if parked:
            self._place_parked(index, parked)
        self._touch(index)
        return index

    def update_node(self, node: Node) -> int:
        self.check_node(node)
        index = self._index_of[node.metadata.name]
        old = self._nodes[index]
        self._nodes[index] = node
        self._set_node_fields(index, node, old)
        self._touch(index)
        return index

    def remove_node(self, node_name: str) -> int:
        """Remove the node; its pods stay parked until they are removed or it comes back."""
        index = self._index_of.pop(node_name)
        self._set_node_fields(index, None, self._nodes[index])
        pods = self._pods[index]
        if pods:
            parked = self._parked.setdefault(node_name, {})
            for key in list(pods):
                info = self._unplace(index, key)
                parked[key] = info
        self._deferred_slots.discard(index)
        self._nodes[index] = None
        self.valid[index] = False
        self.allocatable[index] = 0
        self.requested[index] = 0
        self.free[index] = 0
        self._all_have.clear()
        self.nonzero_requested[index] = 0
        self.num_unschedulable -= int(self.unschedulable[index])
        self.unschedulable[index] = False
        heapq.heappush(self._free, index)
        self._node_indices = None
        self._touch(index)
        return index

    def _set_node_fields(self, index: int, node: Node | None, old: Node | None) -> None:
        new_labels = node.metadata.labels if node is not None else {}
        old_labels = self._labels[index]
        if new_labels != old_labels or (node is None) != (old is None):
            self._reindex_labels(index, old_labels, new_labels)
        new_taints = node.spec.taints if node is not None else ()
        if new_taints != self._taints[index]:
            self._reindex_taints(index, self._taints[index], new_taints)
        new_images = _image_sizes(node) if node is not None else {}
        if new_images != self._images[index]:
            self._reindex_images(index, self._images[index], new_images)
        if node is None:
            return
        self._all_have.clear()
        self.num_unschedulable += int(node.spec.unschedulable) - int(self.unschedulable[index])
        self.unschedulable[index] = node.spec.unschedulable
        columns = [(self.column(r), amount) for r, amount in node.status.allocatable.items()]
        self.allocatable[index] = 0
        for col, amount in columns:
            self.allocatable[index, col] = amount
        self.free[index] = self.allocatable[index] - self.requested[index]

    def _reindex_labels(self, index: int, old: dict[str, str], new: dict[str, str]) -> None:
        for key, value in old.items():
            if new.get(key) != value:
                values = self._label_index[key]
                values[value].discard(index)
                if not values[value]:
                    del values[value]
                if not values:
                    del self._label_index[key]
        for key, value in new.items():
            if old.get(key) != value:
                self._label_index.setdefault(key, {}).setdefault(value, set()).add(index)
        self._labels[index] = dict(new)
        self._label_cache.clear()
        self.label_version += 1

    def _reindex_taints(self, index: int, old: tuple[Taint, ...], new: tuple[Taint, ...]) -> None:
        for taint in set(old) - set(new):
            nodes = self._taint_index[taint]
            nodes.discard(index)
            if not nodes:
                del self._taint_index[taint]
            self._taint_cache.pop(taint, None)
        for taint in set(new) - set(old):
            self._taint_index.setdefault(taint, set()).add(index)
            self._taint_cache.pop(taint, None)
        self._taints[index] = tuple(new)
        self.taint_version += 1

    def _reindex_images(self, index: int, old: dict[str, int], new: dict[str, int]) -> None:
        for image in old:
            if image not in new:
                nodes = self._image_nodes[image]
                nodes.pop(index, None)
                if not nodes:
                    del self._image_nodes[image]
                self._image_cache.pop(image, None)
        for image, size in new.items():
            if old.get(image) != size:
                self._image_nodes.setdefault(image, {})[index] = size
                self._image_cache.pop(image, None)
        self._images[index] = new

    def _grow(self, capacity: int) -> None:
        old = self.capacity

        def grow(array: np.ndarray) -> np.ndarray:
            grown = np.zeros((capacity, *array.shape[1:]), dtype=array.dtype, order="F")
            grown[:old] = array
            return grown

        self.allocatable = grow(self.allocatable)
        self.requested = grow(self.requested)
        self.free = grow(self.free)
        self.nonzero_requested = grow(self.nonzero_requested)
        self.unschedulable = grow(self.unschedulable)
        self.valid = grow(self.valid)
        self.generation = grow(self.generation)
        extra = capacity - old
        self._nodes.extend([None] * extra)
        self._labels.extend({} for _ in range(extra))
        self._taints.extend(() for _ in range(extra))
        self._ports.extend({} for _ in range(extra))
        self._images.extend({} for _ in range(extra))
        self._pods.extend({} for _ in range(extra))
        for slot in range(old, capacity):
            heapq.heappush(self._free, slot)
        self._label_cache.clear()
        self._taint_cache.clear()
        self._image_cache.clear()
        self._node_indices = None
        self.taint_version += 1

    def _touch(self, index: int) -> None:
        self.version += 1
        self.generation[index] = self.version

    # ------------------------------------------------------------------ pod mutations
    def defer_pod(self, pod_key: str, node_name: str, load: Callable[[], Pod | None]) -> None:
        """Place a pod on ``node_name`` without parsing it: ``load`` gives it when a reader
        needs it (see "Deferred pods"; the pod must not declare pod (anti-)affinity).
        Replaces the pod wherever it was, like :meth:`add_pod`."""
        self.remove_pod(pod_key)
        entry = DeferredPod(load)
        index = self._index_of.get(node_name)
        if index is None:
            self._parked.setdefault(node_name, {})[pod_key] = entry
            return
        self._pods[index][pod_key] = entry
        self._pod_node[pod_key] = index
        self._deferred_slots.add(index)
        self._touch(index)

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
        index = self._index_of.get(node_name)
        if index is None:
            self._parked.setdefault(node_name, {})[info.key] = info
            return info
        self._place(index, info)
        self._touch(index)
        return info

    def remove_pod(self, pod_key: str) -> PodInfo | None:
        """Forget the pod wherever it is; returns what was removed (None if unknown, or
        deferred: never parsed)."""
        index = self._pod_node.get(pod_key)
        if index is not None:
            info = self._unplace(index, pod_key)
            self._touch(index)
            return None if type(info) is DeferredPod else cast(PodInfo, info)
        for node_name, parked in self._parked.items():
            if pod_key in parked:
                found = parked.pop(pod_key)
                if not parked:
                    del self._parked[node_name]
                return None if type(found) is DeferredPod else cast(PodInfo, found)
        return None

    def update_pod(self, pod: Pod, node_name: str = "", *, info: PodInfo | None = None) -> PodInfo:
        return self.add_pod(pod, node_name, info=info)

    def _place(self, index: int, info: PodInfo) -> None:
        self._pods[index][info.key] = info
        self._pod_node[info.key] = index
        self._count(index, info)

    def _place_parked(self, index: int, parked: dict[str, _Placed]) -> None:
        for key, entry in parked.items():
            if type(entry) is DeferredPod:
                self._pods[index][key] = entry
                self._pod_node[key] = index
                self._deferred_slots.add(index)
            else:
                self._place(index, cast(PodInfo, entry))

    def _count(self, index: int, info: PodInfo) -> None:
        """A parsed pod now on the node: accounting, affinity subsets, observers."""
        self._account(index, info, 1)
        if info.has_affinity:
            self.pods_with_affinity[info.key] = info
        if info.has_required_anti_affinity:
            self.pods_with_required_anti_affinity[info.key] = info
        for observer in self.pod_observers:
            observer(index, info, 1)

    def _unplace(self, index: int, pod_key: str) -> _Placed:
        info = self._pods[index].pop(pod_key)
        del self._pod_node[pod_key]
        if type(info) is DeferredPod:
            return info
        parsed = cast(PodInfo, info)
        self._account(index, parsed, -1)
        self.pods_with_affinity.pop(pod_key, None)
        self.pods_with_required_anti_affinity.pop(pod_key, None)
        for observer in self.pod_observers:
            observer(index, parsed, -1)
        return info

    def _account(self, index: int, info: PodInfo, sign: int) -> None:
        if not self.usage_from_ledger:
            self._charge(index, info, sign)

    def _charge(self, index: int, info: PodInfo, sign: int) -> None:
        """requested/free (one pod, its requests), scoring's non-zero requests and host
        ports of one pod, +1 or -1."""
        self.nonzero_requested[index, 0] += sign * info.nonzero_cpu
        self.nonzero_requested[index, 1] += sign * info.nonzero_memory
        for resource, amount in info.requests.items():
            col = self.resource_index.get(resource)
            if col is None:
                col = self.column(resource)
            if col != PODS_COL:
                self.requested[index, col] += sign * amount
                self.free[index, col] -= sign * amount
        self.requested[index, PODS_COL] += sign
        self.free[index, PODS_COL] -= sign
        if info.host_ports:
            self._account_ports(index, info.host_ports, sign)

    def set_usage(
        self,
        index: int,
        requested: dict[str, int],
        ports: Iterable[tuple[str, str, int]],
        nonzero_extra: tuple[int, int] = (0, 0),
    ) -> None:
        """Replace the node's requested resources (``pods`` = pod count) and used host
        ports with absolute values from the ledger; scoring's non-zero cpu and memory are
        the requested ones plus ``nonzero_extra`` (what kube's 100m / 200Mi defaults add
        over the pods' requests)."""
        row = np.zeros(len(self.resource_names), dtype=np.int64)
        for resource, amount in requested.items():
            col = self.resource_index.get(resource)
            if col is None:
                col = self.column(resource)
                row = np.append(row, 0)
            row[col] = amount
        self.requested[index, :] = row
        self.free[index, :] = self.allocatable[index, :] - row
        self.nonzero_requested[index, 0] = row[CPU_COL] + nonzero_extra[0]
        self.nonzero_requested[index, 1] = row[MEMORY_COL] + nonzero_extra[1]
        wanted: dict[HostPort, int] = {}
        for port in ports:
            key = HostPort(*port)
            wanted[key] = wanted.get(key, 0) + 1
        current = dict(self._ports[index])
        if current != wanted:
            for port, count in current.items():
                self._account_ports(index, (port,) * count, -1)
            for port, count in wanted.items():
                self._account_ports(index, (port,) * count, 1)
        self._touch(index)

    def set_usages(
        self,
        indices: Sequence[int],
        requested: Sequence[Mapping[str, int]],
        nonzero_extra: Sequence[tuple[int, int]],
    ) -> None:
        """:meth:`set_usage` of many distinct nodes that hold no host port, at once (the
        ledger's change feed brings one usage per node another worker placed a pod on)."""
        count = len(indices)
        if not count:
            return
        width = len(self.resource_names)
        columns = self.resource_index
        table: list[list[int]] = []
        for amounts in requested:
            row = [0] * width
            for resource, amount in amounts.items():
                col = columns.get(resource)
                if col is None:  # rare: a resource no node has; widen every row
                    col = self.column(resource)
                    width = len(self.resource_names)
                    row.append(0)
                    for done in table:
                        done.append(0)
                row[col] = amount
            table.append(row)
        slots = np.fromiter(indices, dtype=np.int64, count=count)
        rows = np.array(table, dtype=np.int64).reshape(count, width)
        extra = np.array(nonzero_extra, dtype=np.int64).reshape(count, 2)
        self.requested[slots] = rows
        self.free[slots] = self.allocatable[slots] - rows
        self.nonzero_requested[slots, 0] = rows[:, CPU_COL] + extra[:, 0]
        self.nonzero_requested[slots, 1] = rows[:, MEMORY_COL] + extra[:, 1]
        for index in indices:
            if self._ports[index]:
                self._clear_ports(index)
        self.generation[slots] = np.arange(self.version + 1, self.version + count + 1)
        self.version += count

    def _clear_ports(self, index: int) -> None:
        for port, count in list(self._ports[index].items()):
            self._account_ports(index, (port,) * count, -1)

    def add_usage(self, index: int, info: PodInfo, sign: int = 1) -> None:
        """Charge (or with ``sign=-1`` refund) a pod this worker is placing, before the
        ledger confirms it; the next :meth:`set_usage` of the node supersedes it."""
        self._charge(index, info, sign)
        self._touch(index)

    def _account_ports(self, index: int, ports: tuple[HostPort, ...], sign: int) -> None:
        used = self._ports[index]
        for port in ports:
            count = used.get(port, 0) + sign
            if count > 0:
                used[port] = count
                if count == 1 and sign > 0:
                    self._port_exact.setdefault(port, set()).add(index)
                    self._port_any_ip.setdefault((port.protocol, port.port), set()).add(index)
                continue
            used.pop(port, None)
            exact = self._port_exact.get(port)
            if exact is not None:
                exact.discard(index)
                if not exact:
                    del self._port_exact[port]
            if not any((p.protocol, p.port) == (port.protocol, port.port) for p in used):
                nodes = self._port_any_ip.get((port.protocol, port.port))
                if nodes is not None:
                    nodes.discard(index)
                    if not nodes:
                        del self._port_any_ip[(port.protocol, port.port)]

    # ------------------------------------------------------------------ masks
    def _mask(self, slots: set[int] | dict[int, Any] | None) -> np.ndarray:
        mask = np.zeros(self.capacity, dtype=bool)
        if slots:
            mask[np.fromiter(slots, dtype=np.int64, count=len(slots))] = True
        return mask

    def label_cached(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """Memoize ``compute()`` until the next change of the node set or of any label.

        For masks and arrays derived from node labels only (node selectors, topology
        domains). ``key`` must identify the computation, e.g. ``("term", term)``.
        """
        cache = self._label_cache
        if key in cache:
            return cache[key]
        value = compute()
        if len(cache) >= _LABEL_CACHE_SIZE:  # unique selectors per pod must not grow it forever
            cache.clear()
        cache[key] = value
        return value

    def label_mask(self, key: str, value: str) -> np.ndarray:
        """bool[capacity]: nodes whose label ``key`` equals ``value``."""
        return self.label_cached(
            ("label", key, value),
            lambda: self._mask(self._label_index.get(key, {}).get(value)),
        )

    def label_keys(self) -> list[str]:
        """Every label key some node carries."""
        return [key for key, values in self._label_index.items() if values]

    def label_values(self, key: str) -> dict[str, set[int]]:
        """The inverted index of one label key: value -> slots (read-only)."""
        return self._label_index.get(key, {})

    def label_exists_mask(self, key: str) -> np.ndarray:
        """bool[capacity]: nodes that have label ``key``."""

        def compute() -> np.ndarray:
            mask = np.zeros(self.capacity, dtype=bool)
            for slots in self._label_index.get(key, {}).values():
                mask[np.fromiter(slots, dtype=np.int64, count=len(slots))] = True
            return mask

        return self.label_cached(("exists", key), compute)

    def label_int_values(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """(int64[capacity], bool[capacity]): label ``key`` parsed as an integer, and
        where that parse succeeded (Gt/Lt node selector operators)."""

        def compute() -> tuple[np.ndarray, np.ndarray]:
            values = np.zeros(self.capacity, dtype=np.int64)
            ok = np.zeros(self.capacity, dtype=bool)
            for text, slots in self._label_index.get(key, {}).items():
                parsed = _parse_int64(text)
                if parsed is None:
                    continue
                idx = np.fromiter(slots, dtype=np.int64, count=len(slots))
                values[idx] = parsed
                ok[idx] = True
            return values, ok

        return self.label_cached(("int", key), compute)

    def topology_domains(self, key: str) -> tuple[np.ndarray, list[str]]:
        """(int32[capacity], values): each node's domain id for topology key ``key``
        (-1 when the node lacks the label) and the domain values by id."""

        def compute() -> tuple[np.ndarray, list[str]]:
            ids = np.full(self.capacity, -1, dtype=np.int32)
            values = sorted(self._label_index.get(key, {}))
            for i, value in enumerate(values):
                slots = self._label_index[key][value]
                ids[np.fromiter(slots, dtype=np.int64, count=len(slots))] = i
            return ids, values

        return self.label_cached(("topology", key), compute)

    def distinct_taints(self) -> tuple[Taint, ...]:
        """Every distinct taint (key, value, effect) present on some node."""
        return tuple(self._taint_index)

    def taint_mask(self, taint: Taint) -> np.ndarray:
        """bool[capacity]: nodes carrying ``taint``."""
        mask = self._taint_cache.get(taint)
        if mask is None:
            mask = self._mask(self._taint_index.get(taint))
            self._taint_cache[taint] = mask
        return mask

    def port_conflict_slots(self, port: HostPort) -> set[int]:
        """Slots where a pod wanting ``port`` would conflict with a port already in use
        (a read-only view: do not mutate the returned set).

        Same rule as kube's HostPortInfo.CheckConflict: a wildcard 0.0.0.0 request clashes
        with that protocol/port on any address; a specific address clashes with itself
        and with 0.0.0.0.
        """
        if port.ip == "0.0.0.0":
            return self._port_any_ip.get((port.protocol, port.port), set())
        wildcard = HostPort("0.0.0.0", port.protocol, port.port)
        return self._port_exact.get(port, set()) | self._port_exact.get(wildcard, set())

    def image_sizes(self, image: str) -> np.ndarray:
        """int64[capacity]: size of ``image`` on each node, 0 where absent."""
        sizes = self._image_cache.get(image)
        if sizes is None:
            sizes = np.zeros(self.capacity, dtype=np.int64)
            nodes = self._image_nodes.get(image)
            if nodes:
                idx = np.fromiter(nodes.keys(), dtype=np.int64, count=len(nodes))
                sizes[idx] = np.fromiter(nodes.values(), dtype=np.int64, count=len(nodes))
            self._image_cache[image] = sizes
        return sizes


def _add_column(array: np.ndarray) -> np.ndarray:
    grown = np.zeros((array.shape[0], array.shape[1] + 1), dtype=array.dtype, order="F")
    grown[:, :-1] = array
    return grown


def _image_sizes(node: Node) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for image in node.status.images:
        for name in image.names:
            sizes[name] = image.size_bytes
    return sizes


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _parse_int64(text: str) -> int | None:
    # Go's strconv.ParseInt(s, 10, 64): optional sign, decimal digits, no spaces or '_'.
    body = text[1:] if text[:1] in "+-" else text
    if not body or not body.isascii() or not body.isdigit():
        return None
    value = int(text)
    return value if _INT64_MIN <= value <= _INT64_MAX else None
