"""Issue 10, item 5: podInitialBackoffSeconds / podMaxBackoffSeconds reach every backoff
(the worker's failure handler, the binder's, the assumed-pod reaper)."""

from __future__ import annotations

import redis

from distsched.clock import FakeClock
from distsched.framework import permit
from distsched.keys import Keys
from tests.support.objects import node, pod
from tests.workers import plugins
from tests.workers.harness import InProcessCluster

BACKOFF = "podInitialBackoffSeconds: 3\npodMaxBackoffSeconds: 7"


def backoff_ms(cluster: InProcessCluster, name: str) -> int:
    info = cluster.queue.info(f"default/{name}")
    assert info is not None
    return int(info["bo"]) - int(info["ts"])


def test_the_worker_backs_off_as_configured(r: redis.Redis, keys: Keys, clock: FakeClock) -> None:
    cluster = InProcessCluster(r, keys, clock, config=plugins.config(extra=BACKOFF))
    cluster.create(node("small", cpu="1"), pod("big", cpu="2"))
    seen = []
    for _ in range(3):
        cluster.settle()
        assert cluster.where("big") == "unschedulable"
        seen.append(backoff_ms(cluster, "big"))
        cluster.queue.move_all_to_active_or_backoff(
            "test", now_ms=clock.now_ms(), interested_plugins=None
        )
        clock.step(8_000)
        cluster.flush()
    assert seen == [3_000, 6_000, 7_000]


def test_the_binder_and_the_reaper_back_off_as_configured(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    config = plugins.config("Gate2", extra=BACKOFF)
    cluster = InProcessCluster(r, keys, clock, config=config, registry=plugins.REGISTRY)
    cluster.create(node("n1"), pod("held", labels={"wait": "yes"}), pod("lost"))
    cluster.turn()
    held, lost = sorted(cluster.take_bindings(), key=lambda b: b.pod_key)
    # The binder's failure path: the gate rejects the held pod.
    permit.reject(r, keys, held.pod_key, "Gate2", "no")
    assert held.pod_key in cluster.binder.bind([held]).failed
    assert cluster.where("held") == "backoff"
    assert backoff_ms(cluster, "held") == 3_000
    # The reaper: the binding of "lost" never runs; its reservation expires.
    clock.step(cluster.worker.ledger.config.assume_ttl_ms + 1)
    assert cluster.worker.ledger.reap_expired_assumed(clock.now_ms()) == [lost.pod_key]
    assert cluster.where("lost") == "backoff"
    info = cluster.queue.info(lost.pod_key)
    assert info is not None and int(info["bo"]) == clock.now_ms() + 3_000
