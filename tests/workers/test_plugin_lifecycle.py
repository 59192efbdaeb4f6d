"""Issue 10, item 7: the plugin lifecycle across Reserve, Permit and the binding cycle
(in-process workers and binder, real Redis, FakeClock)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import redis

from distsched.binder.cycle import BindOutcome
from distsched.binder.jobs import Binding
from distsched.clock import FakeClock
from distsched.framework import permit
from distsched.framework.cycle_state import CycleState
from distsched.keys import Keys
from tests.support.objects import node, pod
from tests.support.waits import wait_for
from tests.workers import plugins
from tests.workers.harness import InProcessCluster


@pytest.fixture(autouse=True)
def calls() -> Iterator[list[tuple[str, str, object]]]:
    plugins.CALLS.clear()
    yield plugins.CALLS
    plugins.CALLS.clear()


def count(what: str, key: str) -> int:
    return sum(1 for w, k, _ in plugins.CALLS if w == what and k == key)


def test_reserve_plugins_get_unreserve_when_the_ledger_refuses_the_reservation(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    config = plugins.config("Recorder")
    cluster = InProcessCluster(r, keys, clock, config=config, registry=plugins.REGISTRY)
    other = cluster.add_worker()
    cluster.create(node("only", cpu="2"), pod("a", cpu="2"), pod("b", cpu="2"))
    cluster.handle_events()
    other.informer.poll_once(0)
    first, second = cluster.pop(1), other.queue.pop(1, now_ms=clock.now_ms())
    cluster.schedule(first)  # reserves the only room
    other.schedule_one_batch(second)  # decided on a stale view: the ledger refuses it
    late = second[0].key
    assert count("reserve", late) >= 1
    assert count("unreserve", late) == count("reserve", late)
    assert cluster.queue.where(late) in ("unschedulable", "backoff")


def run_bind(cluster: InProcessCluster, bindings: list[Binding]) -> tuple[threading.Thread, list]:
    out: list[BindOutcome] = []
    thread = threading.Thread(target=lambda: out.append(cluster.binder.bind(bindings)))
    thread.start()
    return thread, out


def test_a_waiting_pod_holds_only_itself_not_the_rest_of_its_binding_job(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    config = plugins.config("Gate10")
    cluster = InProcessCluster(r, keys, clock, config=config, registry=plugins.REGISTRY)
    cluster.create(node("n1"), pod("held", labels={"wait": "yes"}), pod("free"))
    cluster.turn()
    bindings = cluster.take_bindings()
    assert len(bindings) == 2  # one rq job for the pop batch
    thread, out = run_bind(cluster, bindings)
    try:
        wait_for("free to be bound", lambda: cluster.node_of("free") == "n1", 5.0)
        assert cluster.node_of("held") == ""
    finally:
        permit.allow(r, keys, "default/held", "Gate10")
        thread.join(10)
    assert not thread.is_alive()
    assert sorted(out[0].bound) == ["default/free", "default/held"]


def test_each_permit_plugin_rejects_at_its_own_timeout(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    config = plugins.config("Gate2", "Gate10")
    cluster = InProcessCluster(r, keys, clock, config=config, registry=plugins.REGISTRY)
    cluster.create(node("n1"), pod("held", labels={"wait": "yes"}))
    cluster.turn()
    bindings = cluster.take_bindings()
    thread, out = run_bind(cluster, bindings)
    try:
        clock.step(2_001)  # Gate2's 2 s passed; Gate10's 10 s did not
        thread.join(5)
        assert not thread.is_alive(), "the 2 s gate did not reject at 2 s"
    finally:
        clock.step(20_000)
        thread.join(10)
    assert "Gate2" in out[0].failed["default/held"]
    assert cluster.node_of("held") == ""
    assert cluster.where("held") == "backoff"


def test_the_binding_cycle_gets_the_scheduling_cycles_state(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    config = plugins.config("Recorder")
    cluster = InProcessCluster(r, keys, clock, config=config, registry=plugins.REGISTRY)
    cluster.create(node("n1"), pod("p"))
    cluster.settle()
    assert cluster.node_of("p") == "n1"
    seen = {w: detail for w, key, detail in plugins.CALLS if key == "default/p"}
    assert seen["prebind"] == {"node": "n1", "nth": 1}
    assert seen["postbind"] == {"node": "n1", "nth": 1}


def test_only_plain_data_of_the_cycle_state_travels_to_the_binder() -> None:
    state = CycleState()
    state.write("plain", {"a": [1, 2.5, "x", None, True]})
    state.write("huge", 2**70)
    state.write("object", object())
    state.write("bytes-key", {1: "x"})
    assert CycleState.to_wire(state) == {"plain": {"a": [1, 2.5, "x", None, True]}}
    assert CycleState.from_wire(state.to_wire()).read("plain") == {"a": [1, 2.5, "x", None, True]}
