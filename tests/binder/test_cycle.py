"""The binding cycle in-process: claim, bind, confirm, duplicates, stale jobs, failures."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import redis

from distsched import metrics
from distsched.bench.binder_pool import (
    bind_events,
    create_cluster,
    node_manifest,
    pod_manifest,
    reserve_round_robin,
)
from distsched.binder.cycle import Binder, BindOutcome
from distsched.binder.jobs import Binding
from distsched.cache.ledger import Ledger
from distsched.clock import FakeClock
from distsched.framework.cycle_state import CycleState
from distsched.framework.interface import Handle, PluginSpec, PostBindPlugin, PreBindPlugin
from distsched.framework.profile import parse_config
from distsched.framework.registry import IN_TREE_REGISTRY
from distsched.framework.status import Code, Status
from distsched.keys import Keys
from distsched.model import Pod
from distsched.queue_redis import RedisQueue
from distsched.store import Store
from tests.binder.helpers import NODES, TTL, reserved


def counted(result: str) -> float:
    value = metrics.REGISTRY.get_sample_value("distsched_bindings_total", {"result": result})
    return value or 0.0


def requested_cpu(ledger: Ledger) -> dict[str, int]:
    return {n: s.requested.get("cpu", 0) for n, s in ledger.node_state(NODES).items()}


def test_bind_binds_confirms_and_counts(r: redis.Redis, keys: Keys, clock: FakeClock) -> None:
    bindings = reserved(r, keys, clock, 4)
    before = counted("bound")
    binder = Binder(r, keys, clock=clock, ledger_config=TTL)
    outcome = binder.bind(bindings)
    assert sorted(outcome.bound) == sorted(b.pod_key for b in bindings)
    assert not (outcome.duplicate or outcome.stale or outcome.failed)
    store, ledger, queue = Store(r, keys, clock=clock), Ledger(r, keys, clock), RedisQueue(r, keys)
    for b in bindings:
        obj = store.get("Pod", b.pod_key)
        assert obj is not None and obj["spec"]["nodeName"] == b.node
        record = ledger.pod(b.pod_key)
        assert record is not None and record.state == "bound" and record.node == b.node
        assert queue.info(b.pod_key) is None  # left the queue for good
    assert ledger.assumed_pods() == {}
    assert ledger.check_consistency() == []
    assert requested_cpu(ledger) == {"node-a": 1000, "node-b": 1000}
    assert bind_events(r, keys) == {b.pod_key: 1 for b in bindings}
    assert counted("bound") - before == 4


def test_the_same_job_twice_binds_once(r: redis.Redis, keys: Keys, clock: FakeClock) -> None:
    bindings = reserved(r, keys, clock, 3)
    binder = Binder(r, keys, clock=clock, ledger_config=TTL)
    binder.bind(bindings)
    before = counted("duplicate")
    again = binder.bind(bindings)
    assert sorted(again.duplicate) == sorted(b.pod_key for b in bindings)
    assert not (again.bound or again.stale or again.failed)
    assert counted("duplicate") - before == 3
    assert bind_events(r, keys) == {b.pod_key: 1 for b in bindings}
    assert Ledger(r, keys, clock).check_consistency() == []


def test_a_job_killed_after_the_store_write_is_finished_by_its_rerun(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    bindings = reserved(r, keys, clock, 2)
    store = Store(r, keys, clock=clock)
    # What a binder killed between the store write and the ledger confirm leaves behind.
    store.bind_many([(b.pod_key, b.uid, b.node) for b in bindings])
    ledger = Ledger(r, keys, clock)
    assert set(ledger.assumed_pods()) == {b.pod_key for b in bindings}
    outcome = Binder(r, keys, clock=clock, ledger_config=TTL).bind(bindings)
    assert sorted(outcome.duplicate) == sorted(b.pod_key for b in bindings)
    assert ledger.assumed_pods() == {}
    assert all(ledger.pod(b.pod_key).state == "bound" for b in bindings)  # type: ignore[union-attr]
    assert bind_events(r, keys) == {b.pod_key: 1 for b in bindings}


def test_a_job_whose_reservation_was_reaped_binds_nothing(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    bindings = reserved(r, keys, clock, 2)
    ledger = Ledger(r, keys, clock)
    clock.step(TTL.assume_ttl_ms + 1)
    assert sorted(ledger.reap_expired_assumed()) == sorted(b.pod_key for b in bindings)
    before = counted("stale")
    outcome = Binder(r, keys, clock=clock, ledger_config=TTL).bind(bindings)
    assert sorted(outcome.stale) == sorted(b.pod_key for b in bindings)
    assert not (outcome.bound or outcome.duplicate or outcome.failed)
    assert counted("stale") - before == 2
    assert bind_events(r, keys) == {}
    queue = RedisQueue(r, keys)
    assert all(queue.where(b.pod_key) == "backoff" for b in bindings)  # the reaper's requeue
    assert requested_cpu(ledger) == {"node-a": 0, "node-b": 0}


def waiting_on_permit(bindings: list[Binding]) -> list[Binding]:
    """The same bindings held by a Permit plugin: their binding cycle takes time, so the
    binder claims them first."""
    return [replace(b, permit_plugins=("Gate",), permit_deadline_ms=1) for b in bindings]


def test_the_claim_renews_the_assume_deadline(r: redis.Redis, keys: Keys, clock: FakeClock) -> None:
    bindings = waiting_on_permit(reserved(r, keys, clock, 2))
    ledger = Ledger(r, keys, clock)
    reserved_until = ledger.assumed_pods()
    clock.step(TTL.assume_ttl_ms - 1)  # a job that waited in rq almost until the deadline
    binder = Binder(r, keys, clock=clock, ledger_config=TTL)
    claimed = binder.claim(bindings, BindOutcome())
    assert claimed == bindings
    renewed = ledger.assumed_pods()
    assert all(renewed[k] == clock.now_ms() + TTL.assume_ttl_ms for k in reserved_until)
    clock.step(2)  # past the original deadline: the reaper must leave them to the binder
    assert ledger.reap_expired_assumed() == []


def test_a_default_binding_needs_no_claim(r: redis.Redis, keys: Keys, clock: FakeClock) -> None:
    """DefaultBinder alone, no Permit wait: the store's bind script checks the reservation
    and binds in one step, so the binder does not claim first."""
    bindings = reserved(r, keys, clock, 2)
    ledger = Ledger(r, keys, clock)
    deadlines = ledger.assumed_pods()
    clock.step(1000)
    binder = Binder(r, keys, clock=clock, ledger_config=TTL)
    assert binder.claim(bindings, BindOutcome()) == bindings
    assert ledger.assumed_pods() == deadlines  # not renewed: nothing waits in between


def test_a_claim_never_renews_someone_elses_reservation(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    [binding] = reserved(r, keys, clock, 1)
    ledger = Ledger(r, keys, clock)
    deadline = ledger.assumed_pods()[binding.pod_key]
    foreign = Binding(
        binding.pod_key,
        binding.uid,
        binding.node,
        binding.profile,
        binding.cycle,
        binding.epoch + 100,
        str(binding.epoch + 100),
    )
    clock.step(1000)
    binder = Binder(r, keys, clock=clock, ledger_config=TTL)
    outcome = BindOutcome()
    assert binder.claim(waiting_on_permit([foreign]), outcome) == []
    assert outcome.stale == [binding.pod_key]
    assert ledger.assumed_pods()[binding.pod_key] == deadline
    # Bound without a claim, the foreign token binds nothing either.
    outcome = binder.bind([foreign])
    assert outcome.stale == [binding.pod_key] and not outcome.bound
    assert ledger.assumed_pods()[binding.pod_key] == deadline
    assert bind_events(r, keys) == {}


@pytest.mark.parametrize("how", ["deleted", "bound-elsewhere"])
def test_a_failed_binding_releases_and_requeues_with_backoff(
    r: redis.Redis, keys: Keys, clock: FakeClock, how: str
) -> None:
    bindings = reserved(r, keys, clock, 2)
    victim, other = bindings
    store = Store(r, keys, clock=clock)
    if how == "deleted":
        store.delete("Pod", victim.pod_key)
        expected = "not-found"
    else:
        elsewhere = next(n for n in NODES if n != victim.node)
        store.bind(victim.pod_key, victim.uid, elsewhere)
        expected = "conflict"
    before = counted("failed")
    outcome = Binder(r, keys, clock=clock, ledger_config=TTL).bind(bindings)
    assert outcome.failed == {victim.pod_key: expected}
    assert outcome.bound == [other.pod_key]
    assert counted("failed") - before == 1
    ledger, queue = Ledger(r, keys, clock), RedisQueue(r, keys)
    assert ledger.pod(victim.pod_key) is None  # the reservation is released
    assert ledger.check_consistency() == []
    assert requested_cpu(ledger)[victim.node] == 0
    info = queue.info(victim.pod_key)
    assert info is not None and info["w"] == "backoff"
    assert info["bo"] == clock.now_ms() + 1000  # first attempt: the initial backoff
    explained = r.hget(keys.explain, victim.pod_key)
    assert isinstance(explained, bytes) and b"binding to" in explained


# --------------------------------------------------------------------------- plugins
class Recorder(PreBindPlugin, PostBindPlugin):
    """PreBind refuses pods named "refused-*"; both points record what they saw."""

    calls: list[tuple[str, str]] = []

    def __init__(self, handle: Handle) -> None:
        self.handle = handle

    def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        Recorder.calls.append(("PreBind", pod.metadata.name))
        if pod.metadata.name.startswith("refused"):
            return Status(Code.UNSCHEDULABLE, "volume not ready")
        return None

    def post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
        Recorder.calls.append(("PostBind", pod.metadata.name))


def recorder_binder(r: redis.Redis, keys: Keys, clock: FakeClock) -> Binder:
    def factory(args: dict[str, Any], handle: Handle) -> Recorder:
        return Recorder(handle)

    registry = {**IN_TREE_REGISTRY, "Recorder": PluginSpec("Recorder", factory, ())}
    text = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: Recorder
"""
    config = parse_config(text, "<test>", registry)
    return Binder(r, keys, clock=clock, config=config, registry=registry, ledger_config=TTL)


