"""Issue 10, item 11: QueueingHints in the worker's event handlers: an event moves a
parked pod only when a rejecting plugin's hint says it may help; plugins without a hint,
and ``queueing_hints=False``, keep the seed's rules (in-process worker, FakeClock)."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from distsched.clock import FakeClock
from distsched.keys import Keys
from tests.support.objects import HOSTNAME, node, pod
from tests.workers.harness import InProcessCluster


def with_affinity(obj: dict, kind: str, app: str) -> dict:
    term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": HOSTNAME}
    obj["spec"]["affinity"] = {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    return obj


def parked(queueing_hints: bool, r: redis.Redis, keys: Keys, clock: FakeClock) -> InProcessCluster:
    """n1 (2 CPU) runs `filler` (1 CPU, app=filler) and `noisy` (app=noisy, host port
    8080); parked: `web` (needs an app=db pod), `lonely` (anti-affinity to app=noisy),
    `big` (2 CPU), `wants` (host port 8080: NodePorts, a plugin without a hint)."""
    cluster = InProcessCluster(r, keys, clock, queueing_hints=queueing_hints)
    port = [{"containerPort": 80, "hostPort": 8080}]
    noisy = pod("noisy", cpu="10m", labels={"app": "noisy"}, nodeName="n1")
    noisy["spec"]["containers"][0]["ports"] = port
    wants = pod("wants", cpu="10m")
    wants["spec"]["containers"][0]["ports"] = port
    cluster.create(
        node("n1", cpu="2"),
        pod("filler", cpu="1", labels={"app": "filler"}, nodeName="n1"),
        noisy,
        with_affinity(pod("web"), "podAffinity", "db"),
        with_affinity(pod("lonely"), "podAntiAffinity", "noisy"),
        pod("big", cpu="2"),
        wants,
    )
    cluster.settle()
    for name in ("web", "lonely", "big", "wants"):
        assert cluster.where(name) == "unschedulable", name
    assert cluster.explain("wants")["plugins"] == ["NodePorts"]
    return cluster


def test_deleting_an_unrelated_pod_moves_only_the_pods_it_may_help(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    cluster = parked(True, r, keys, clock)
    cluster.store.delete("Pod", "default/filler")
    cluster.handle_events()
    assert cluster.where("big") in ("active", "backoff")  # NodeResourcesFit: room freed
    assert cluster.where("web") == "unschedulable"  # no app=db pod appeared
    assert cluster.where("lonely") == "unschedulable"  # noisy is still there
    assert cluster.where("wants") == "unschedulable"  # NodePorts: filler held no port
    # NodePorts has no node hint: the seed's pre-check stands in (n2 has the port free).
    cluster.create(node("n2", cpu="1", labels={"app": "n2"}))
    cluster.handle_events()
    assert cluster.where("wants") in ("active", "backoff")
    assert cluster.where("lonely") in ("active", "backoff")  # a new domain, no noisy there
    clock.step(1_100)
    cluster.flush()
    cluster.settle()
    assert cluster.node_of("wants") == cluster.node_of("lonely") == "n2"
    assert cluster.where("web") == "unschedulable"  # retried after n2's add: still no db
    cluster.store.delete("Pod", "default/noisy")
    cluster.handle_events()
    assert cluster.where("web") == "unschedulable"


def test_without_hints_the_seed_moves_every_interested_pod(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    cluster = parked(False, r, keys, clock)
    cluster.store.delete("Pod", "default/filler")
    cluster.handle_events()
    for name in ("web", "lonely", "big", "wants"):
        assert cluster.where(name) in ("active", "backoff"), name


def test_a_batch_of_deletions_asks_a_parked_pods_hint_until_one_says_queue(
    r: redis.Redis, keys: Keys, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A preemptor's victims are deleted together: a pod parked by NodeResourcesFit is
    queued by the first deletion its hint is asked about, not asked once per victim."""
    cluster = parked(True, r, keys, clock)
    cluster.create(pod("spare", cpu="10m", nodeName="n1"))
    cluster.handle_events()
    asked: list[str] = []
    worker = cluster.worker
    hint = worker.queueing_hint

    def counting(p: Any, plugin: str, *args: Any) -> bool | None:
        if p.metadata.name == "big":
            asked.append(plugin)
        return hint(p, plugin, *args)

    monkeypatch.setattr(worker, "queueing_hint", counting)
    cluster.store.delete_pods([("default/filler", None), ("default/spare", None)])
    cluster.handle_events()
    assert cluster.where("big") in ("active", "backoff")
    assert asked == ["NodeResourcesFit"]
