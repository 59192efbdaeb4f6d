"""The standalone ClusterWriter: the scheduler's writes go into the store as they did."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import redis

from distsched import event_log
from distsched.bench.binder_pool import node_manifest, pod_manifest
from distsched.clock import FakeClock
from distsched.event_log import PodEvent
from distsched.framework.cluster_writer import (
    FAILED_SCHEDULING,
    SCHEDULER_ERROR,
    UNSCHEDULABLE,
    WARNING,
    ClusterWriter,
)
from distsched.keys import Keys
from distsched.model import Pod, PodRef
from distsched.store import BindConflict, Conflict, NotFound, Store, UidMismatch
from distsched.store.writer import StoreWriter


@pytest.fixture
def writer(store: Store) -> ClusterWriter:
    return StoreWriter(store)


def created(store: Store, name: str) -> PodRef:
    obj = store.create(pod_manifest(name))
    return PodRef(f"default/{name}", obj["metadata"]["uid"])


def stored(store: Store, key: str) -> dict[str, Any]:
    obj = store.get("Pod", key)
    assert obj is not None
    return obj


def scheduled_condition(store: Store, key: str) -> dict[str, Any] | None:
    conditions = (stored(store, key).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "PodScheduled"), None)


def test_bindings_go_to_the_store(store: Store, writer: ClusterWriter) -> None:
    store.create(node_manifest("n1"))
    a, b = created(store, "a"), created(store, "b")
    assert writer.bind(a, "n1") == "bound"
    assert writer.bind(a, "n1") == "already-bound"
    with pytest.raises(BindConflict):
        writer.bind(a, "n2")
    answers = writer.bind_many([(b.key, b.uid, "n1"), ("default/gone", "", "n1")])
    assert list(answers) == ["bound", "not-found"]
    assert [stored(store, p.key)["spec"]["nodeName"] for p in (a, b)] == ["n1", "n1"]


def test_a_victim_is_deleted_once_and_only_in_its_incarnation(
    store: Store, writer: ClusterWriter
) -> None:
    created(store, "victim")
    victim = Pod.from_dict(stored(store, "default/victim"))
    preemptor = Pod.from_dict(store.create(pod_manifest("preemptor")))
    other = replace(victim, metadata=replace(victim.metadata, uid="another-uid"))
    with pytest.raises(UidMismatch):
        writer.preempt(other, preemptor=preemptor, node="n1")
    writer.preempt(victim, preemptor=preemptor, node="n1")
    assert store.get("Pod", victim.key) is None
    writer.preempt(victim, preemptor=preemptor, node="n1")  # gone already: no error


def test_nominations_are_set_and_cleared(store: Store, writer: ClusterWriter) -> None:
    pod = created(store, "a")
    writer.set_nominated_node(pod, "n1")
    assert stored(store, pod.key)["status"]["nominatedNodeName"] == "n1"
    writer.set_nominated_node(PodRef(pod.key), "")  # any incarnation
    assert "nominatedNodeName" not in stored(store, pod.key)["status"]
    with pytest.raises(NotFound):
        writer.set_nominated_node(PodRef("default/gone"), "n1")


def test_a_preemptors_nomination_and_condition_are_one_write(
    store: Store, writer: ClusterWriter, r: redis.Redis, keys: Keys
) -> None:
    """kube's failure handler writes a preemptor's nominatedNodeName and PodScheduled=False
    in one status update; a pod bound meanwhile gets neither."""
    store.create(node_manifest("n1"))
    pod = created(store, "a")
    message = "0/1 nodes are available: 1 Insufficient cpu."
    events = r.xlen(keys.events)
    writer.set_nominated_node(pod, "n1", unschedulable=(UNSCHEDULABLE, message))
    assert r.xlen(keys.events) == events + 1
    assert stored(store, pod.key)["status"]["nominatedNodeName"] == "n1"
    condition = scheduled_condition(store, pod.key)
    assert condition is not None and (condition["reason"], condition["message"]) == (
        UNSCHEDULABLE,
        message,
    )
    bound = created(store, "bound")
    store.bind(bound.key, bound.uid, "n1")
    with pytest.raises(Conflict, match="bound to n1"):
        writer.set_nominated_node(bound, "n1", unschedulable=(UNSCHEDULABLE, message))
    assert "nominatedNodeName" not in stored(store, bound.key)["status"]


def test_a_nomination_starts_from_the_pod_as_seen_and_never_writes_it_back_stale(
    store: Store, writer: ClusterWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's copy of the pod spares the read when it is still the stored one; a
    copy the store has moved past is read again, and nothing of the newer pod is lost."""
    pod = created(store, "a")
    seen = stored(store, pod.key)
    reads: list[str] = []
    real_get = store.get
    monkeypatch.setattr(store, "get", lambda kind, key: reads.append(key) or real_get(kind, key))
    writer.set_nominated_node(pod, "n1", unschedulable=(UNSCHEDULABLE, "0/1 nodes"), seen=seen)
    assert reads == []
    monkeypatch.setattr(store, "get", real_get)
    assert stored(store, pod.key)["status"]["nominatedNodeName"] == "n1"
    newer = stored(store, pod.key)
    newer["metadata"]["labels"] = {"app": "web"}
    store.update(newer)
    writer.set_nominated_node(pod, "n2", seen=seen)  # seen is two versions old now
    now = stored(store, pod.key)
    assert now["status"]["nominatedNodeName"] == "n2"
    assert now["metadata"]["labels"] == {"app": "web"}
    condition = scheduled_condition(store, pod.key)
    assert condition is not None and condition["message"] == "0/1 nodes"


