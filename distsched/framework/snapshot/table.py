"""The node table: which node holds which slot, and the per-slot numpy arrays.

Nodes live in slots ``0..capacity-1``. A node keeps its slot for its whole life; removing
a node frees the slot (``valid[i]`` becomes False) and a later ``add`` reuses the lowest
free slot. Arrays are therefore defined over slots, and an entry for a free slot is
meaningless: callers index them with node indices from ``node_indices()`` (or any other
array of valid slots) and never look at free ones.

Per-slot numpy arrays (capacity grows by doubling and columns are added, which replaces
them: hold on to them only within one scheduling cycle, or follow ``on_reshape``):

=====================  ===========  ========================================================
array                  shape/dtype  holds
=====================  ===========  ========================================================
allocatable            [N, R] i64   node.status.allocatable per resource column
requested              [N, R] i64   sum of requests of the pods on the node; the ``pods``
                                    column counts the pods
free                   [N, R] i64   allocatable - requested (kept up to date, for Filter)
nonzero_requested      [N, 2] i64   cpu, memory with 100m / 200Mi defaults (scoring only)
unschedulable          [N] bool     node.spec.unschedulable
valid                  [N] bool     the slot holds a node
generation             [N] i64      bumped (from one table-wide counter) on each change
=====================  ===========  ========================================================

The table writes what comes from the Node object (allocatable, unschedulable, valid) and
keeps ``free`` in step when allocatable changes; ``requested``, ``free`` and
``nonzero_requested`` are otherwise written by the snapshot's usage part (``usage.py``).

Resource columns: 0 cpu (millicores), 1 memory (bytes), 2 ephemeral-storage (bytes),
3 pods (count), then extended resources in order of first appearance (``column``). The
[N, R] arrays are column-major so that ``array[:, col]`` is contiguous: plugins gather
one resource for many nodes (``snapshot.free[:, col][indices]``).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable

import numpy as np

from distsched.framework.podinfo import CPU, EPHEMERAL_STORAGE, MEMORY, PODS
from distsched.model.objects import Node
from distsched.model.quantity import MAX_AMOUNT, format_quantity, over_limit

CPU_COL = 0
MEMORY_COL = 1
EPHEMERAL_STORAGE_COL = 2
PODS_COL = 3
_BASE_RESOURCES = (CPU, MEMORY, EPHEMERAL_STORAGE, PODS)

_EMPTY_INDEX = np.zeros(0, dtype=np.int64)


class NodeTable:
    def __init__(self, capacity: int, *, on_reshape: Callable[[], None] | None = None) -> None:
        capacity = max(1, capacity)
        # Called after the arrays were replaced by larger ones (more slots, a new column),
        # for whoever keeps references to them.
        self._on_reshape = on_reshape
        self.capacity = capacity  # slots; every per-slot array is this long
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
        self.num_nodes = 0  # counted: the snapshot reads it for every pod
        self.num_unschedulable = 0

        self._nodes: list[Node | None] = [None] * capacity
        self._index_of: dict[str, int] = {}
        self._free: list[int] = list(range(capacity))  # a heap: the lowest free slot first
        self._node_indices: np.ndarray | None = None
        self._all_have: dict[int, bool] = {}

    # ------------------------------------------------------------------ slots
    @property
    def full(self) -> bool:
        """Whether ``add`` needs a ``grow`` first."""
        return not self._free

    def __contains__(self, node_name: object) -> bool:
        return node_name in self._index_of

    def index_of(self, node_name: str) -> int:
        """The slot of ``node_name``; KeyError when the node is not in the table."""
        return self._index_of[node_name]

    def get_index(self, node_name: str) -> int | None:
        return self._index_of.get(node_name)

    def index_lookup(self) -> Callable[[str], int | None]:
        """:meth:`get_index` as the mapping's own lookup, for loops over many names
        (valid until the table's nodes change)."""
        return self._index_of.get

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
        """Sorted slots of the named nodes that are in the table (others are dropped)."""
        found = [self._index_of[n] for n in node_names if n in self._index_of]
        found.sort()
        return np.array(found, dtype=np.int64) if found else _EMPTY_INDEX

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
            if self._on_reshape is not None:
                self._on_reshape()
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

    # ------------------------------------------------------------------ mutations
    @staticmethod
    def check_node(node: Node) -> None:
        """ValueError when an allocatable amount of ``node`` exceeds MAX_AMOUNT (what the
        ledger can account; manifests are refused such amounts, objects built in Python
        are not): free = allocatable - requested must never overflow int64 either."""
        for resource, amount in node.status.allocatable.items():
            if amount > MAX_AMOUNT:
                shown = format_quantity(amount, resource)
                raise ValueError(f"status.allocatable.{resource}: {over_limit(shown, resource)}")

    def add(self, node: Node) -> int:
        """Put a node not in the table yet into the lowest free slot (``grow`` first when
        ``full``); returns the slot. Its usage row is whatever the slot holds (zero)."""
        index = heapq.heappop(self._free)
        self._index_of[node.metadata.name] = index
        self.num_nodes += 1
        self.valid[index] = True
        self._node_indices = None
        self._set(index, node)
        return index

    def update(self, node: Node) -> int:
        """Replace a node in the table by a newer version of it; returns its slot."""
        index = self._index_of[node.metadata.name]
        self._set(index, node)
        return index

    def _set(self, index: int, node: Node) -> None:
        self._nodes[index] = node
        self._all_have.clear()
        self.num_unschedulable += int(node.spec.unschedulable) - int(self.unschedulable[index])
        self.unschedulable[index] = node.spec.unschedulable
        columns = [(self.column(r), amount) for r, amount in node.status.allocatable.items()]
        self.allocatable[index] = 0
        for col, amount in columns:
            self.allocatable[index, col] = amount
        self.free[index] = self.allocatable[index] - self.requested[index]

    def remove(self, node_name: str) -> int:
        """Free the node's slot, every row of it zeroed; returns the slot."""
        index = self._index_of.pop(node_name)
        self.num_nodes -= 1
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
        return index

    def grow(self, capacity: int) -> None:
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
        self._nodes.extend([None] * (capacity - old))
        self.capacity = capacity
        for slot in range(old, capacity):
            heapq.heappush(self._free, slot)
        self._node_indices = None
        if self._on_reshape is not None:
            self._on_reshape()

    # ------------------------------------------------------------------ generations
    def touch(self, index: int) -> None:
        """Something of the slot changed: a new generation for it."""
        self.version += 1
        self.generation[index] = self.version

    def touch_many(self, slots: np.ndarray) -> None:
        """:meth:`touch` of each of ``slots`` (distinct), in order."""
        count = len(slots)
        self.generation[slots] = np.arange(self.version + 1, self.version + count + 1)
        self.version += count


def _add_column(array: np.ndarray) -> np.ndarray:
    grown = np.zeros((array.shape[0], array.shape[1] + 1), dtype=array.dtype, order="F")
    grown[:, :-1] = array
    return grown
