"""Issue 24, item 2, in-process: a running worker goes on after Redis lost its data.

Before, the worker created its consumer group only at start: after a FLUSHALL (or a
restart without persistence) XREADGROUP raised NOGROUP on every turn and 0 of 100
re-applied pods were bound. The worker also kept mirroring the old ledger (its change
feed version and node usage), so a node full before the loss stayed full to it.

FLUSHDB stands for FLUSHALL here (the same loss, seen from one database, without
touching other databases of a shared test server); tests/reliability restarts a private
redis-server empty under real processes.
"""

from __future__ import annotations

import redis

from distsched.clock import FakeClock
from distsched.keys import Keys
from tests.support.objects import ZONE, node, pod, zone_spread
from tests.support.readers import bound_nodes
from tests.workers.harness import InProcessCluster

NODES = 4
PODS = 100


def cluster_objects(prefix: str) -> list[dict]:
    """4 nodes of 6 cpu, 100 pods of 200m: 5 of each node's 6 cpu taken (a worker that
    still sees the old usage after the loss has room for only 20 more pods)."""
    nodes = [node(f"n{i}", cpu="6", pods="110", labels={ZONE: f"z{i % 2}"}) for i in range(NODES)]
    return nodes + [pod(f"{prefix}{i:03d}", cpu="200m") for i in range(PODS)]


def test_a_running_worker_schedules_after_redis_lost_its_data(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(*cluster_objects("before"), zone_spread("spread-before"))
    cluster.settle(turns=20)
    assert len(bound_nodes(r, keys)) == PODS + 1
    assert r.smembers(keys.ledger_topology_keys) == {ZONE.encode()}

    r.flushdb()
    cluster.turn()  # notices: the consumer group is gone, the store was reset
    cluster.create(*cluster_objects("after"), *(zone_spread(f"spread-{i}") for i in range(4)))
    cluster.settle(turns=20)

    bound = bound_nodes(r, keys)
    assert len(bound) == PODS + 4, f"{len(bound)} of {PODS + 4} re-applied pods bound"
    zones = sorted(int(bound[f"default/spread-{i}"][1:]) % 2 for i in range(4))
    assert zones == [0, 0, 1, 1]  # maxSkew 1 over two zones
    # What the worker sets up once is there again: its profiles, its consumer, the
    # topology keys its constrained pods watch (else the ledger keeps no generation).
    assert r.hgetall(keys.profiles) == {b"default-scheduler": b"g"}
    consumers = r.xinfo_consumers(keys.queue_events, "queue-handlers")
    assert [c["name"] for c in consumers] == [cluster.worker.name.encode()]
    assert r.smembers(keys.ledger_topology_keys) == {ZONE.encode()}
    problems = cluster.worker.ledger.check_consistency()
    assert problems == [], problems


def test_the_store_reset_alone_is_noticed(r: redis.Redis, keys: Keys, clock: FakeClock) -> None:
    """The data went away and the store was written again before the worker's next
    turn, consumer group and all: the informer's new epoch is the sign."""
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(*cluster_objects("before"))
    cluster.settle(turns=20)
    r.flushdb()
    cluster.worker.consumer.ensure_group()  # another worker was quicker to recreate it
    cluster.create(*cluster_objects("after"))
    cluster.settle(turns=20)
    assert len(bound_nodes(r, keys)) == PODS


def test_a_pod_written_again_after_the_loss_is_not_taken_for_its_old_self(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    """The Kubernetes mode's case: after the loss the bridge writes the API server's pods
    again (bound ones with their nodeName) and the store counts resourceVersions from 0
    again. The worker parses a pod once per rv; a bound pod written under the rv its
    pending self had before the loss was taken for that pending self: adding it to the
    ledger failed on every turn, its node's room was never counted again, and the node
    was overcommitted (tests/kube: Redis restarted empty)."""
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(node("n0", cpu="4", pods="110"), pod("a0", cpu="500m"))
    cluster.settle(turns=20)
    view = cluster.worker.view
    before = cluster.pod("a0")
    pending = {**before, "metadata": {**before["metadata"], "resourceVersion": "2"}}
    pending["spec"] = {k: v for k, v in before["spec"].items() if k != "nodeName"}
    assert view.pod_from(pending).spec.node_name == ""
    again = {**pending, "spec": {**pending["spec"], "nodeName": "n0"}}  # the same rv
    assert view.pod_from(again).spec.node_name == "n0"


def test_one_bound_pod_the_ledger_refuses_does_not_hold_up_the_others(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    """A bound pod the ledger cannot hold (a request beyond 2^53-1, as another scheduler
    may have bound it) is logged and left out; the bound pods of the same batch are
    counted, and the pods after them scheduled."""
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(node("n0", cpu="4", pods="110"))
    cluster.settle(turns=5)
    huge = pod("huge", cpu=None, memory="9999999999999999999", nodeName="n0")
    theirs = [pod(f"theirs{i}", cpu="1", nodeName="n0") for i in range(3)]
    cluster.create(huge, *theirs, *(pod(f"ours{i}", cpu="1") for i in range(2)))
    cluster.settle(turns=20)
    assert all(cluster.worker.ledger.pod(f"default/theirs{i}") is not None for i in range(3))
    bound = bound_nodes(r, keys)
    ours = [k for k in bound if "/ours" in k]
    assert len(ours) == 1, f"room for one more 1-cpu pod on n0, bound: {sorted(bound)}"
