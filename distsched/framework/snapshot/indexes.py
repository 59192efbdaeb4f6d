"""Inverted indexes over the nodes' labels, taints and images, and the masks built from them.

Label key -> value -> slots, taint -> slots, image -> slot -> size. Masks and arrays are
``[capacity]``-long and built on demand. Those derived from labels are cached until a label
of some node (or the node set) changes: node labels change rarely, pods are placed
thousands of times per second. ``label_version`` and ``taint_version`` let caches kept
outside the snapshot follow the same changes.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from distsched.model.objects import Node, Taint

_LABEL_CACHE_SIZE = 8192


class NodeIndexes:
    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        # Bumped whenever the node set or any node's labels change.
        self.label_version = 0
        # Bumped whenever the set of distinct taints or the nodes carrying one change
        # (and when the capacity grows: taint masks are capacity-long).
        self.taint_version = 0
        self._labels: list[dict[str, str]] = [{} for _ in range(capacity)]
        self._label_index: dict[str, dict[str, set[int]]] = {}
        self._taints: list[tuple[Taint, ...]] = [() for _ in range(capacity)]
        self._taint_index: dict[Taint, set[int]] = {}
        self._images: list[dict[str, int]] = [{} for _ in range(capacity)]
        self._image_nodes: dict[str, dict[int, int]] = {}
        self._label_cache: dict[Hashable, Any] = {}
        self._taint_cache: dict[Taint, np.ndarray] = {}
        self._image_cache: dict[str, np.ndarray] = {}

    # ------------------------------------------------------------------ per node
    def labels(self, index: int) -> dict[str, str]:
        return self._labels[index]

    def taints(self, index: int) -> tuple[Taint, ...]:
        return self._taints[index]

    def images(self, index: int) -> dict[str, int]:
        """Image name -> size in bytes, for every name of every image on the node."""
        return self._images[index]

    def image_num_nodes(self, image: str) -> int:
        return len(self._image_nodes.get(image, ()))

    # ------------------------------------------------------------------ mutations
    def set_node(self, index: int, node: Node, *, new: bool) -> None:
        """Index ``node`` in its slot: a ``new`` one, or a newer version of the node there."""
        self._set(index, node.metadata.labels, node.spec.taints, _image_sizes(node), new)

    def remove_node(self, index: int) -> None:
        self._set(index, {}, (), {}, True)

    def _set(
        self,
        index: int,
        labels: dict[str, str],
        taints: tuple[Taint, ...],
        images: dict[str, int],
        node_set_changed: bool,
    ) -> None:
        if node_set_changed or labels != self._labels[index]:
            self._reindex_labels(index, self._labels[index], labels)
        if taints != self._taints[index]:
            self._reindex_taints(index, self._taints[index], taints)
        if images != self._images[index]:
            self._reindex_images(index, self._images[index], images)

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

    def grow(self, capacity: int) -> None:
        extra = capacity - self._capacity
        self._capacity = capacity
        self._labels.extend({} for _ in range(extra))
        self._taints.extend(() for _ in range(extra))
        self._images.extend({} for _ in range(extra))
        self._label_cache.clear()
        self._taint_cache.clear()
        self._image_cache.clear()
        self.taint_version += 1

    # ------------------------------------------------------------------ labels
    def _mask(self, slots: set[int] | dict[int, Any] | None) -> np.ndarray:
        mask = np.zeros(self._capacity, dtype=bool)
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
            mask = np.zeros(self._capacity, dtype=bool)
            for slots in self._label_index.get(key, {}).values():
                mask[np.fromiter(slots, dtype=np.int64, count=len(slots))] = True
            return mask

        return self.label_cached(("exists", key), compute)

    def label_int_values(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """(int64[capacity], bool[capacity]): label ``key`` parsed as an integer, and
        where that parse succeeded (Gt/Lt node selector operators)."""

        def compute() -> tuple[np.ndarray, np.ndarray]:
            values = np.zeros(self._capacity, dtype=np.int64)
            ok = np.zeros(self._capacity, dtype=bool)
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
            ids = np.full(self._capacity, -1, dtype=np.int32)
            values = sorted(self._label_index.get(key, {}))
            for i, value in enumerate(values):
                slots = self._label_index[key][value]
                ids[np.fromiter(slots, dtype=np.int64, count=len(slots))] = i
            return ids, values

        return self.label_cached(("topology", key), compute)

    # ------------------------------------------------------------------ taints, images
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

    def image_sizes(self, image: str) -> np.ndarray:
        """int64[capacity]: size of ``image`` on each node, 0 where absent."""
        sizes = self._image_cache.get(image)
        if sizes is None:
            sizes = np.zeros(self._capacity, dtype=np.int64)
            nodes = self._image_nodes.get(image)
            if nodes:
                idx = np.fromiter(nodes.keys(), dtype=np.int64, count=len(nodes))
                sizes[idx] = np.fromiter(nodes.values(), dtype=np.int64, count=len(nodes))
            self._image_cache[image] = sizes
        return sizes


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
