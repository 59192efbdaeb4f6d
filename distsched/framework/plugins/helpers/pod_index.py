"""Per-snapshot indexes of placed pods, kept up to date as pods come and go.

The inter-pod plugins (InterPodAffinity, PodTopologySpread) need, in every cycle, how
many pods matching some selector run on each node, and which placed pods declare which
affinity terms. Walking every pod each cycle is what kube does (in parallel); here a
``PodIndex`` attached to the snapshot (through ``Snapshot.pod_observers``) keeps:

- per *query* (a conjunction of namespace + label matchers), an int64[capacity] count of
  the matching pods on each node. A query is registered on first use (one scan of the
  placed pods), then updated incrementally; the least recently used are dropped beyond
  ``MAX_QUERIES``.
- per *term group* (the placed pods declaring one term in one namespace, with one
  weight), an int64[capacity] count of such pods (times repetitions) on each node. Groups
  exist for required anti-affinity, required affinity, and preferred (anti-)affinity.

Both also keep, per topology key asked about, the counts summed per topology domain,
updated with every pod placed or removed until a node label changes (then recomputed on
the next read): a cycle reads the domain counts it needs without walking the nodes.

Arrays are indexed by snapshot slot; entries of free slots are 0 (a removed node's pods
are taken off first). Arrays may be longer than the snapshot's capacity, or shorter when
it just grew: readers use ``sized``.

A query's namespaceSelector reads namespace labels from the lookup the index was
created with (the worker's namespace lister: a snapshot serves one worker).

Deferred pods (see ``Snapshot.defer_pod``) reach the index when they are materialized.
A query counts every pod, so reading one materializes the snapshot first; term groups
count only pods declaring affinity terms, which are never deferred, so reading them
parses nothing.
"""

from __future__ import annotations

import weakref
from collections.abc import Hashable
from dataclasses import dataclass, field

import numpy as np

from distsched.framework.podinfo import PodInfo
from distsched.framework.snapshot import Snapshot
from distsched.model.labels import AffinityTerm, NamespaceLabelsOf, compile_term

Query = tuple[AffinityTerm, ...]
MAX_QUERIES = 256


def sized(array: np.ndarray, capacity: int) -> np.ndarray:
    """``array`` cut or zero-padded to ``capacity`` entries."""
    if array.size >= capacity:
        return array[:capacity]
    grown = np.zeros(capacity, dtype=array.dtype)
    grown[: array.size] = array
    return grown


def _grow(array: np.ndarray, index: int) -> np.ndarray:
    grown = np.zeros(max(index + 1, 2 * array.size), dtype=array.dtype)
    grown[: array.size] = array
    return grown


@dataclass(slots=True)
class _Counter:
    """Pods per node (``counts``) and, per topology key asked about, per domain: the
    domain sums are kept up to date with the counts until node labels change."""

    counts: np.ndarray
    # topology key -> (snapshot label_version, domain ids by slot, int64[domains + 1])
    sums: dict[str, tuple[int, np.ndarray, np.ndarray]] = field(default_factory=dict)

    def bump(self, index: int, sign: int) -> None:
        if index >= self.counts.size:
            self.counts = _grow(self.counts, index)
        self.counts[index] += sign
        for _, ids, sums in self.sums.values():
            if index < ids.size:
                domain = ids[index]
                if domain >= 0:
                    sums[domain] += sign

    def domains(self, snapshot: Snapshot, key: str) -> np.ndarray:
        """A copy of ``counts`` summed per domain of ``key`` (see ``domain_counts``)."""
        entry = self.sums.get(key)
        if entry is None or entry[0] != snapshot.label_version:
            ids = snapshot.topology_domains(key)[0]
            sums = domain_counts(snapshot, key, sized(self.counts, snapshot.capacity))
            entry = (snapshot.label_version, ids, sums)
            self.sums[key] = entry
        return entry[2].copy()


