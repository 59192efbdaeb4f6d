"""AssignedPodAdd: a pod waiting for a required pod-affinity partner moves when one binds."""

from __future__ import annotations

import redis

from distsched.bench.procs import ProcessGroup
from distsched.keys import Keys
from distsched.queue_types import decode_info
from distsched.store import Store
from tests.support.objects import ZONE, node, pod
from tests.support.readers import bound_nodes
from tests.support.waits import wait_for


def test_pod_waiting_for_its_affinity_partner_binds_when_the_partner_binds(
    private_client: redis.Redis, processes: ProcessGroup
) -> None:
    keys = Keys()
    store = Store(private_client, keys)
    store.create_many([node("a1", labels={ZONE: "a"}), node("b1", labels={ZONE: "b"})])
    processes.spawn("worker")
    processes.spawn("binder")
    term = {"topologyKey": ZONE, "labelSelector": {"matchLabels": {"app": "db"}}}
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    store.create(pod("web", labels={"app": "web"}, affinity=affinity))

    def info() -> dict:
        raw = private_client.hget(keys.info, "default/web")
        return decode_info("default/web", raw) if raw else {}

    wait_for("web to wait for a db pod", lambda: info().get("w") == "unschedulable", 20)
    assert "InterPodAffinity" in info()["pl"]

    # An unrelated pod binding does not help; a db pod binding in zone b does.
    store.create(pod("other", labels={"app": "other"}, nodeSelector={ZONE: "a"}))
    wait_for("other to bind", lambda: "default/other" in bound_nodes(private_client, keys), 20)
    store.create(pod("db", labels={"app": "db"}, nodeSelector={ZONE: "b"}))
    wait_for("web to follow db", lambda: "default/web" in bound_nodes(private_client, keys), 10)
    assert bound_nodes(private_client, keys)["default/web"] == "b1"
