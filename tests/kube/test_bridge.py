"""The bridge's mirror of a real kube-apiserver in the store (in-process bridge, real Redis,
an in-process worker for what the queue and ledger make of it)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from distsched.bridge.convert import MIRRORED
from distsched.bridge.main import Bridge
from distsched.bridge.reflector import Reflector
from distsched.clock import FakeClock
from distsched.connection import RedisOptions, connect
from distsched.keys import Keys
from distsched.kube.client import NODES, PODS, ApiError, KubeClient
from distsched.kube.testenv import TestEnv
from distsched.store import Store
from tests.kube.helpers import api_node, api_pod, clean
from tests.reliability.proxy import FaultProxy
from tests.reliability.sentinels import SentinelCluster
from tests.support.waits import wait_for
from tests.workers.harness import InProcessCluster

pytestmark = pytest.mark.kube


@pytest.fixture
def bridge(r: redis.Redis, keys: Keys, kube: KubeClient) -> Iterator[Bridge]:
    clean(kube)
    started = Bridge(r, keys, kube, profiles=["default-scheduler"], fence=None).start()
    yield started
    started.close()


def pump(bridge: Bridge, until: Callable[[], object], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not until():
        if time.monotonic() > deadline:
            raise AssertionError("the store did not catch up with the API server")
        bridge.turn(0.05)


def stored(store: Store, kind: str, key: str) -> dict | None:
    return store.get(kind, key)


def test_nodes_and_the_pods_a_scheduler_must_know_are_mirrored(
    r: redis.Redis, keys: Keys, clock: FakeClock, kube: KubeClient, bridge: Bridge
) -> None:
    cluster = InProcessCluster(r, keys, clock)  # registers how our profile enqueues
    store = cluster.store
    kube.create(NODES, api_node("n1", cpu="2"))
    mine = kube.create(PODS, api_pod("mine", cpu="1"), "default")
    kube.create(PODS, api_pod("theirs", cpu="1", scheduler="someone-else"), "default")
    kube.create(PODS, api_pod("placed", cpu="1", node="n1"), "default")
    pump(
        bridge,
        lambda: stored(store, "Pod", "default/placed") and stored(store, "Pod", "default/mine"),
    )
    assert stored(store, "Node", "n1") is not None
    assert store.get("Pod", "default/mine")["metadata"]["uid"] == mine["metadata"]["uid"]
    assert "managedFields" not in store.get("Pod", "default/mine")["metadata"]
    assert cluster.where("mine") == "active"
    assert stored(store, "Pod", "default/theirs") is None  # pending for another scheduler
    # Another scheduler binds its pod: now it counts.
    theirs = kube.get(PODS, "theirs", "default")
    kube.bind("default", "theirs", "n1", uid=theirs["metadata"]["uid"])
    pump(bridge, lambda: stored(store, "Pod", "default/theirs"))
    cluster.handle_events()
    assert cluster.worker.ledger.node_state(["n1"])["n1"].requested["cpu"] == 2000
    # A deletion in the API server is a deletion in the store.
    kube.delete(PODS, "placed", "default", grace_period_s=0)
    pump(bridge, lambda: stored(store, "Pod", "default/placed") is None)
    cluster.handle_events()
    assert cluster.worker.ledger.node_state(["n1"])["n1"].requested["cpu"] == 1000


def test_after_the_store_lost_its_data_the_bridge_lists_everything_again(
    r: redis.Redis, keys: Keys, kube: KubeClient, bridge: Bridge
) -> None:
    store = Store(r, keys)
    kube.create(NODES, api_node("n1"))
    kube.create(PODS, api_pod("p", node="n1"), "default")
    pump(bridge, lambda: stored(store, "Pod", "default/p"))
    r.flushdb()
    pump(bridge, lambda: stored(store, "Pod", "default/p") and stored(store, "Node", "n1"))
    # Changes made after the relist still flow.
    kube.create(PODS, api_pod("q", node="n1"), "default")
    pump(bridge, lambda: stored(store, "Pod", "default/q"))


def test_a_list_writes_bound_pods_before_pending_ones(
    r: redis.Redis, keys: Keys, kube: KubeClient, bridge: Bridge
) -> None:
    """The store queues a pending pod as it writes it and a worker may decide it at once:
    the room pods bound by anyone take must be written first (the API server lists "a"
    before "z")."""
    store = Store(r, keys)
    kube.create(NODES, api_node("n1"))
    kube.create(PODS, api_pod("a-pending"), "default")
    kube.create(PODS, api_pod("z-bound", node="n1"), "default")
    pump(bridge, lambda: stored(store, "Pod", "default/z-bound"))
    r.flushdb()  # the bridge lists everything again
    pump(
        bridge,
        lambda: (
            stored(store, "Pod", "default/a-pending") and stored(store, "Pod", "default/z-bound")
        ),
    )
    bound = int(store.get("Pod", "default/z-bound")["metadata"]["resourceVersion"])
    pending = int(store.get("Pod", "default/a-pending")["metadata"]["resourceVersion"])
    assert bound < pending


def test_watches_resume_after_the_api_server_restarts(
    r: redis.Redis, keys: Keys, kube: KubeClient, bridge: Bridge, apiserver: TestEnv
) -> None:
    store = Store(r, keys)
    kube.create(NODES, api_node("n1"))
    pump(bridge, lambda: stored(store, "Node", "n1"))
    apiserver.restart_apiserver(down_s=1.0)
    kube.create(NODES, api_node("n2"))
    kube.delete(NODES, "n1")
    pump(bridge, lambda: stored(store, "Node", "n2") and not stored(store, "Node", "n1"), 60)


class _GoneOnce:
    """A client whose first watch answers 410 Gone (a version the server compacted)."""

    def __init__(self, real: KubeClient) -> None:
        self.real = real
        self.gone = False

    def list(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        return self.real.list(*args, **kwargs)

    def watch(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        if not self.gone:
            self.gone = True
            raise ApiError(410, "Expired", "too old resource version", verb="watch", what="nodes")
        return self.real.watch(*args, **kwargs)


def test_a_watch_answered_410_gone_lists_again(kube: KubeClient) -> None:
    clean(kube)
    lists: list[list[str]] = []

    class Sink:
        def replace(self, kind: str, objs: list) -> None:
            lists.append([o["metadata"]["name"] for o in objs])

        def changes(self, kind: str, changes: list) -> None:
            pass

    import threading

    stop = threading.Event()
    node_kind = next(m for m in MIRRORED if m.kind == "Node")
    reflector = Reflector(
        _GoneOnce(kube),  # type: ignore[arg-type]
        node_kind,
        Sink(),
        profiles=["default-scheduler"],
        stop=stop,
        watch_timeout_s=2,
    ).start()
    try:
        kube.create(NODES, api_node("n1"))
        wait_for("a second list", lambda: len(lists) >= 2, 20)
        assert len(lists) >= 2 and reflector.lists >= 2
    finally:
        stop.set()


def test_after_a_failover_the_bridge_writes_again_what_the_new_primary_lacks(
    kube: KubeClient, tmp_path: Path
) -> None:
    """The bridge mirrored a pod onto the primary just before the replica was promoted,
    without it: its digest says written, the new primary has no such pod. A client made by
    ``connect`` sees its connections reach another server, and the bridge lists again."""
    clean(kube)
    keys = Keys("bridgefo")
    pair = SentinelCluster(tmp_path / "pair", sentinel_count=0).start()
    proxy = FaultProxy("127.0.0.1", pair.data[0].port).start()
    primary, replica = pair.data
    client = connect(RedisOptions(proxy.url()))
    bridge = Bridge(client, keys, kube, profiles=["default-scheduler"], fence=None).start()
    try:
        store = Store(client, keys)
        kube.create(NODES, api_node("n1"))
        kube.create(PODS, api_pod("before", node="n1"), "default")
        pump(bridge, lambda: stored(store, "Pod", "default/before"))
        assert primary.client().wait(1, 5_000) == 1
        replica.client().replicaof("NO", "ONE")
        kube.create(PODS, api_pod("late", node="n1"), "default")
        pump(bridge, lambda: stored(store, "Pod", "default/late"))  # on the old primary
        proxy.target = ("127.0.0.1", replica.port)
        proxy.reset_all()
        assert not replica.client().hexists(keys.store_meta("Pod"), "default/late")
        pump(bridge, lambda: stored(store, "Pod", "default/late"))
        assert replica.client().hexists(keys.store_meta("Pod"), "default/late")
    finally:
        bridge.close()
        proxy.stop()
        pair.stop()
