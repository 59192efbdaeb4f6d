"""Event-driven requeue with the NodeAdd pre-check, end to end with real processes."""

from __future__ import annotations

import time

import redis

from distsched.bench.procs import ProcessGroup
from distsched.keys import Keys
from distsched.queue_types import decode_info
from distsched.store import Store
from tests.support.objects import node, pod
from tests.support.readers import bound_nodes
from tests.support.waits import seconds_until, wait_for


def test_pod_that_fits_nowhere_is_bound_soon_after_a_fitting_node_arrives(
    private_client: redis.Redis, processes: ProcessGroup
) -> None:
    keys = Keys()
    store = Store(private_client, keys)
    store.create_many([node("small-1", cpu="1"), node("small-2", cpu="1")])
    processes.spawn("worker")
    processes.spawn("binder")
    store.create(pod("big", cpu="4"))

    def info() -> dict:
        raw = private_client.hget(keys.info, "default/big")
        return decode_info("default/big", raw) if raw else {}

    wait_for("the pod to be unschedulable", lambda: info().get("w") == "unschedulable", 30)
    assert "NodeResourcesFit" in info()["pl"]
    attempts = info()["a"]
    time.sleep(1.2)  # past the 1 s backoff of its first attempt

    # A node that does not fit the pod: the pre-check keeps it where it is.
    store.create(node("medium", cpu="2"))
    time.sleep(1.5)
    assert info().get("w") == "unschedulable"
    assert info()["a"] == attempts

    # A node that fits: NodeAdd moves it, well before the 5-minute leftover flush.
    store.create(node("large", cpu="8"))
    took = seconds_until("the bind", lambda: "default/big" in bound_nodes(private_client, keys), 5)
    assert bound_nodes(private_client, keys)["default/big"] == "large"
    assert took < 2.0, f"bound {took:.2f}s after the node was added"