@dataclass(slots=True)
class _QueryCounts:
    query: Query
    counter: _Counter

    def matches(self, info: PodInfo, namespace_labels: NamespaceLabelsOf) -> bool:
        namespace, labels = info.namespace, info.labels
        return all(term.matches(namespace, labels, namespace_labels) for term in self.query)


@dataclass(slots=True)
class TermGroup:
    """Placed pods declaring ``term`` (with ``weight`` for preferred terms)."""

    term: AffinityTerm
    weight: int
    counter: _Counter
    total: int = 0

    def domain_counts(self, snapshot: Snapshot, key: str) -> np.ndarray:
        """int64[domains of ``key`` + 1]: these pods per topology domain (a copy)."""
        return self.counter.domains(snapshot, key)


@dataclass(slots=True)
class Groups:
    """Term groups by kind, keyed by (term, weight)."""

    required_affinity: dict[Hashable, TermGroup] = field(default_factory=dict)
    required_anti_affinity: dict[Hashable, TermGroup] = field(default_factory=dict)
    preferred_affinity: dict[Hashable, TermGroup] = field(default_factory=dict)
    preferred_anti_affinity: dict[Hashable, TermGroup] = field(default_factory=dict)


class PodIndex:
    """Incremental pod counts for one snapshot; get it with ``pod_index(snapshot, ...)``."""

    def __init__(self, snapshot: Snapshot, namespace_labels: NamespaceLabelsOf) -> None:
        self._capacity = snapshot.capacity
        self._namespace_labels = namespace_labels
        self._queries: dict[Query, _QueryCounts] = {}
        # Queries whose every term names its namespaces (the common case) are only
        # checked against pods of those namespaces.
        self._by_namespace: dict[str, dict[Query, _QueryCounts]] = {}
        self._any_namespace: dict[Query, _QueryCounts] = {}
        self.groups = Groups()  # read-only for callers
        for index, info in snapshot.iter_pods(materialize=False):
            self._observe(index, info, 1)
        snapshot.pod_observers.append(self._observe)

    # ------------------------------------------------------------------ queries
    def counts(self, snapshot: Snapshot, query: Query) -> np.ndarray:
        """int64[capacity]: pods on each node matching every term of ``query``
        (topology keys are ignored). Do not modify the result."""
        return sized(self._entry(snapshot, query).counter.counts, snapshot.capacity)

    def domain_counts(self, snapshot: Snapshot, query: Query, key: str) -> np.ndarray:
        """int64[domains of ``key`` + 1]: pods matching ``query`` per topology domain,
        the last entry a sentinel 0 (see ``domain_counts``). The caller owns the copy."""
        return self._entry(snapshot, query).counter.domains(snapshot, key)

    def _entry(self, snapshot: Snapshot, query: Query) -> _QueryCounts:
        if snapshot.has_deferred:  # a label query counts every pod
            snapshot.materialize()
        entry = self._queries.pop(query, None)
        if entry is None:
            entry = self._register(snapshot, query)
        self._queries[query] = entry  # most recently used last
        return entry

    def _register(self, snapshot: Snapshot, query: Query) -> _QueryCounts:
        if len(self._queries) >= MAX_QUERIES:
            self._unregister(next(iter(self._queries)))
        counter = _Counter(np.zeros(max(self._capacity, snapshot.capacity), np.int64))
        entry = _QueryCounts(query, counter)
        for index, info in snapshot.iter_pods():
            if entry.matches(info, self._namespace_labels):
                counter.counts[index] += 1
        namespaces = _namespaces_of(query)
        if namespaces is None:
            self._any_namespace[query] = entry
        else:
            for namespace in namespaces:
                self._by_namespace.setdefault(namespace, {})[query] = entry
        return entry

    def _unregister(self, query: Query) -> None:
        self._queries.pop(query, None)
        self._any_namespace.pop(query, None)
        for namespace in _namespaces_of(query) or ():
            bucket = self._by_namespace.get(namespace)
            if bucket is not None:
                bucket.pop(query, None)
                if not bucket:
                    del self._by_namespace[namespace]

    # ------------------------------------------------------------------ term groups
    def has_affinity_pods(self) -> bool:
        groups = self.groups
        return bool(
            groups.required_affinity
            or groups.required_anti_affinity
            or groups.preferred_affinity
            or groups.preferred_anti_affinity
        )

    # ------------------------------------------------------------------ updates
    def _observe(self, index: int, info: PodInfo, sign: int) -> None:
        if index >= self._capacity:
            self._capacity = max(index + 1, 2 * self._capacity)
        namespace_labels = self._namespace_labels
        bucket = self._by_namespace.get(info.namespace)
        if bucket:
            for entry in bucket.values():
                if entry.matches(info, namespace_labels):
                    entry.counter.bump(index, sign)
        for entry in self._any_namespace.values():
            if entry.matches(info, namespace_labels):
                entry.counter.bump(index, sign)
        if info.has_affinity:
            self._observe_terms(index, info, sign)

    def _observe_terms(self, index: int, info: PodInfo, sign: int) -> None:
        namespace = info.namespace
        groups = self.groups
        for term in info.required_affinity_terms:
            self._bump_group(
                groups.required_affinity, compile_term(term, namespace), 0, index, sign
            )
        for term in info.required_anti_affinity_terms:
            self._bump_group(
                groups.required_anti_affinity, compile_term(term, namespace), 0, index, sign
            )
        for weighted in info.preferred_affinity_terms:
            self._bump_group(
                groups.preferred_affinity,
                compile_term(weighted.term, namespace),
                weighted.weight,
                index,
                sign,
            )
        for weighted in info.preferred_anti_affinity_terms:
            self._bump_group(
                groups.preferred_anti_affinity,
                compile_term(weighted.term, namespace),
                weighted.weight,
                index,
                sign,
            )

    def _bump_group(
        self,
        groups: dict[Hashable, TermGroup],
        term: AffinityTerm,
        weight: int,
        index: int,
        sign: int,
    ) -> None:
        key = (term, weight)
        group = groups.get(key)
        if group is None:
            if sign < 0:
                return
            group = TermGroup(term, weight, _Counter(np.zeros(self._capacity, dtype=np.int64)))
            groups[key] = group
        group.counter.bump(index, sign)
        group.total += sign
        if group.total <= 0:
            del groups[key]


