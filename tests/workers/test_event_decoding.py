"""What the queue's event handlers decode and read: a binding carries no object, so the
consumer needs one only for a pod the ledger does not hold there yet, and then reads the
store once per batch."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from distsched.clock import FakeClock
from distsched.keys import Keys
from distsched.store import BindRequest, Store
from tests.support.objects import node, pod
from tests.workers.harness import InProcessCluster


def _count_store_reads(monkeypatch: pytest.MonkeyPatch, store: Store) -> list[int]:
    calls: list[int] = []
    original = store.binding_states

    def counting(bindings: Any) -> Any:
        calls.append(len(bindings))
        return original(bindings)

    monkeypatch.setattr(store, "binding_states", counting)
    return calls


def test_pods_our_binder_bound_need_no_object(
    r: redis.Redis, keys: Keys, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(node("n1"), *(pod(f"p{i}", cpu="100m") for i in range(5)))
    cluster.handle_events()
    reads = _count_store_reads(monkeypatch, cluster.worker.store)
    cluster.schedule(cluster.pop())
    cluster.bind()
    cluster.handle_events()
    assert {cluster.node_of(f"p{i}") for i in range(5)} == {"n1"}
    assert reads == [], "the bind script confirmed them in the ledger: nothing to read"


def test_pods_bound_by_someone_else_are_read_once_per_batch(
    r: redis.Redis, keys: Keys, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(node("n1"), *(pod(f"p{i}", cpu="100m") for i in range(3)))
    cluster.handle_events()
    reads = _count_store_reads(monkeypatch, cluster.worker.store)
    cluster.store.bind_many([BindRequest(f"default/p{i}", None, "n1") for i in range(3)])
    cluster.handle_queue_events()
    assert reads == [3], "one store read for the batch's bindings"
    ledger = cluster.worker.ledger
    assert ledger.pod_nodes([f"default/p{i}" for i in range(3)]) == {
        f"default/p{i}": "n1" for i in range(3)
    }
    assert ledger.check_consistency() == []


def test_a_binding_in_the_same_batch_as_its_pod_needs_no_store_read(
    r: redis.Redis, keys: Keys, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pod's add comes through the queue handlers' stream (another scheduler's pod:
    the store's create script does not enqueue it), then its binding by that scheduler."""
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(node("n1"))
    cluster.handle_events()
    reads = _count_store_reads(monkeypatch, cluster.worker.store)
    cluster.create(pod("a", cpu="100m", schedulerName="other-scheduler"))
    cluster.store.bind("default/a", None, "n1")
    cluster.handle_queue_events()
    assert reads == []
    assert cluster.worker.ledger.pod_nodes(["default/a"]) == {"default/a": "n1"}


def test_a_pod_bound_then_deleted_before_its_events_are_handled(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    """Its binding cannot be rebuilt (the store no longer has it) and must not leave a
    ledger record behind."""
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(node("n1"), pod("a", cpu="100m"))
    cluster.handle_events()
    cluster.store.bind("default/a", None, "n1")
    cluster.worker.consumer.batch = 1  # the binding and the delete in separate batches
    store = Store(r, keys, clock)
    store.delete("Pod", "default/a")
    cluster.handle_events()
    assert cluster.worker.ledger.pod_nodes(["default/a"]) == {}
    assert cluster.worker.ledger.check_consistency() == []
