"""A scheduling worker's local, vectorized view of every node and the pods on them.

Four parts, one job each; ``Snapshot`` builds them, coordinates a node's life across
them (add, update, remove, the table growing) and keeps the one API that plugins,
batching and the worker's local cache use:

===========================  ==============================================================
part                         owns
===========================  ==============================================================
``table``     NodeTable      slots, Node objects, resource columns, the per-slot numpy
                             arrays (allocatable, requested, free, ...) and generations
``indexes``   NodeIndexes    inverted indexes of labels, taints and images; masks from them
``usage``     Usage          what is in use on each node (requested resources, host ports):
                             charged pod by pod, or mirrored from the ledger
``placement`` PodPlacement   pods on each node, parked and deferred pods, affinity subsets,
                             pod observers
===========================  ==============================================================

Each module's docstring says what its part holds; the per-slot arrays are described in
``table.py``, deferred pods in ``placement.py``.
"""

from __future__ import annotations

import weakref
from operator import attrgetter
from typing import Any

import numpy as np

from distsched.framework.snapshot.indexes import NodeIndexes
from distsched.framework.snapshot.placement import DeferredPod, PodPlacement
from distsched.framework.snapshot.table import (
    CPU_COL,
    EPHEMERAL_STORAGE_COL,
    MEMORY_COL,
    PODS_COL,
    NodeTable,
)
from distsched.framework.snapshot.usage import Usage
from distsched.model.objects import Node

__all__ = [
    "CPU_COL",
    "EPHEMERAL_STORAGE_COL",
    "MEMORY_COL",
    "PODS_COL",
    "DeferredPod",
    "NodeIndexes",
    "NodeTable",
    "PodPlacement",
    "Snapshot",
    "Usage",
    "preferred_slots",
]


def preferred_slots(prefer: np.ndarray, slots: np.ndarray) -> np.ndarray:
    """Whether each of ``slots`` is one a tie preference (``Snapshot.tie_preference``)
    prefers; a slot beyond the mask (a node added since it was computed) is not."""
    try:
        return prefer[slots]
    except IndexError:
        preferred = np.zeros(slots.size, dtype=bool)
        inside = slots < prefer.size
        preferred[inside] = prefer[slots[inside]]
        return preferred


def _read_through(path: str) -> Any:
    """A read-only attribute read from ``self.<path>`` (a property, as fast as one can be);
    the caller annotates the type."""
    return property(attrgetter(path))