def _namespaces_of(query: Query) -> frozenset[str] | None:
    """The namespaces a pod must be in to match ``query``; None when any namespace may
    (every term has a namespace selector)."""
    allowed: frozenset[str] | None = None
    for term in query:
        if term.namespace_selector.nothing:
            allowed = term.namespaces if allowed is None else allowed & term.namespaces
    return allowed


_INDEXES: weakref.WeakKeyDictionary[Snapshot, PodIndex] = weakref.WeakKeyDictionary()


def pod_index(snapshot: Snapshot, namespace_labels: NamespaceLabelsOf) -> PodIndex:
    """The snapshot's PodIndex, created (with one scan of its pods) on first use, its
    queries reading namespace labels from ``namespace_labels`` (the first caller's: every
    plugin of a worker reads the same lister)."""
    index = _INDEXES.get(snapshot)
    if index is None:
        index = PodIndex(snapshot, namespace_labels)
        _INDEXES[snapshot] = index
    return index


def domain_counts(
    snapshot: Snapshot, key: str, per_node: np.ndarray, nodes: np.ndarray | None = None
) -> np.ndarray:
    """int64[values + 1]: ``per_node`` summed per domain of topology ``key``; the last
    entry is a sentinel 0 that a domain id of -1 (node without the label) reads.

    ``nodes`` restricts the sum to those slots (default: every slot with a count)."""
    ids, values = snapshot.topology_domains(key)
    if nodes is None:
        nodes = np.flatnonzero(per_node)
    domains = ids[nodes]
    labelled = domains >= 0
    sums = np.zeros(len(values) + 1, dtype=np.int64)
    if labelled.any():
        weights = per_node[nodes][labelled]
        sums[: len(values)] = np.bincount(
            domains[labelled], weights=weights, minlength=len(values)
        ).astype(np.int64)
    return sums
