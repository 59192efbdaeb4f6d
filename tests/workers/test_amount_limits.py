"""Issue 24, item 4: amounts beyond what the ledger can account (the model's MAX_AMOUNT,
2^53-1) in objects that reached the store without ``apply`` (controllers, a bridge that
mirrors an API server): such a pod is unschedulable with the reason, alone; such a node
is unusable, logged; and a batch that fails for any reason leaves the worker's snapshot
as the ledger has it."""

from __future__ import annotations

import logging

import pytest
import redis

from distsched.clock import FakeClock
from distsched.keys import Keys
from tests.support.objects import node, pod
from tests.workers.harness import InProcessCluster

HUGE = "9223372036854775807m"  # int64's maximum: kube accepts it, the ledger cannot


def test_an_over_limit_pod_is_unschedulable_alone_and_its_batch_mates_bind(
    r: redis.Redis, keys: Keys, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(node("n1", cpu="4", pods="40"), node("big", cpu=HUGE))
    small = [pod(f"s{i}", cpu="100m") for i in range(6)]
    with caplog.at_level(logging.WARNING):
        cluster.handle_events()
        cluster.create(*small[:3], pod("huge", cpu=HUGE), *small[3:])
        assert cluster.turn() == 7  # one batch: the huge pod among the small ones
        cluster.settle()

    assert {cluster.node_of(f"s{i}") for i in range(6)} == {"n1"}
    # Parked like any unschedulable pod (backoff: the binds were a move request meanwhile).
    assert cluster.where("huge") in ("unschedulable", "backoff")
    explanation = cluster.explain("huge")["message"]
    assert explanation == (
        "invalid pod: spec.containers[0].resources.requests.cpu: 9223372036854775807m exceeds"
        " the largest amount distsched can account (2^53-1 millicores)"
    )
    assert r.zcard(keys.dead) == 0
    assert "node big is unusable: " in caplog.text
    assert "status.allocatable.cpu: 9223372036854775807m exceeds" in caplog.text
    assert cluster.worker.snapshot.get_index("big") is None
    assert cluster.worker.ledger.node_names() == ["n1"]

    # Nothing was left charged: the same worker fills the node with later pods.
    cluster.create(*[pod(f"l{i}", cpu="100m") for i in range(34)])
    cluster.settle()
    assert all(cluster.node_of(f"l{i}") == "n1" for i in range(34))
    assert cluster.worker.ledger.check_consistency() == []


def test_a_worker_starting_with_an_over_limit_node_resyncs_past_it(
    r: redis.Redis, keys: Keys, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """start() resyncs the ledger from the store: an unusable node is logged and left
    out, not an exception on every start (the role's loop would retry it forever)."""
    first = InProcessCluster(r, keys, clock)
    first.create(node("big", cpu=HUGE), node("n1", cpu="1"))
    r.delete(keys.lock("resync"))
    with caplog.at_level(logging.WARNING):
        worker = first.add_worker()
    assert "resync: node big left out" in caplog.text
    assert worker.ledger.node_names() == ["n1"]


def test_a_node_updated_beyond_the_limit_leaves_the_snapshot_and_comes_back(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(node("n1", cpu="4"))
    cluster.handle_events()
    cluster.store.update({**node("n1", cpu=HUGE)})
    cluster.handle_events()
    assert cluster.worker.snapshot.get_index("n1") is None
    cluster.store.update({**node("n1", cpu="2")})
    cluster.handle_events()
    index = cluster.worker.snapshot.get_index("n1")
    assert index is not None and cluster.worker.snapshot.allocatable[index, 0] == 2000


def test_a_failed_reservation_leaves_the_snapshot_as_the_ledger_has_it(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    """The cause of "Insufficient cpu" after an aborted batch: the decisions charged the
    snapshot, and the node's ledger usage never changed, so the change feed never put it
    right. Whatever makes a batch fail, its unreserved decisions are undone."""
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(node("n1", cpu="1"))
    cluster.handle_events()
    worker = cluster.worker
    reserve = worker.ledger.reserve_batch

    def lost(*_args: object) -> object:
        raise redis.ConnectionError("connection lost while reserving")

    worker.ledger.reserve_batch = lost  # type: ignore[method-assign]
    cluster.create(*[pod(f"a{i}", cpu="250m") for i in range(4)])
    with pytest.raises(redis.ConnectionError):
        cluster.turn()
    worker.ledger.reserve_batch = reserve  # type: ignore[method-assign]
    index = worker.snapshot.get_index("n1")
    assert index is not None and worker.snapshot.requested[index, 0] == 0

    # The popped pods come back (handed back, or after their lease); the node takes all four.
    clock.step(worker.queue.config.lease_ms + 1)
    worker._reclaim_leases()
    cluster.settle()
    assert [cluster.node_of(f"a{i}") for i in range(4)] == ["n1"] * 4