class Snapshot:
    def __init__(self, *, capacity: int = 256, usage_from_ledger: bool = False) -> None:
        # In a scheduling worker the Redis ledger is the truth for what is in use on each
        # node (see usage.py): placed pods then only feed the pod lists.
        self.usage_from_ledger = usage_from_ledger
        # Slots this worker prefers among equally scored nodes (None: no preference); see
        # schedule.select_position and SchedulingWorker's share of the nodes.
        self.tie_preference: np.ndarray | None = None
        # With a tie preference: how many pods' worth of score a preferred node may trail
        # the best by (see framework/schedule.py select_position).
        self.tie_slack_pods = 0
        owner = weakref.ref(self)  # the table must not keep the snapshot alive (a cycle)

        def rebind() -> None:
            snapshot = owner()
            if snapshot is not None:
                snapshot._bind_arrays()

        self.table = table = NodeTable(capacity, on_reshape=rebind)
        self._bind_arrays()
        self.indexes = indexes = NodeIndexes(table.capacity)
        self.usage = usage = Usage(table)
        self.placement = placement = PodPlacement(table, None if usage_from_ledger else usage)

        # The parts' methods under the snapshot's names, bound once (no call in between).
        self.resource_names = table.resource_names
        self.resource_index = table.resource_index
        self.index_of = table.index_of
        self.get_index = table.get_index
        self.node = table.node
        self.node_name = table.node_name
        self.node_by_name = table.node_by_name
        self.node_indices = table.node_indices
        self.indices_of = table.indices_of
        self.column = table.column
        self.all_nodes_have = table.all_nodes_have
        self.request_vector = table.request_vector

        self.labels = indexes.labels
        self.taints = indexes.taints
        self.images = indexes.images
        self.image_num_nodes = indexes.image_num_nodes
        self.label_cached = indexes.label_cached
        self.label_mask = indexes.label_mask
        self.label_keys = indexes.label_keys
        self.label_values = indexes.label_values
        self.label_exists_mask = indexes.label_exists_mask
        self.label_int_values = indexes.label_int_values
        self.topology_domains = indexes.topology_domains
        self.distinct_taints = indexes.distinct_taints
        self.taint_mask = indexes.taint_mask
        self.image_sizes = indexes.image_sizes

        self.host_ports = usage.host_ports
        self.port_conflict_slots = usage.port_conflict_slots
        self.set_usage = usage.set_usage
        self.set_usages = usage.set_usages
        self.add_usage = usage.add_usage

        self.pods_on = placement.pods_on
        self.pod_node_index = placement.pod_node_index
        self.pod_info = placement.pod_info
        self.iter_pods = placement.iter_pods
        self.materialize = placement.materialize
        self.defer_pod = placement.defer_pod
        self.defer_pods = placement.defer_pods
        self.holds_as = placement.holds_as
        self.add_pod = placement.add_pod
        self.update_pod = placement.add_pod
        self.remove_pod = placement.remove_pod
        self.pods_with_affinity = placement.pods_with_affinity
        self.pods_with_required_anti_affinity = placement.pods_with_required_anti_affinity
        self.pod_observers = placement.pod_observers
        self.claim_users = placement.claim_users

    # ------------------------------------------------------------------ a node's life
    check_node = staticmethod(NodeTable.check_node)

    def add_node(self, node: Node) -> int:
        """Add ``node`` (or update it when its name is known); returns its slot."""
        self.check_node(node)
        name = node.metadata.name
        if name in self.table:
            return self.update_node(node)
        if self.table.full:
            self._grow(self.table.capacity * 2)
        index = self.table.add(node)
        self.indexes.set_node(index, node, new=True)
        self.placement.node_added(index, name)
        self.table.touch(index)
        return index

    def update_node(self, node: Node) -> int:
        self.check_node(node)
        index = self.table.update(node)
        self.indexes.set_node(index, node, new=False)
        self.table.touch(index)
        return index

    def remove_node(self, node_name: str) -> int:
        """Remove the node; its pods stay parked until they are removed or it comes back."""
        index = self.table.index_of(node_name)
        self.indexes.remove_node(index)
        self.placement.node_removed(index, node_name)
        self.usage.remove_node(index)
        self.table.remove(node_name)
        self.table.touch(index)
        return index

    def _grow(self, capacity: int) -> None:
        self.table.grow(capacity)
        self.indexes.grow(capacity)
        self.usage.grow(capacity)
        self.placement.grow(capacity)

    def _bind_arrays(self) -> None:
        # The table's arrays as plain attributes (plugins read them for every pod),
        # bound again whenever the table replaces them.
        table = self.table
        self.allocatable = table.allocatable
        self.requested = table.requested
        self.free = table.free
        self.nonzero_requested = table.nonzero_requested
        self.unschedulable = table.unschedulable
        self.valid = table.valid
        self.generation = table.generation

    def __len__(self) -> int:
        return self.table.num_nodes

    def __contains__(self, node_name: object) -> bool:
        return node_name in self.table

    # Counters read through to the part that keeps them.
    capacity: int = _read_through("table.capacity")
    num_nodes: int = _read_through("table.num_nodes")
    version: int = _read_through("table.version")
    num_unschedulable: int = _read_through("table.num_unschedulable")
    label_version: int = _read_through("indexes.label_version")
    taint_version: int = _read_through("indexes.taint_version")
    has_deferred: bool = _read_through("placement.has_deferred")