def test_profiles_with_bind_plugins_run_prebind_bind_postbind(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    create_cluster(
        r,
        keys,
        [node_manifest(n) for n in NODES],
        [pod_manifest("ok-1"), pod_manifest("refused-1"), pod_manifest("ok-2")],
        clock,
    )
    bindings = reserve_round_robin(r, keys, NODES, clock, ledger_config=TTL)
    Recorder.calls = []
    binder = recorder_binder(r, keys, clock)
    outcome = binder.bind(bindings)
    assert sorted(outcome.bound) == ["default/ok-1", "default/ok-2"]
    assert list(outcome.failed) == ["default/refused-1"]
    assert "volume not ready" in outcome.failed["default/refused-1"]
    prebind = [("PreBind", "ok-1"), ("PreBind", "refused-1"), ("PreBind", "ok-2")]
    postbind = [("PostBind", "ok-1"), ("PostBind", "ok-2")]
    assert sorted(Recorder.calls) == sorted([*prebind, *postbind])
    ledger = Ledger(r, keys, clock)
    assert ledger.pod("default/refused-1") is None
    assert RedisQueue(r, keys).where("default/refused-1") == "backoff"
    assert bind_events(r, keys) == {"default/ok-1": 1, "default/ok-2": 1}
    again = binder.bind([b for b in bindings if b.pod_key != "default/refused-1"])
    assert sorted(again.duplicate) == ["default/ok-1", "default/ok-2"]


def test_default_binders_store_answer_comes_back_in_its_status(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    """A profile with bind plugins binds through DefaultBinder, then confirms in a second
    step. A job killed between the two is claimed again by its rerun; the store answers
    "already-bound", which comes back in DefaultBinder's status: a duplicate, confirmed."""
    create_cluster(r, keys, [node_manifest(n) for n in NODES], [pod_manifest("ok-1")], clock)
    (binding,) = reserve_round_robin(r, keys, NODES, clock, ledger_config=TTL)
    Store(r, keys, clock=clock).bind(binding.pod_key, binding.uid, binding.node)  # killed job
    outcome = recorder_binder(r, keys, clock).bind([binding])
    assert outcome.duplicate == [binding.pod_key]
    assert not (outcome.bound or outcome.stale or outcome.failed)
    record = Ledger(r, keys, clock).pod(binding.pod_key)
    assert record is not None and record.state == "bound" and record.node == binding.node
    assert bind_events(r, keys) == {binding.pod_key: 1}