def test_the_unschedulable_condition_is_written_once_per_change(
    store: Store, writer: ClusterWriter, r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    pod = created(store, "a")
    message = "0/1 nodes are available: 1 Insufficient cpu."
    events = r.xlen(keys.events)
    assert writer.pod_unschedulable(pod, reason=UNSCHEDULABLE, message=message)
    assert scheduled_condition(store, pod.key) == {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": message,
        "lastTransitionTime": "2023-11-14T22:13:20Z",
    }
    assert r.xlen(keys.events) == events + 1
    clock.step(1_000)
    assert writer.pod_unschedulable(pod, reason=UNSCHEDULABLE, message=message)
    assert r.xlen(keys.events) == events + 1, "the same condition again writes nothing"
    assert writer.pod_unschedulable(pod, reason=SCHEDULER_ERROR, message="binding failed")
    condition = scheduled_condition(store, pod.key)
    assert condition is not None and condition["reason"] == "SchedulerError"
    assert r.xlen(keys.events) == events + 2


def test_the_unschedulable_condition_never_lands_on_a_bound_or_other_pod(
    store: Store, writer: ClusterWriter, r: redis.Redis, keys: Keys
) -> None:
    store.create(node_manifest("n1"))
    bound = created(store, "bound")
    store.bind(bound.key, bound.uid, "n1")
    other = created(store, "other")
    events = r.xlen(keys.events)
    assert not writer.pod_unschedulable(bound, reason=UNSCHEDULABLE, message="0/1 nodes")
    condition = scheduled_condition(store, bound.key)
    assert condition is not None and condition["status"] == "True"
    assert not writer.pod_unschedulable(
        PodRef(other.key, "an-older-uid"), reason=UNSCHEDULABLE, message="0/1 nodes"
    )
    assert not writer.pod_unschedulable(
        PodRef("default/gone"), reason=UNSCHEDULABLE, message="0/1 nodes"
    )
    assert scheduled_condition(store, other.key) is None
    assert r.xlen(keys.events) == events


def test_events_go_to_the_bounded_event_log(
    store: Store, writer: ClusterWriter, r: redis.Redis, keys: Keys
) -> None:
    pod = created(store, "a")
    size = r.dbsize()
    writer.record_events(
        [PodEvent(pod.key, pod.uid, WARNING, FAILED_SCHEDULING, "no fit", source="custom")] * 2
    )
    assert r.dbsize() == size + 1  # one stream, nothing else
    [event] = event_log.read(r, keys)
    assert (event["reason"], event["count"], event["source"]) == (
        FAILED_SCHEDULING,
        2,
        {"component": "custom"},
    )
    assert event["involvedObject"]["uid"] == pod.uid


def test_a_preempted_victim_gets_its_event(store: Store, writer: ClusterWriter, keys: Keys) -> None:
    victim = Pod.from_dict(store.create(pod_manifest("victim")))
    preemptor = Pod.from_dict(store.create(pod_manifest("preemptor")))
    writer.preempt(victim, preemptor=preemptor, node="n1")
    writer.preempt(victim, preemptor=preemptor, node="n1")  # gone already: no second event
    [event] = event_log.read(store.client, keys)
    assert event["reason"] == "Preempted" and event["type"] == "Normal"
    assert event["message"] == f"Preempted by pod {preemptor.metadata.uid} on node n1"
    assert event["involvedObject"]["name"] == "victim"
    assert event["related"]["name"] == "preemptor"


def test_a_preemptors_victims_go_together_each_with_its_answer(
    store: Store, writer: ClusterWriter, keys: Keys
) -> None:
    v1, v2, v3 = (Pod.from_dict(store.create(pod_manifest(f"v{i}"))) for i in (1, 2, 3))
    preemptor = Pod.from_dict(store.create(pod_manifest("preemptor")))
    store.delete("Pod", v2.key)  # gone already: what preemption wanted, no event
    other = replace(v3, metadata=replace(v3.metadata, uid="another-uid"))
    refused = writer.preempt_all([v1, v2, other], preemptor=preemptor, node="n1")
    assert refused[:2] == [None, None] and isinstance(refused[2], UidMismatch)
    assert store.get("Pod", v1.key) is None and store.get("Pod", v3.key) is not None
    assert [e["involvedObject"]["name"] for e in event_log.read(store.client, keys)] == ["v1"]


def test_a_preemptors_victims_go_in_one_round_trip_and_survive_a_script_flush(
    store: Store, writer: ClusterWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """redis-py asks SCRIPT EXISTS before a pipeline holding a script; the deletions do
    not, and load the script only when the server lost it, each victim deleted once."""
    victims = [Pod.from_dict(store.create(pod_manifest(f"v{i}"))) for i in range(3)]
    preemptor = Pod.from_dict(store.create(pod_manifest("preemptor")))
    asked: list[str] = []
    immediate = redis.client.Pipeline.immediate_execute_command

    def spy(self: redis.client.Pipeline, *args: Any, **options: Any) -> Any:
        asked.append(str(args[0]))
        return immediate(self, *args, **options)

    monkeypatch.setattr(redis.client.Pipeline, "immediate_execute_command", spy)
    assert writer.preempt_all(victims[:1], preemptor=preemptor, node="n1") == [None]
    store.client.script_flush()
    assert writer.preempt_all(victims, preemptor=preemptor, node="n1") == [None, None, None]
    assert asked == []
    assert all(store.get("Pod", v.key) is None for v in victims)


def test_a_batch_binding_records_the_scheduled_events_in_its_script(
    store: Store, writer: ClusterWriter, keys: Keys
) -> None:
    store.create_many([node_manifest("n1"), node_manifest("n2")])
    a, b = created(store, "a"), created(store, "b")
    store.bind(b.key, b.uid, "n2")
    results = writer.bind_many(
        [(a.key, a.uid, "n1"), (b.key, b.uid, "n2"), ("default/gone", "", "n1")],
        scheduled_by={a.key: "custom-scheduler"},
    )
    assert [str(r) for r in results] == ["bound", "already-bound", "not-found"]
    [event] = event_log.read(store.client, keys)  # only the pod this call bound
    assert (event["reason"], event["message"], event["source"]) == (
        "Scheduled",
        "Successfully assigned default/a to n1",
        {"component": "custom-scheduler"},
    )
    assert event["involvedObject"]["uid"] == a.uid
    assert (event["type"], event["action"], event["involvedObject"]["name"]) == (
        "Normal",
        "Binding",
        "a",
    )
    [(_, raw)] = store.client.xrange(keys.recorded_bindings)  # one entry per call
    assert raw[b"n"] == b"1"
    # without scheduled_by (the kube bridge's copy of an API binding) nothing is recorded
    c = created(store, "c")
    writer.bind_many([(c.key, c.uid, "n1")])
    assert len(event_log.read(store.client, keys)) == 1
