"""The one failure handler of both cycles, in-process on a real Redis with a fake clock."""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis

from distsched import metrics
from distsched.bench.binder_pool import (
    create_cluster,
    node_manifest,
    pod_manifest,
    reserve_round_robin,
)
from distsched.cache.ledger import Ledger
from distsched.clock import FakeClock
from distsched.explain_record import read_explanation
from distsched.framework.cycle_state import CycleState
from distsched.framework.failure import BINDING, Failure, FailureHandler
from distsched.framework.interface import PluginSpec, ReservePlugin
from distsched.framework.profile import build_profiles, parse_config
from distsched.framework.registry import IN_TREE_REGISTRY
from distsched.framework.status import Status
from distsched.keys import Keys
from distsched.model import Pod, PodRef
from distsched.queue_redis import RedisQueue
from distsched.queue_types import PodEntry, QueuedPod
from distsched.store import Store
from tests.framework.fakes import RecordingWriter

PROFILE = "default-scheduler"
NO_FIT = "0/2 nodes are available: 2 Insufficient cpu."


class Unreserved(ReservePlugin):
    name = "Unreserved"
    calls: list[tuple[str, str]] = []

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        return None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        Unreserved.calls.append((pod.key, node_name))


class Roles:
    """What a worker or a binder builds its failure handler from."""

    def __init__(self, r: redis.Redis, keys: Keys, clock: FakeClock) -> None:
        registry = {
            **IN_TREE_REGISTRY,
            "Unreserved": PluginSpec("Unreserved", lambda _args, _h: Unreserved(), ()),
        }
        text = (
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
            "profiles:\n- schedulerName: default-scheduler\n  plugins:\n    multiPoint:\n"
            "      enabled:\n      - name: Unreserved\n"
        )
        profiles = build_profiles(parse_config(text, "<test>", registry), registry=registry)
        self.r, self.keys, self.clock = r, keys, clock
        self.store = Store(r, keys, clock=clock)
        self.queue = RedisQueue(r, keys)
        self.ledger = Ledger(r, keys, clock)
        self.writer = RecordingWriter(self.store)
        self.handler = FailureHandler(
            r, keys, self.queue, self.ledger, self.writer, profiles, clock
        )
        Unreserved.calls = []

    def pending(self, name: str, cpu: str = "100m") -> QueuedPod:
        """A pod created and popped, as a worker holds it."""
        obj = self.store.create(pod_manifest(name, cpu=cpu))
        key = f"default/{name}"
        self.queue.add([PodEntry(key, obj["metadata"]["uid"], 0)], now_ms=self.clock.now_ms())
        (queued,) = self.queue.pop(1, now_ms=self.clock.now_ms())
        return queued

    def parsed(self, key: str) -> Pod:
        obj = self.store.get("Pod", key)
        assert obj is not None
        return Pod.from_dict(obj)

    def condition(self, key: str) -> dict[str, Any] | None:
        conditions = self.parsed(key).to_dict().get("status", {}).get("conditions", [])
        return next((c for c in conditions if c["type"] == "PodScheduled"), None)


@pytest.fixture
def roles(r: redis.Redis, keys: Keys, clock: FakeClock) -> Roles:
    return Roles(r, keys, clock)


def attempts(result: str) -> float:
    labels = {"result": result, "profile": PROFILE}
    return metrics.REGISTRY.get_sample_value("distsched_schedule_attempts_total", labels) or 0.0


def no_fit(queued: QueuedPod, pod: Pod | None = None) -> Failure:
    return Failure(
        PodRef(queued.key, queued.uid),
        queued.epoch,
        PROFILE,
        NO_FIT,
        plugins=("NodeResourcesFit",),
        error=False,
        started=time.perf_counter(),
        parsed=pod,
    )


def test_a_scheduling_failure_requeues_explains_counts_and_tells_the_cluster(
    roles: Roles, r: redis.Redis, keys: Keys
) -> None:
    queued = roles.pending("big", cpu="64")
    before = attempts("unschedulable")
    assert roles.handler.handle([no_fit(queued, roles.parsed(queued.key))]) == ["unschedulable"]
    assert roles.queue.where(queued.key) == "unschedulable"
    explanation = read_explanation(r, keys, queued.key)
    assert explanation is not None
    assert (explanation.message, explanation.plugins, explanation.queue) == (
        NO_FIT,
        ("NodeResourcesFit",),
        "unschedulable",
    )
    assert attempts("unschedulable") - before == 1
    condition = roles.condition(queued.key)
    assert condition is not None
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "False",
        "Unschedulable",
        NO_FIT,
    )
    assert roles.writer.events == [(queued.key, "Warning", "FailedScheduling", NO_FIT)]
    assert Unreserved.calls == []  # nothing was reserved


def test_a_pod_that_says_so_already_is_not_written_again(
    roles: Roles, r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    queued = roles.pending("big", cpu="64")
    roles.handler.handle([no_fit(queued, roles.parsed(queued.key))])
    stream = r.xlen(keys.events)
    clock.step(400_000)
    roles.queue.flush_unschedulable_leftover(now_ms=clock.now_ms())
    (again,) = roles.queue.pop(1, now_ms=clock.now_ms())
    assert roles.handler.handle([no_fit(again, roles.parsed(again.key))]) == ["unschedulable"]
    assert r.xlen(keys.events) == stream, "the same condition: no store write, no event"


def test_a_stale_failure_tells_the_cluster_nothing(roles: Roles) -> None:
    queued = roles.pending("big", cpu="64")
    newer = Failure(PodRef(queued.key, queued.uid), queued.epoch + 1, PROFILE, NO_FIT)
    assert roles.handler.handle([newer]) == ["stale"]
    assert roles.queue.where(queued.key) == "inflight"
    assert roles.condition(queued.key) is None
    assert roles.writer.events == []


def test_a_binding_failure_unreserves_forgets_requeues_and_moves_waiting_pods(
    roles: Roles, r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    create_cluster(r, keys, [node_manifest("n1", cpu="1")], [pod_manifest("p", cpu="1")], clock)
    (binding,) = reserve_round_robin(r, keys, ["n1"], clock)
    waiting = roles.pending("waiting", cpu="1")
    assert roles.handler.handle([no_fit(waiting)]) == ["unschedulable"]
    before = attempts("error")
    message = "binding to n1 failed: volume not ready"
    failure = Failure(
        PodRef(binding.pod_key, binding.uid),
        binding.epoch,
        binding.profile,
        message,
        cycle=BINDING,
        reserved_on=binding.node,
        token=binding.token,
        parsed=roles.parsed(binding.pod_key),
        state=CycleState(),
    )
    assert roles.handler.handle([failure]) == ["backoff"]
    assert Unreserved.calls == [(binding.pod_key, "n1")]
    assert roles.ledger.pod(binding.pod_key) is None  # the reservation is forgotten
    assert roles.ledger.check_consistency() == []
    # The room it held may help the waiting pod: one AssignedPodDelete move request.
    assert roles.queue.where(waiting.key) in ("active", "backoff")
    condition = roles.condition(binding.pod_key)
    assert condition is not None
    assert (condition["reason"], condition["message"]) == ("SchedulerError", message)
    assert attempts("error") == before  # its worker counted the attempt as scheduled
