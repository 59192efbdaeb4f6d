"""Issue 12's end-to-end check with real processes: the public-style manifests of
tests/controllers/manifests applied unchanged with `distsched apply`, two controller
instances (one leads), a worker and a binder. Pods land as kube would place them
(frontend anti-affinity per host, ZooKeeper one per zone, fluentd one per node including
the tainted control plane and the cordoned worker, pi 3 at a time, priorities from the
class), re-apply scales, a new node gets its DaemonSet pod, and the independent checker
finds every invariant holding after each step."""

from __future__ import annotations

import redis
from click.testing import CliRunner

from distsched.bench.checker import check
from distsched.bench.procs import ProcessGroup
from distsched.cli import main
from distsched.embedded import EmbeddedRedis
from distsched.keys import Keys
from distsched.store import Store
from tests.controllers.helpers import MANIFESTS
from tests.support.objects import ZONE, node
from tests.support.readers import bound_nodes
from tests.support.waits import wait_for


def apply(url: str, path: str) -> None:
    result = CliRunner(env={"DISTSCHED_REDIS_URL": None}).invoke(
        main, ["apply", "-f", path, "--redis-url", url]
    )
    assert result.exit_code == 0, result.output


def pods_named(bound: dict[str, str], prefix: str) -> dict[str, str]:
    return {k: v for k, v in bound.items() if k.split("/", 1)[1].startswith(prefix)}


def settled(client: redis.Redis, keys: Keys, count: int) -> bool:
    if len(bound_nodes(client, keys)) != count or client.hlen(keys.store_meta("Pod")) != count:
        return False
    if client.hlen(keys.ledger_pods) != count:  # the workers saw every delete too
        return False
    pipe = client.pipeline(transaction=False)
    for key in (keys.active, keys.backoff, keys.inflight, keys.ledger_assumed):
        pipe.zcard(key)
    return sum(pipe.execute()) == 0


def test_manifests_people_have_land_as_kube_would_place_them(
    private_redis: EmbeddedRedis,
    private_client: redis.Redis,
    processes: ProcessGroup,
    tmp_path,
) -> None:
    keys = Keys("default")
    url = private_redis.url
    processes.spawn("worker")
    processes.spawn("binder")
    processes.spawn("controller", "--lease-ms", "3000")
    processes.spawn("controller", "--lease-ms", "3000")
    apply(url, str(MANIFESTS))
    # frontend 3 + redis-leader 1 + zk 3 + pi 3 + fluentd 7 (every node).
    wait_for("17 pods bound", lambda: settled(private_client, keys, 17), 90)
    bound = bound_nodes(private_client, keys)
    nodes = {n["metadata"]["name"]: n for n in Store(private_client, keys).list("Node")[0]}

    frontend = pods_named(bound, "frontend-")
    assert len(frontend) == 3 and len(set(frontend.values())) == 3  # one per host
    assert not set(frontend.values()) & {"cp-1", "worker-6"}  # taint, cordon
    zones = {nodes[n]["metadata"]["labels"][ZONE] for n in pods_named(bound, "zk-").values()}
    assert zones == {"zone-a", "zone-b", "zone-c"}  # maxSkew 1 over three zones
    fluentd = pods_named(bound, "fluentd-elasticsearch-")
    assert sorted(fluentd.values()) == sorted(nodes)
    assert len(pods_named(bound, "pi-")) == 3
    store = Store(private_client, keys)
    some_frontend = store.get("Pod", next(iter(frontend)))
    assert some_frontend is not None and some_frontend["spec"]["priority"] == 100000
    assert check(private_client, keys, expect_bound=set(bound)) == []

    # Scale by re-apply: 5 frontends fit on the 5 schedulable workers, one each.
    scaled = tmp_path / "frontend.yaml"
    text = (MANIFESTS / "guestbook.yaml").read_text()
    scaled.write_text(text.replace("replicas: 3", "replicas: 5"))
    apply(url, str(scaled))
    wait_for("19 pods bound", lambda: settled(private_client, keys, 19), 60)
    frontend = pods_named(bound_nodes(private_client, keys), "frontend-")
    assert len(set(frontend.values())) == 5
    scaled.write_text(text.replace("replicas: 3", "replicas: 2"))
    apply(url, str(scaled))
    wait_for("scaled down to 2 frontends", lambda: settled(private_client, keys, 16), 60)

    # A new node gets its DaemonSet pod (and nothing else moves).
    store.create(node("worker-7", cpu="4", memory="8Gi", labels={ZONE: "zone-c"}))
    wait_for("fluentd on worker-7", lambda: settled(private_client, keys, 17), 60)
    fluentd = pods_named(bound_nodes(private_client, keys), "fluentd-elasticsearch-")
    assert "worker-7" in fluentd.values()
    bound = bound_nodes(private_client, keys)
    assert check(private_client, keys, expect_bound=set(bound)) == []

    # Deleting the owner deletes its pods.
    store.delete("DaemonSet", "kube-system/fluentd-elasticsearch")
    wait_for("fluentd pods deleted", lambda: settled(private_client, keys, 9), 60)
    assert check(private_client, keys, expect_bound=set(bound_nodes(private_client, keys))) == []
