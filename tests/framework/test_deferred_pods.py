"""Deferred pods (``Snapshot.defer_pod``): placed by key, parsed when a reader needs them,
and then exactly where ``add_pod`` would have put them."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from distsched.framework.listers import NamespaceLabels
from distsched.framework.plugins.helpers.pod_index import pod_index
from distsched.framework.snapshot import DeferredPod, Snapshot
from distsched.model.labels import (
    NOTHING,
    AffinityTerm,
    compile_selector,
)
from distsched.model.objects import (
    Affinity,
    LabelSelector,
    Pod,
    PodAffinity,
    PodAffinityTerm,
)
from tests.framework.builders import make_node, make_pod


def ledger_snapshot() -> Snapshot:
    snapshot = Snapshot(capacity=4, usage_from_ledger=True)
    for name in ("n1", "n2", "n3"):
        snapshot.add_node(make_node(name))
    return snapshot


class Loads:
    """Loaders that count how often each pod was parsed."""

    def __init__(self) -> None:
        self.loaded: list[str] = []

    def of(self, pod: Pod) -> Callable[[], Pod]:
        def load() -> Pod:
            self.loaded.append(pod.key)
            return pod

        return load


# The namespace lister the PodIndex's queries read (no Namespace objects here).
NAMESPACES = NamespaceLabels()


def red_query() -> tuple[AffinityTerm, ...]:
    selector = compile_selector(LabelSelector(match_labels={"color": "red"}))
    return (AffinityTerm("", selector, frozenset({"default"}), NOTHING),)


def test_pods_on_a_node_materialize_in_add_pod_order() -> None:
    eager, lazy, loads = ledger_snapshot(), ledger_snapshot(), Loads()
    pods = [make_pod(f"p{i}", node_name="n1") for i in range(4)]
    for i, pod in enumerate(pods):
        eager.add_pod(pod)
        if i % 2:
            lazy.add_pod(pod)
        else:
            lazy.defer_pod(pod.key, "n1", loads.of(pod))
    eager.add_pod(pods[0])  # re-added: last
    lazy.defer_pod(pods[0].key, "n1", loads.of(pods[0]))
    assert lazy.has_deferred and loads.loaded == []
    assert lazy.pod_node_index("default/p0") == lazy.index_of("n1")  # parses nothing
    assert loads.loaded == []
    assert list(lazy.pods_on(lazy.index_of("n2"))) == []
    assert loads.loaded == []
    n1 = lazy.index_of("n1")
    assert list(lazy.pods_on(n1)) == list(eager.pods_on(eager.index_of("n1")))
    assert sorted(loads.loaded) == ["default/p0", "default/p2"]
    lazy.pods_on(n1)
    assert len(loads.loaded) == 2  # once


def test_defer_touches_the_node_and_counts_nothing() -> None:
    snapshot = ledger_snapshot()
    n1 = snapshot.index_of("n1")
    before = int(snapshot.generation[n1])
    pod = make_pod("p", node_name="n1", requests={"cpu": 500})
    snapshot.defer_pod(pod.key, "n1", lambda: pod)
    assert int(snapshot.generation[n1]) > before
    snapshot.materialize()
    assert not snapshot.has_deferred
    assert snapshot.requested[n1].tolist() == [0, 0, 0, 0]  # the ledger's to set
    assert snapshot.nonzero_requested[n1].tolist() == [0, 0]
    assert snapshot.pod_info("default/p") is not None


def test_label_queries_materialize_everything_term_groups_nothing() -> None:
    snapshot, loads = ledger_snapshot(), Loads()
    anti = PodAffinityTerm(
        topology_key="kubernetes.io/hostname",
        label_selector=LabelSelector(match_labels={"color": "red"}),
    )
    guard = make_pod(
        "guard",
        node_name="n3",
        affinity=Affinity(pod_anti_affinity=PodAffinity(required=(anti,))),
    )
    snapshot.add_pod(guard)  # pods with affinity terms are never deferred
    index = pod_index(snapshot, NAMESPACES.of)
    for i, node in enumerate(("n1", "n2", "n2")):
        pod = make_pod(f"r{i}", node_name=node, labels={"color": "red"})
        snapshot.defer_pod(pod.key, node, loads.of(pod))
    assert len(index.groups.required_anti_affinity) == 1
    assert index.has_affinity_pods() and loads.loaded == []
    counts = index.counts(snapshot, red_query())
    assert counts[snapshot.index_of("n1")] == 1 and counts[snapshot.index_of("n2")] == 2
    assert len(loads.loaded) == 3
    # Deferred later: the next query read takes it in.
    late = make_pod("r9", node_name="n3", labels={"color": "red"})
    snapshot.defer_pod(late.key, "n3", loads.of(late))
    assert index.counts(snapshot, red_query())[snapshot.index_of("n3")] == 1


def test_removing_and_moving_deferred_pods() -> None:
    snapshot, loads = ledger_snapshot(), Loads()
    pod = make_pod("p", node_name="n1", labels={"color": "red"})
    snapshot.defer_pod(pod.key, "n1", loads.of(pod))
    assert snapshot.remove_pod(pod.key) is None  # never parsed: nothing to hand back
    assert snapshot.pod_node_index(pod.key) is None
    snapshot.defer_pod(pod.key, "n1", loads.of(pod))
    moved = make_pod("p", node_name="n2", labels={"color": "red"})
    snapshot.defer_pod(pod.key, "n2", loads.of(moved))
    index = pod_index(snapshot, NAMESPACES.of)
    assert index.counts(snapshot, red_query()).tolist()[:3] == [0, 1, 0]
    assert loads.loaded == ["default/p"]
    assert snapshot.remove_pod(pod.key) is not None
    assert index.counts(snapshot, red_query()).tolist()[:3] == [0, 0, 0]


def test_deferred_pods_park_with_their_node() -> None:
    snapshot, loads = ledger_snapshot(), Loads()
    early = make_pod("early", node_name="later")
    snapshot.defer_pod(early.key, "later", loads.of(early))  # its node is not here yet
    gone = make_pod("gone", node_name="n1")
    snapshot.defer_pod(gone.key, "n1", loads.of(gone))
    snapshot.remove_node("n1")
    snapshot.materialize()
    assert loads.loaded == []
    assert snapshot.pod_node_index(early.key) is None
    index = snapshot.add_node(make_node("later"))
    assert snapshot.pod_node_index(early.key) == index
    assert list(snapshot.pods_on(index)) == [early.key]
    back = snapshot.add_node(make_node("n1"))
    assert list(snapshot.pods_on(back)) == [gone.key]
    assert sorted(loads.loaded) == [early.key, gone.key]


def test_a_pod_that_cannot_be_loaded_is_dropped() -> None:
    snapshot = ledger_snapshot()
    snapshot.defer_pod("default/broken", "n1", lambda: None)
    assert dict(snapshot.pods_on(snapshot.index_of("n1"))) == {}
    assert snapshot.pod_node_index("default/broken") is None
    assert [key for _, key in ((i, info.key) for i, info in snapshot.iter_pods())] == []
    assert np.all(snapshot.requested == 0)


def test_a_loader_that_raises_leaves_the_other_pods_deferred() -> None:
    snapshot = ledger_snapshot()
    good = make_pod("good", node_name="n1")

    def broken() -> Pod:
        raise RuntimeError("boom")

    snapshot.defer_pod("default/bad", "n1", broken)
    snapshot.defer_pod(good.key, "n1", lambda: good)
    n1 = snapshot.index_of("n1")
    with pytest.raises(RuntimeError):
        snapshot.pods_on(n1)
    assert snapshot.has_deferred
    snapshot.defer_pod("default/bad", "n1", lambda: None)
    assert list(snapshot.pods_on(n1)) == [good.key]


def test_a_deferred_pod_made_by_the_caller_is_placed_as_it_is() -> None:
    # A worker defers another worker's bound pod as DeferredPod(loader, its ref): one
    # object, placed without a wrapper, loaded with its argument when a reader needs it.
    snapshot, parsed = ledger_snapshot(), []
    pod = make_pod("p", node_name="n2")

    def load(ref: str) -> Pod:
        parsed.append(ref)
        return pod

    entry = DeferredPod(load, "the ref")
    snapshot.defer_pods([(pod.key, "n2", entry)])
    n2 = snapshot.index_of("n2")
    assert snapshot.pod_node_index(pod.key) == n2 and not parsed
    assert list(snapshot.pods_on(n2)) == [pod.key]
    assert parsed == ["the ref"]
