"""Issue 10, item 1 across processes: a `distsched worker` process (workers/main.py's
wiring of the nominator) keeps the room a preemptor was nominated to."""

from __future__ import annotations

import time

import redis

from distsched.bench.procs import ProcessGroup
from distsched.keys import Keys
from distsched.store import Store
from tests.support.objects import node, pod
from tests.support.readers import bound_nodes
from tests.support.waits import wait_for


def test_a_worker_process_counts_nominated_pods_in_filter(
    private_client: redis.Redis, processes: ProcessGroup
) -> None:
    keys = Keys()
    store = Store(private_client, keys)
    store.create(node("only", cpu="2"))
    store.create(pod("victim", cpu="2", priority=1, nodeName="only"))
    processes.spawn("worker")
    processes.spawn("binder")
    store.create(pod("urgent", cpu="2", priority=1000))

    def nominated() -> bool:
        obj = store.get("Pod", "default/urgent")
        return obj is not None and obj.get("status", {}).get("nominatedNodeName") == "only"

    wait_for("urgent to preempt victim and be nominated", nominated, 20)
    store.create(pod("sneaky", cpu="2", priority=0))  # during urgent's backoff
    wait_for("urgent bound", lambda: "default/urgent" in bound_nodes(private_client, keys), 20)
    time.sleep(0.5)  # let any wrong binding of sneaky land
    assert "default/sneaky" not in bound_nodes(private_client, keys)
    assert store.get("Pod", "default/sneaky") is not None  # pending, not preempted
