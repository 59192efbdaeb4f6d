"""Issue 10, item 1: nominated pods count in Filter and in preemption (in-process worker)."""

from __future__ import annotations

import redis

from distsched.clock import FakeClock
from distsched.keys import Keys
from tests.e2e.cluster import node, pod
from tests.workers.harness import InProcessCluster


def test_a_lower_priority_pod_does_not_take_the_room_a_preemptor_was_nominated_to(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(node("only", cpu="2"), pod("victim", cpu="2", nodeName="only", priority=1))
    cluster.handle_events()
    cluster.create(pod("urgent", cpu="2", priority=1000))
    cluster.settle()
    # urgent preempted victim and waits (backoff) with its nomination.
    assert cluster.store.get("Pod", "default/victim") is None
    assert cluster.pod("urgent")["status"]["nominatedNodeName"] == "only"
    assert cluster.node_of("urgent") == ""
    # sneaky arrives during urgent's backoff: kube keeps the nominated room for urgent.
    cluster.create(pod("sneaky", cpu="2", priority=0))
    cluster.settle()
    assert cluster.node_of("sneaky") == ""
    assert "NodeResourcesFit" in cluster.explain("sneaky")["plugins"]
    clock.step(1_100)
    cluster.flush()
    cluster.settle()
    assert cluster.node_of("urgent") == "only"
    assert cluster.node_of("sneaky") == ""
    # Nobody was preempted for nothing: sneaky still exists, pending.
    assert cluster.store.get("Pod", "default/sneaky") is not None
