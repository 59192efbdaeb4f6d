"""Issue 10, items 2, 4, 6 and the item-8 smalls of the event handlers: which events
move which pods, and that every move is a move request (in-process worker, FakeClock)."""

from __future__ import annotations

import threading

import pytest
import redis

from distsched.clock import FakeClock
from distsched.keys import Keys
from tests.support.objects import HOSTNAME, node, pod
from tests.workers import plugins
from tests.workers.harness import InProcessCluster

# With QueueingHints (the default) and with the seed's rules only.
HINTS = pytest.mark.parametrize("hints", [True, False], ids=["hints", "seed"])


@HINTS
def test_a_pod_in_flight_while_a_fitting_node_is_added_goes_to_backoff(
    r: redis.Redis, keys: Keys, clock: FakeClock, hints: bool
) -> None:
    cluster = InProcessCluster(r, keys, clock, queueing_hints=hints)
    cluster.create(node("small", cpu="1"), pod("big", cpu="2"))
    cluster.handle_events()
    popped = cluster.pop()
    # While the worker decides on its snapshot, a node that fits is added; no pod is
    # parked yet, so the event moves nobody, but it is a move request.
    cluster.create(node("large", cpu="4"))
    cluster.handle_queue_events()
    cluster.schedule(popped)
    assert cluster.where("big") == "backoff"  # kube: moveRequestCycle >= the pod's cycle
    clock.step(1_001)
    cluster.flush()
    cluster.settle()
    assert cluster.node_of("big") == "large"


@HINTS
def test_a_pod_in_flight_while_an_unrelated_assigned_pod_is_added_goes_to_backoff(
    r: redis.Redis, keys: Keys, clock: FakeClock, hints: bool
) -> None:
    cluster = InProcessCluster(r, keys, clock, queueing_hints=hints)
    web = pod("web", labels={"app": "web"})
    web["spec"]["affinity"] = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": HOSTNAME}
            ]
        }
    }
    cluster.create(node("n1"), web)
    cluster.handle_events()
    popped = cluster.pop()
    # A running pod that matches nobody's affinity: it moves nobody, yet it is a move
    # request (kube's movePodsToActiveOrBackoffQueue sets moveRequestCycle regardless).
    cluster.create(pod("other", labels={"app": "other"}, nodeName="n1"))
    cluster.handle_queue_events()
    cluster.schedule(popped)
    assert cluster.where("web") == "backoff"


@HINTS
def test_relabelling_a_running_pod_moves_the_pod_whose_affinity_it_now_satisfies(
    r: redis.Redis, keys: Keys, clock: FakeClock, hints: bool
) -> None:
    cluster = InProcessCluster(r, keys, clock, queueing_hints=hints)
    web = pod("web")
    web["spec"]["affinity"] = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": HOSTNAME}
            ]
        }
    }
    cluster.create(node("n1"), pod("db", labels={"app": "old"}, nodeName="n1"), web)
    cluster.settle()
    assert cluster.where("web") == "unschedulable"
    clock.step(2_000)  # past web's backoff
    running = cluster.pod("db")
    running["metadata"]["labels"] = {"app": "db"}
    cluster.store.update(running)
    cluster.handle_events()
    assert cluster.where("web") == "active"  # AssignedPodUpdated, not the 5-minute flush
    cluster.settle()
    assert cluster.node_of("web") == "n1"


@HINTS
def test_deleting_a_reserved_unbound_pod_moves_the_pods_waiting_for_its_room(
    r: redis.Redis, keys: Keys, clock: FakeClock, hints: bool
) -> None:
    cluster = InProcessCluster(r, keys, clock, queueing_hints=hints)
    cluster.create(node("only", cpu="2"), pod("first", cpu="2"))
    cluster.turn()
    assert len(cluster.take_bindings()) == 1  # reserved; its binding is never run
    cluster.create(pod("second", cpu="2"))
    cluster.settle()
    assert cluster.where("second") == "unschedulable"
    cluster.store.delete("Pod", "default/first")
    cluster.handle_events()
    assert cluster.where("second") in ("active", "backoff")
    clock.step(1_001)
    cluster.flush()
    cluster.settle()
    assert cluster.node_of("second") == "only"


def test_bookkeeping_only_changes_do_not_move_an_unschedulable_pod(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(node("small", cpu="1"), pod("big", cpu="2"))
    cluster.settle()
    assert cluster.where("big") == "unschedulable"
    obj = cluster.pod("big")
    obj["metadata"]["finalizers"] = ["example.com/keep"]
    obj["metadata"]["generation"] = 7
    obj["metadata"]["managedFields"] = [{"manager": "kubectl", "operation": "Update"}]
    cluster.store.update(obj)
    cluster.handle_events()
    assert cluster.where("big") == "unschedulable"  # kube's isPodUpdated ignores them
    obj = cluster.pod("big")
    obj["metadata"]["labels"] = {"tier": "x"}
    cluster.store.update(obj)
    cluster.handle_events()
    assert cluster.where("big") in ("active", "backoff")


def test_a_node_update_is_one_move_for_its_first_change(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    # kube's nodeSchedulingPropertiesChange (the seed) returns the first change that
    # applies and makes one MoveAllToActiveOrBackoffQueue of it.
    cluster = InProcessCluster(r, keys, clock)
    picky = pod("picky")
    picky["spec"]["nodeSelector"] = {"zone": "a"}
    cluster.create(node("n1", cpu="1"), pod("big", cpu="2"), picky)
    cluster.settle()
    assert cluster.where("big") == cluster.where("picky") == "unschedulable"
    calls: list[str] = []
    original = cluster.queue.move_all_to_active_or_backoff

    def counting(event: str, **kwargs: object) -> int:
        calls.append(event)
        return original(event, **kwargs)  # type: ignore[arg-type]

    cluster.queue.move_all_to_active_or_backoff = counting  # type: ignore[method-assign]
    obj = cluster.store.get("Node", "n1")
    assert obj is not None
    obj["status"]["allocatable"]["cpu"] = "4"
    obj["metadata"]["labels"]["zone"] = "a"
    cluster.store.update(obj)
    cluster.handle_events()
    assert calls == ["NodeAllocatableChange"]
    assert cluster.where("big") == "backoff"
    clock.step(1_001)
    cluster.flush()
    cluster.settle()
    assert cluster.node_of("big") == "n1"


def test_deleting_a_pod_that_waits_on_permit_stops_the_wait(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    # kube's RejectWaitingPod: the binder holding the deleted pod lets go at once.
    config = plugins.config("Gate10")
    cluster = InProcessCluster(r, keys, clock, config=config, registry=plugins.REGISTRY)
    cluster.create(node("n1"), pod("held", labels={"wait": "yes"}))
    cluster.turn()
    bindings = cluster.take_bindings()
    thread = threading.Thread(target=cluster.binder.bind, args=(bindings,))
    thread.start()
    try:
        cluster.store.delete("Pod", "default/held")
        cluster.handle_events()
        thread.join(5)
        assert not thread.is_alive(), "the binder still waits for a deleted pod"
    finally:
        clock.step(20_000)
        thread.join(10)
    assert cluster.worker.ledger.node_state(["n1"])["n1"].pods == ()
