"""Issue 20: a real API server's objects mirrored into the store through the store's own
scripts (real Redis; an in-process worker shows what the queue and the ledger make of
them)."""

from __future__ import annotations

import pytest
import redis

from distsched.clock import FakeClock
from distsched.keys import Keys
from distsched.store.mirror import Change, Fence, Fenced, StoreMirror
from tests.support.objects import node, pod
from tests.workers.harness import InProcessCluster


def api_object(obj: dict, uid: str) -> dict:
    """``obj`` as an API server returns it: its uid, a creation time, an rv of its own."""
    meta = {**obj["metadata"], "uid": uid, "creationTimestamp": "2026-01-01T00:00:00Z"}
    meta.setdefault("namespace", "default") if obj["kind"] == "Pod" else None
    return {**obj, "metadata": meta}


def test_a_pending_pod_keeps_its_uid_and_is_queued_by_the_create_script(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    cluster = InProcessCluster(r, keys, clock)  # registers the default profile's mode
    mirror = StoreMirror(cluster.store)
    stats = mirror.apply(
        [
            Change.upsert(api_object(node("n1"), "node-uid")),
            Change.upsert(api_object(pod("p"), "api-uid-1")),
        ]
    )
    assert stats.created == 2
    assert cluster.pod("p")["metadata"]["uid"] == "api-uid-1"
    assert cluster.where("p") == "active"
    cluster.settle()
    assert cluster.node_of("p") == "n1"


def test_pods_placed_by_others_count_as_assigned_and_their_deletion_frees_the_room(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    cluster = InProcessCluster(r, keys, clock)
    mirror = StoreMirror(cluster.store)
    mirror.apply([Change.upsert(api_object(node("n1", cpu="2"), "node-uid"))])
    # Created bound (a DaemonSet's pod), and bound later by another scheduler.
    other = api_object(pod("other", cpu="1", schedulerName="someone-else"), "u-other")
    mirror.apply(
        [
            Change.upsert(api_object(pod("ds", cpu="1", nodeName="n1"), "u-ds")),
            Change.upsert(other),
        ]
    )
    assert cluster.where("other") is None  # not our profile: never queued
    bound = {**other, "spec": {**other["spec"], "nodeName": "n1"}}
    mirror.apply([Change.upsert(bound)])
    cluster.handle_events()
    ledger = cluster.worker.ledger
    assert ledger.node_state(["n1"])["n1"].requested["cpu"] == 2000
    cluster.create(pod("mine", cpu="1"))
    cluster.settle()
    assert cluster.node_of("mine") == ""  # the node is full
    mirror.apply([Change.delete("Pod", "default/ds", "u-ds")])
    cluster.handle_events()
    clock.step(10_000)  # its backoff
    cluster.flush()
    cluster.settle()
    assert cluster.node_of("mine") == "n1"
    assert ledger.check_consistency() == []


def test_deletions_match_uids_and_a_new_incarnation_replaces_the_old(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    cluster = InProcessCluster(r, keys, clock)
    mirror = StoreMirror(cluster.store)
    mirror.apply([Change.upsert(api_object(pod("p", schedulerName="x"), "old"))])
    mirror.apply([Change.upsert(api_object(pod("p", schedulerName="x"), "new"))])
    assert cluster.pod("p")["metadata"]["uid"] == "new"
    mirror.apply([Change.delete("Pod", "default/p", "old")])  # a late event of the old one
    assert cluster.pod("p")["metadata"]["uid"] == "new"
    stats = mirror.apply([Change.delete("Pod", "default/p", "new")])
    assert stats.deleted == 1 and cluster.store.get("Pod", "default/p") is None
    # The last change of a key in a batch wins.
    stats = mirror.apply(
        [
            Change.upsert(api_object(pod("q", schedulerName="x"), "q1")),
            Change.delete("Pod", "default/q", "q1"),
        ]
    )
    assert cluster.store.get("Pod", "default/q") is None and stats.created == 0


def test_a_writer_that_lost_its_lease_writes_nothing(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    cluster = InProcessCluster(r, keys, clock)
    lease = keys.lock("kube-bridge")
    r.set(lease, "bridge-a", px=60_000)
    leader = StoreMirror(cluster.store, fence=Fence(lease, "bridge-a"))
    stalled = StoreMirror(cluster.store, fence=Fence(lease, "bridge-b"))
    leader.apply([Change.upsert(api_object(pod("p", schedulerName="x"), "u1"))])
    with pytest.raises(Fenced):
        stalled.apply([Change.delete("Pod", "default/p", "u1")])
    r.delete(lease)  # expired
    with pytest.raises(Fenced):
        leader.apply([Change.delete("Pod", "default/p", "u1")])
    assert cluster.store.get("Pod", "default/p") is not None


def test_the_bridge_writer_lets_changes_gather_for_its_linger(
    r: redis.Redis, keys: Keys, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MirrorWriter: after the first watch change it waits ``linger_s`` and writes what
    came meanwhile in the same store write; a full list is written without waiting."""
    from distsched.bridge.main import MirrorWriter

    cluster = InProcessCluster(r, keys, clock)
    writer = MirrorWriter(cluster.store, None, linger_s=0.02)
    applied: list[int] = []
    apply = writer.mirror.apply
    monkeypatch.setattr(
        writer.mirror, "apply", lambda changes: applied.append(len(changes)) or apply(changes)
    )
    waits: list[float] = []

    def linger(seconds: float) -> None:  # two more pods are created meanwhile
        waits.append(seconds)
        writer.changes("Pod", [Change.upsert(api_object(pod(f"p{i}"), f"u{i}")) for i in (1, 2)])

    writer.sleep = linger
    writer.changes("Pod", [Change.upsert(api_object(pod("p0"), "u0"))])
    assert writer.drain(1.0) == 3
    assert waits == [0.02] and applied == [3]
    writer.replace("Node", [api_object(node("n1"), "node-uid")])
    assert writer.drain(1.0) == 1
    assert waits == [0.02]  # a list is not held back


def test_the_bridge_writes_no_pod_before_the_lists_it_waits_for(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    """The reflectors list at once: the pods' list may reach the writer first. Written
    first, a pending pod is queued and a worker decides it on a view without the nodes
    (every pod reported unschedulable at a bridge's start). Held, it is written after."""
    from distsched.bridge.main import MirrorWriter

    cluster = InProcessCluster(r, keys, clock)
    cluster.settle()
    writer = MirrorWriter(cluster.store, None)
    writer.pods_wait_for_lists(["Node", "Namespace", "Pod"])
    writer.replace("Pod", [api_object(pod("p0"), "u0")])
    writer.changes("Pod", [Change.upsert(api_object(pod("p1"), "u1"))])
    writer.replace("Node", [api_object(node("n1"), "node-uid")])
    writer.drain(1.0)
    assert writer.holding_pods and cluster.store.get("Pod", "default/p0") is None
    assert cluster.store.get("Node", "n1") is not None

    writer.replace("Namespace", [])
    writer.changes("Pod", [Change.upsert(api_object(pod("p2"), "u2"))])
    assert writer.drain(1.0) == 3
    assert not writer.holding_pods
    rvs = {
        name: int(cluster.store.get(kind, key)["metadata"]["resourceVersion"])
        for name, kind, key in [("n1", "Node", "n1")]
        + [(f"p{i}", "Pod", f"default/p{i}") for i in range(3)]
    }
    assert rvs["n1"] < rvs["p0"] < rvs["p1"] < rvs["p2"]  # in the order they came
    cluster.settle()
    assert {cluster.node_of(f"p{i}") for i in range(3)} == {"n1"}


@pytest.mark.parametrize("holds_room", [True, False])
def test_a_pod_bound_elsewhere_holds_its_room_before_pending_pods_are_queued(
    r: redis.Redis, keys: Keys, clock: FakeClock, holds_room: bool
) -> None:
    """Another scheduler's pod and one of ours arrive in one bridge write. The store
    queues ours as it writes it; a worker that pops it before reading the store's event
    of the other pod must still find that pod's room taken in the ledger."""
    from distsched.bridge.main import MirrorWriter

    cluster = InProcessCluster(r, keys, clock)
    ledger = cluster.worker.ledger if holds_room else None
    writer = MirrorWriter(cluster.store, None, ledger=ledger)
    writer.changes("Node", [Change.upsert(api_object(node("n1", cpu="4"), "node-uid"))])
    writer.drain(1.0)
    cluster.handle_events()
    theirs = pod("theirs", cpu="3", nodeName="n1", schedulerName="someone-else")
    writer.changes(
        "Pod",
        [
            Change.upsert(api_object(theirs, "u-theirs")),
            Change.upsert(api_object(pod("ours", cpu="2"), "u-ours")),
        ],
    )
    writer.drain(1.0)
    worker = cluster.worker
    popped = worker.queue.pop(8, now_ms=clock.now_ms())  # no event read since
    assert [p.key for p in popped] == ["default/ours"]
    worker.schedule_one_batch(popped)
    reserved = worker.ledger.pod_nodes(["default/ours"])
    if holds_room:
        assert reserved == {}  # refused by the ledger: n1 has 1 cpu left
        assert worker.ledger.pod_nodes(["default/theirs"]) == {"default/theirs": "n1"}
    else:
        assert reserved == {"default/ours": "n1"}  # the race this closes: 5 cpu on 4
