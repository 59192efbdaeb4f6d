"""Issue 24, item 6: the infrastructure's failures never dead-letter a healthy pod.

Seen with Sentinel and one replica: while no replica acknowledged writes, every pop of a
pod failed its WAIT, the lease ran out 10 s later and was reclaimed, counted; after five
deliveries the pod sat in q:dead. Here (in-process worker, real Redis, FakeClock) a pod
meets six and more such failures, then the infrastructure heals and the pod binds. Only
a worker that dies mid-batch counts (tests/crash: the poison pod is still dead-lettered).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from distsched import replication
from distsched.clock import FakeClock
from distsched.framework.cycle_state import CycleState
from distsched.framework.interface import PluginSpec, ReservePlugin
from distsched.framework.status import Status
from distsched.keys import Keys
from distsched.model import Pod
from distsched.queue_redis import RedisQueue
from distsched.queue_types import QueueConfig
from distsched.replication import AckPolicy, NotReplicated
from tests.reliability.sentinels import free_port
from tests.support.objects import node, pod
from tests.workers import plugins
from tests.workers.harness import InProcessCluster

ROUNDS = QueueConfig().max_deliveries + 2
LEASE_MS = QueueConfig().lease_ms


@pytest.fixture
def unacknowledged(r: redis.Redis) -> Iterator[Callable[[bool], None]]:
    """``unacknowledged(True)``: every acknowledged write on ``r`` waits for a replica
    that never answers (WAIT 1 on a server without replicas returns 0: NotReplicated)."""

    def switch(on: bool) -> None:
        policy = AckPolicy(replicas=1, timeout_ms=1) if on else replication.NO_ACK
        replication.set_policy(r, policy)

    yield switch
    switch(False)


def test_pops_no_replica_acknowledges_are_not_deliveries(
    r: redis.Redis, keys: Keys, clock: FakeClock, unacknowledged: Callable[[bool], None]
) -> None:
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(node("n1"), pod("healthy"))
    unacknowledged(True)
    for _ in range(ROUNDS):
        with pytest.raises(NotReplicated, match="pop"):
            cluster.turn()
        # As the role's loop would: wait, and the reaper runs meanwhile.
        clock.step(LEASE_MS + 1)
        cluster.queue.reclaim_expired_leases(now_ms=clock.now_ms())
        assert cluster.where("healthy") == "active"
    unacknowledged(False)
    cluster.settle()
    assert cluster.node_of("healthy") == "n1"
    assert r.zcard(keys.dead) == 0
    info = cluster.explain("healthy")
    assert info == {}, info  # no failed attempt was ever recorded: none was made


# --- Redis goes away mid-batch ----------------------------------------------------------

TAKEN: list[redis.Redis] = []
"""Clients the Outage plugin takes Redis away from, once each, when it next runs."""


def take_redis_away(client: redis.Redis) -> int:
    """Point the client at a port nobody listens on (as a dropped network would look to
    it); returns the port to :func:`give_redis_back`."""
    kwargs = client.connection_pool.connection_kwargs
    port = int(kwargs["port"])
    kwargs["port"] = free_port()
    client.connection_pool.disconnect()
    client.connection_pool.reset()  # new connections, to the new port
    return port


def give_redis_back(client: redis.Redis, port: int) -> None:
    client.connection_pool.connection_kwargs["port"] = port
    client.connection_pool.disconnect()
    client.connection_pool.reset()


class Outage(ReservePlugin):
    """Takes Redis away from the worker after it decided, before it reserves."""

    name = "Outage"

    def __init__(self) -> None:
        self.ports: list[int] = []

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        while TAKEN:
            self.ports.append(take_redis_away(TAKEN.pop()))
        return None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        pass


OUTAGE = Outage()
REGISTRY = {
    **plugins.REGISTRY,
    "Outage": PluginSpec("Outage", lambda args, handle: OUTAGE, plugins.EVENTS),
}


def test_a_batch_cut_off_by_an_outage_is_handed_back_once_redis_answers(
    r: redis.Redis, redis_url: str, keys: Keys, clock: FakeClock
) -> None:
    """The batch fails and so does the immediate hand-back; the lease expires and the
    reaper requeues the pod (counted). The worker hands it back at its first turn that
    reaches Redis again, and the queue uncounts that delivery."""
    worker_client = redis.Redis.from_url(redis_url, retry=Retry(NoBackoff(), 0))
    config = plugins.config("Outage", registry=REGISTRY)
    cluster = InProcessCluster(
        r, keys, clock, config=config, registry=REGISTRY, worker_client=worker_client
    )
    queue = RedisQueue(r, keys)  # the test's own view: the worker's client gets cut
    cluster.create(node("n1"), pod("healthy"))
    try:
        for _ in range(ROUNDS):
            TAKEN.append(worker_client)
            with pytest.raises(redis.ConnectionError):
                cluster.turn()
            assert queue.where("default/healthy") == "inflight"
            clock.step(LEASE_MS + 1)
            assert queue.reclaim_expired_leases(now_ms=clock.now_ms()) == ["default/healthy"]
            give_redis_back(worker_client, OUTAGE.ports.pop())
        cluster.settle()
    finally:
        TAKEN.clear()
        for port in OUTAGE.ports:
            give_redis_back(worker_client, port)
        worker_client.close()
    assert cluster.node_of("healthy") == "n1"
    assert r.zcard(keys.dead) == 0
