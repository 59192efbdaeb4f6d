"""A failover that keeps a pod's reservation and lease but loses its binding, in-process.

The replica had the pod created, popped (its lease) and reserved (its ledger record) when
it was promoted, not the binding the binder wrote on the old primary a moment later; the
worker's informer had read that binding already. The new primary's own writes then
carry the stream past the old position, so its entries look contiguous to the informer.
The pod's lease runs out on the new primary and a worker pops it again: a worker that
believed its view (the pod is bound) dropped the queue entry, and the pod stayed pending
for good, in no sub-queue (seen once in CI, test_failover.py, a chunk of 20 pods).

The failover here is a TCP proxy switched from the primary to the promoted replica (the
way a virtual IP or a managed endpoint fails over: the client is not told), with the
reservation, lease and binding placed on either side of the promotion by hand.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from distsched.clock import FakeClock
from distsched.connection import RedisOptions, connect, server_changes
from distsched.keys import Keys
from tests.reliability.proxy import FaultProxy
from tests.reliability.sentinels import SentinelCluster
from tests.support.objects import node, pod
from tests.support.readers import bound_nodes
from tests.workers.harness import InProcessCluster

KEYS = Keys("fview")


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[SentinelCluster]:
    cluster = SentinelCluster(tmp_path / "pair", sentinel_count=0).start()
    yield cluster
    cluster.stop()


@pytest.fixture
def proxy(pair: SentinelCluster) -> Iterator[FaultProxy]:
    p = FaultProxy("127.0.0.1", pair.data[0].port).start()
    yield p
    p.stop()


def lose_a_binding_in_a_failover(
    pair: SentinelCluster, proxy: FaultProxy, clients: tuple[redis.Redis, redis.Redis]
) -> InProcessCluster:
    """Schedule ``lost`` on the primary, promote the replica between its reservation and
    its binding, let the worker read the binding, then switch the proxy to the promoted
    replica and write past the stream position the worker reached."""
    primary, replica = pair.data
    store_client, worker_client = clients
    clock = FakeClock(1_000_000)
    cluster = InProcessCluster(store_client, KEYS, clock, worker_client=worker_client)
    cluster.create(node("n1", cpu="4"), pod("lost", cpu="1"))
    cluster.turn()  # popped, decided, reserved; the binding job is on the rq queue
    bindings = cluster.take_bindings()
    assert [b.pod_key for b in bindings] == ["default/lost"]
    assert primary.client().wait(1, 5_000) == 1  # the replica has all of that
    replica.client().replicaof("NO", "ONE")  # promoted; the primary goes on alone
    assert cluster.binder.bind(bindings).bound
    cluster.handle_events()  # the worker's informer reads the binding
    assert cluster.worker.informer.get("Pod", "default/lost")["spec"]["nodeName"] == "n1"

    proxy.target = ("127.0.0.1", replica.port)
    proxy.reset_all()
    # The new primary's own writes: its stream passes the position the informer reached.
    cluster.create(*(pod(f"after{i}", cpu="100m") for i in range(3)))
    assert not bound_nodes(store_client, KEYS).get("default/lost")
    clock.step(10 * 60_000)  # the lease and the assume deadline run out
    cluster.worker.ledger.reap_expired_assumed(clock.now_ms())
    cluster.queue.reclaim_expired_leases(now_ms=clock.now_ms())
    return cluster


def settle_and_check(cluster: InProcessCluster, store_client: redis.Redis) -> None:
    for _ in range(3):  # a requeued pod waits out its backoff
        cluster.settle(turns=20)
        cluster.clock.step(60_000)
        cluster.flush()
    bound = bound_nodes(store_client, KEYS)
    assert bound.get("default/lost") == "n1", (
        f"lost pod is {cluster.where('lost')!r} in the queue, bound to "
        f"{bound.get('default/lost')!r}"
    )
    assert {k for k in bound if k.startswith("default/after")} == {
        f"default/after{i}" for i in range(3)
    }
    assert cluster.worker.ledger.check_consistency() == []


def test_the_informer_relists_when_its_connection_reaches_another_server(
    pair: SentinelCluster, proxy: FaultProxy, caplog: pytest.LogCaptureFixture
) -> None:
    """Clients made by :func:`distsched.connection.connect` know which server each new
    connection reaches: after the switch the informer relists before it reads on, and
    the worker reads the ledger again and resyncs."""
    caplog.set_level(logging.INFO)
    clients = (connect(RedisOptions(proxy.url())), connect(RedisOptions(proxy.url())))
    cluster = lose_a_binding_in_a_failover(pair, proxy, clients)
    relists = cluster.worker.informer.relists
    cluster.handle_events()
    assert cluster.worker.informer.relists == relists + 1
    assert "informer: its connection reached another Redis server" in caplog.text
    assert "nodeName" not in cluster.worker.informer.get("Pod", "default/lost")["spec"]
    settle_and_check(cluster, clients[0])
    assert "Redis is another server now" in caplog.text
    assert cluster.worker.informer.relists == relists + 1  # the worker did not list again


def test_a_worker_checks_the_store_before_dropping_a_pod_its_view_has_bound(
    pair: SentinelCluster, proxy: FaultProxy, caplog: pytest.LogCaptureFixture
) -> None:
    """A client that cannot tell servers apart (made without ``connect``): the informer
    reads on, contiguous; the worker, about to drop a popped pod its view has bound,
    finds it pending in the store, relists and schedules it."""
    clients = (redis.Redis.from_url(proxy.url()), redis.Redis.from_url(proxy.url()))
    cluster = lose_a_binding_in_a_failover(pair, proxy, clients)
    with caplog.at_level(logging.WARNING, logger="distsched.workers.schedule_one"):
        settle_and_check(cluster, clients[0])
    assert "pending in the store" in caplog.text


def test_a_user_without_info_still_connects(pair: SentinelCluster) -> None:
    """An ACL user refused INFO: its connections work, they just cannot tell servers
    apart (the worker's store check still guards its pods)."""
    primary = pair.data[0]
    admin = primary.client()
    admin.acl_setuser(
        "noinfo", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@all", "-info"]
    )
    client = connect(RedisOptions(f"redis://noinfo:pw@127.0.0.1:{primary.port}/0"))
    assert client.set("fview:k", "v") and client.get("fview:k") == b"v"
    assert server_changes(client) == 0
    with pytest.raises(redis.exceptions.NoPermissionError):
        client.info("server")
