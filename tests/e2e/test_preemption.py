"""DefaultPreemption end to end: a high-priority pod evicts the lowest-priority victim."""

from __future__ import annotations

import redis

from distsched.bench.procs import ProcessGroup
from distsched.keys import Keys
from distsched.store import Store
from tests.e2e.cluster import bound_nodes, node, pod, wait_for


def test_high_priority_pod_preempts_the_lowest_priority_pod(
    private_client: redis.Redis, processes: ProcessGroup
) -> None:
    keys = Keys()
    store = Store(private_client, keys)
    store.create(node("only", cpu="2"))
    processes.spawn("worker")
    processes.spawn("binder")
    store.create_many([pod("low", cpu="1", priority=10), pod("lowest", cpu="1", priority=1)])
    wait_for(lambda: len(bound_nodes(private_client, keys)) == 2, 20, "the low pods to bind")

    store.create(pod("urgent", cpu="1", priority=1000))
    wait_for(lambda: "default/urgent" in bound_nodes(private_client, keys), 20, "preemption")
    assert store.get("Pod", "default/lowest") is None
    assert store.get("Pod", "default/low")["spec"]["nodeName"] == "only"
    assert store.get("Pod", "default/urgent")["status"].get("nominatedNodeName") == "only"

    # preemptionPolicy Never: such a pod waits instead of evicting anyone.
    store.create(pod("polite", cpu="1", priority=1000, preemptionPolicy="Never"))
    wait_for(
        lambda: private_client.zscore(keys.unschedulable, "default/polite") is not None,
        20,
        "the polite pod to be parked",
    )
    assert store.get("Pod", "default/low") is not None
