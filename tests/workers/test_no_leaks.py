"""Issue 24, item 1: a deleted pod never keeps a reservation (in-process workers, real
Redis, FakeClock). Under churn the ledger kept pods that were bound and then deleted: a
bound pod was recorded from an event or a listing older than the store after its
deletion had already been handled, and nothing ever took the record out again."""

from __future__ import annotations

from typing import Any, cast

import redis

from distsched.clock import FakeClock
from distsched.keys import Keys
from distsched.store import trim
from distsched.workers.eventhandlers import GROUP
from distsched.workers.maintenance import trim_event_streams
from tests.support.objects import node, pod
from tests.workers.harness import InProcessCluster


def ledger_pods(r: redis.Redis, keys: Keys) -> set[str]:
    return {k.decode() for k in r.hkeys(keys.ledger_pods)}


def test_a_binding_handled_after_the_pods_deletion_records_nothing(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    cluster = InProcessCluster(r, keys, clock)
    a = cluster.worker
    b = cluster.add_worker()
    cluster.create(node("n1", cpu="4"))
    cluster.handle_events()
    # A pod another scheduler placed: its ADDED event (already bound) is for the handlers.
    cluster.create(pod("p", cpu="1", nodeName="n1"))
    # Worker A reads that event but has not handled it yet...
    reply = cast(Any, r.xreadgroup(GROUP, a.name, {keys.queue_events: ">"}, count=100))
    entries = reply[0][1]
    assert [f[b"type"] for _, f in entries][-1] == b"ADDED"
    # ...while the pod is deleted and worker B handles the deletion first.
    cluster.store.delete("Pod", "default/p")
    while b.consumer.poll(None):
        pass
    assert ledger_pods(r, keys) == set()
    a.consumer._handle(entries)
    assert ledger_pods(r, keys) == set()
    assert r.smembers(keys.ledger_node_pods("n1")) == set()
    assert a.ledger.node_state(["n1"])["n1"].requested.get("cpu", 0) == 0


def test_a_resync_from_a_listing_older_than_the_store_records_no_deleted_pod(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(node("n1", cpu="4"), pod("p", cpu="1"))
    cluster.settle()
    assert cluster.node_of("p") == "n1"
    cluster.handle_events()
    # The pod is deleted; the worker's informer has not seen it yet when the periodic
    # resync lists what the informer holds.
    cluster.store.delete("Pod", "default/p")
    cluster.worker.ledger.pod_deleted("default/p")  # as the handlers would have done
    cluster.worker.resync()
    assert ledger_pods(r, keys) == set()
    cluster.handle_events()
    assert ledger_pods(r, keys) == set()
    assert cluster.worker.ledger.check_consistency() == []


def per_pod_keys(r: redis.Redis, keys: Keys) -> dict[str, int]:
    """What is left per pod once every pod is gone: ledger and queue records, explain
    records, Permit verdict lists, pods on ledger nodes."""
    left = {
        "ledger": r.hlen(keys.ledger_pods),
        "assumed": r.zcard(keys.ledger_assumed),
        "aapods": r.hlen(keys.ledger_anti_affinity_pods),
        "queue": r.hlen(keys.info),
        "explain": r.hlen(keys.explain),
        "store": r.hlen(keys.objects("Pod")) + r.hlen(keys.store_meta("Pod")),
        "permit": len(list(r.scan_iter(keys.permit("*")))),
    }
    left["nodepods"] = sum(
        r.scard(keys.ledger_node_pods(n.decode())) for n in r.smembers(keys.ledger_nodes)
    )
    return {k: v for k, v in left.items() if v}


def test_churn_then_delete_all_leaves_nothing_per_pod_and_short_streams(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    cluster = InProcessCluster(r, keys, clock)
    b = cluster.add_worker()
    cluster.create(*(node(f"n{i}", cpu="4") for i in range(4)))
    created: list[str] = []
    for wave in range(6):
        names = [f"w{wave}-{i}" for i in range(100)]
        cluster.create(*(pod(n, cpu="100m") for n in names))
        created += names
        cluster.settle()
        # Half of the previous wave goes, handled by one worker or the other.
        for n in created[:50]:
            cluster.store.delete("Pod", f"default/{n}")
        created = created[50:]
        (b if wave % 2 else cluster.worker).consumer.poll(None)
    for n in created:
        cluster.store.delete("Pod", f"default/{n}")
    for worker in (cluster.worker, b):
        while worker.consumer.poll(None) or worker.informer.poll_once(0):
            pass
    cluster.handle_events()
    assert per_pod_keys(r, keys) == {}
    assert cluster.worker.ledger.check_consistency() == []
    assert r.xlen(keys.events) > 1_500
    clock.step(trim.REPORT_INTERVAL_MS)  # the informers report how far they have read
    for worker in (cluster.worker, b):
        worker.informer.poll_once(0)
    trim_event_streams(r, keys, clock.now_ms())
    assert r.xlen(keys.events) < trim.KEEP_EVENTS + 200
    assert r.xlen(keys.queue_events) < 200
