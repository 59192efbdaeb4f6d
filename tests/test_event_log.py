"""The scheduler's event log (distsched/event_log.py) on a real Redis: recorded in one
round trip, bounded, read back as kube's aggregated core/v1 Events."""

from __future__ import annotations

import time

import redis

from distsched import event_log
from distsched.clock import FakeClock
from distsched.event_log import HISTORY, PodEvent
from distsched.keys import Keys
from distsched.store import Store
from tests.store.helpers import make_node, make_pod


def failed(key: str, message: str = "0/3 nodes are available: 3 Insufficient cpu.") -> PodEvent:
    return PodEvent(key, "uid-" + key, "Warning", "FailedScheduling", message)


def test_occurrences_of_one_event_read_as_one_series(r: redis.Redis, keys: Keys) -> None:
    event_log.record(r, keys, [failed("default/a"), failed("default/b")])
    event_log.record(r, keys, [failed("default/a", "0/3 nodes are available: 3 Too many pods.")])
    event_log.record(
        r,
        keys,
        [PodEvent("default/a", "uid-default/a", "Normal", "Scheduled", "Successfully assigned")],
    )
    events = event_log.read(r, keys)
    assert [(e["involvedObject"]["name"], e["reason"], e["count"]) for e in events] == [
        ("b", "FailedScheduling", 1),
        ("a", "FailedScheduling", 2),
        ("a", "Scheduled", 1),
    ]  # in the order of each series' last occurrence
    a_failed = events[1]
    assert a_failed["message"].endswith("Too many pods.")  # the latest occurrence's
    assert a_failed["firstTimestamp"] <= a_failed["lastTimestamp"]
    assert a_failed["type"] == "Warning" and a_failed["source"] == {
        "component": "default-scheduler"
    }
    assert a_failed["metadata"]["name"].startswith("a.")


def test_an_incarnation_of_the_same_name_is_another_series(r: redis.Redis, keys: Keys) -> None:
    event_log.record(r, keys, [failed("default/a")])
    event_log.record(
        r, keys, [PodEvent("default/a", "new-uid", "Warning", "FailedScheduling", "x")]
    )
    assert len(event_log.read(r, keys)) == 2


def test_read_filters_by_namespace_and_pod(r: redis.Redis, keys: Keys) -> None:
    event_log.record(r, keys, [failed("default/a"), failed("shop/a"), failed("shop/b")])
    assert [e["metadata"]["namespace"] for e in event_log.read(r, keys, namespace="shop")] == [
        "shop",
        "shop",
    ]
    [only] = event_log.read(r, keys, pod_key="shop/b")
    assert only["involvedObject"] == {
        "kind": "Pod",
        "namespace": "shop",
        "name": "b",
        "uid": "uid-shop/b",
        "apiVersion": "v1",
    }


def test_the_history_is_bounded(r: redis.Redis, keys: Keys) -> None:
    batch = [failed(f"default/p{i}") for i in range(1000)]
    for _ in range(HISTORY // 1000 + 3):
        event_log.record(r, keys, batch)
    # approximate trimming drops whole stream nodes: never below the bound, near it
    assert HISTORY <= r.xlen(keys.recorded_events) < HISTORY + 1000


def test_nothing_recorded_reads_empty(r: redis.Redis, keys: Keys) -> None:
    event_log.record(r, keys, [])
    assert event_log.read(r, keys) == []
    assert not r.exists(keys.recorded_events)


def test_a_batch_of_bindings_reads_as_one_scheduled_event_per_pod_in_time_order(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    store = Store(r, keys, clock)
    store.create_many([make_node("n1"), make_pod("a"), make_pod("b", namespace="shop")])
    event_log.record(r, keys, [failed("default/a")])
    time.sleep(0.002)  # entry ids are Redis's time: the Scheduled events come later
    store.bind_many(
        [("default/a", None, "n1"), ("shop/b", None, "n1")],
        scheduled_by={"default/a": "default-scheduler", "shop/b": "other-scheduler"},
    )
    assert r.xlen(keys.recorded_bindings) == 1  # the call's events, one entry
    events = event_log.read(r, keys)
    assert [(e["involvedObject"]["name"], e["reason"]) for e in events] == [
        ("a", "FailedScheduling"),
        ("a", "Scheduled"),
        ("b", "Scheduled"),
    ]
    b = events[2]
    assert b["message"] == "Successfully assigned shop/b to n1"
    assert b["source"] == {"component": "other-scheduler"}
    assert b["involvedObject"]["uid"] == store.get("Pod", "shop/b")["metadata"]["uid"]
    assert [e["reason"] for e in event_log.read(r, keys, pod_key="default/a")] == [
        "FailedScheduling",
        "Scheduled",
    ]
    assert [e["involvedObject"]["name"] for e in event_log.read(r, keys, namespace="shop")] == ["b"]
    single, batch = event_log.newest_ids(r, keys)
    assert single is not None and batch is not None
