"""DefaultPreemption end to end: a high-priority pod evicts the lowest-priority victim."""

from __future__ import annotations

import redis

from distsched import event_log
from distsched.bench.procs import ProcessGroup
from distsched.keys import Keys
from distsched.store import Store
from tests.support.objects import node, pod
from tests.support.readers import bound_nodes
from tests.support.waits import wait_for


def test_high_priority_pod_preempts_the_lowest_priority_pod(
    private_client: redis.Redis, processes: ProcessGroup
) -> None:
    keys = Keys()
    store = Store(private_client, keys)
    store.create(node("only", cpu="2"))
    processes.spawn("worker")
    processes.spawn("binder")
    store.create_many([pod("low", cpu="1", priority=10), pod("lowest", cpu="1", priority=1)])
    wait_for("the low pods to bind", lambda: len(bound_nodes(private_client, keys)) == 2, 20)

    store.create(pod("urgent", cpu="1", priority=1000))
    wait_for("preemption", lambda: "default/urgent" in bound_nodes(private_client, keys), 20)
    assert store.get("Pod", "default/lowest") is None
    assert store.get("Pod", "default/low")["spec"]["nodeName"] == "only"
    assert store.get("Pod", "default/urgent")["status"].get("nominatedNodeName") == "only"

    # preemptionPolicy Never: such a pod waits instead of evicting anyone.
    store.create(pod("polite", cpu="1", priority=1000, preemptionPolicy="Never"))
    wait_for(
        "the polite pod to be parked",
        lambda: private_client.zscore(keys.unschedulable, "default/polite") is not None,
        20,
    )
    assert store.get("Pod", "default/low") is not None

    # What kube-scheduler would have written as Events, read back as `get events` does.
    wait_for(
        "the polite pod's FailedScheduling event",
        lambda: any(
            e["involvedObject"]["name"] == "polite" for e in event_log.read(private_client, keys)
        ),
        20,
    )
    seen = {
        (e["involvedObject"]["name"], e["reason"]): e for e in event_log.read(private_client, keys)
    }
    assert {"low", "urgent"} <= {name for name, reason in seen if reason == "Scheduled"}
    urgent_uid = store.get("Pod", "default/urgent")["metadata"]["uid"]
    preempted = seen["lowest", "Preempted"]
    assert preempted["message"] == f"Preempted by pod {urgent_uid} on node only"
    assert seen["urgent", "FailedScheduling"]["message"].startswith("0/1 nodes are available")
    assert seen["polite", "FailedScheduling"]["type"] == "Warning"
