"""Issue 10, item 3: a spec update to a pod in flight is not lost (in-process worker)."""

from __future__ import annotations

import redis

from distsched.clock import FakeClock
from distsched.keys import Keys
from tests.support.objects import node, pod
from tests.workers.harness import InProcessCluster

TAINT = {"key": "dedicated", "value": "db", "effect": "NoSchedule"}
TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}


def test_a_pod_that_gains_its_toleration_while_in_flight_is_retried_at_once(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    # The worker follows every pod: its informer's copy is the one the update overtakes
    # (one that leaves pods out reads a pod from the store when it pops it).
    cluster = InProcessCluster(r, keys, clock, leave_others_pods=False)
    cluster.create(node("tainted", taints=[TAINT]), pod("db"))
    cluster.handle_events()
    popped = cluster.pop()
    # While a worker decides on the old object, the pod gains the toleration it needed.
    obj = cluster.pod("db")
    obj["spec"]["tolerations"] = [TOLERATION]
    cluster.store.update(obj)
    cluster.handle_queue_events()
    cluster.schedule(popped)  # fails: the old object does not tolerate the taint
    assert "TaintToleration" in cluster.explain("db")["plugins"]
    # kube's Update put the pod in activeQ: no backoff, no 5-minute wait.
    assert cluster.where("db") == "active"
    cluster.settle()
    assert cluster.node_of("db") == "tainted"
