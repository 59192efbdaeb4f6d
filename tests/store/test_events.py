"""The event stream and list snapshots."""

from __future__ import annotations

import threading

import pytest
import redis

from distsched import event_log
from distsched.clock import FakeClock
from distsched.keys import Keys
from distsched.store import Store, decode_stream
from tests.store.helpers import entries, make_node, make_pod


def test_every_write_appends_one_event_with_increasing_rv(
    store: Store, r: redis.Redis, keys: Keys
) -> None:
    store.create_many([make_node("n1"), make_pod("a")])
    store.bind("default/a", None, "n1")
    store.bind("default/a", None, "n1")  # no-op
    store.apply(make_node("n1", cpu="8"))
    store.update_pod_status("default/a", nominated_node_name="n1")
    store.delete("Pod", "default/a")
    stream = entries(r, keys)
    decoded = list(decode_stream(stream))  # a binding is rebuilt from the entries before it
    assert [e.rv for e in decoded] == [1, 2, 3, 4, 5, 6]
    assert [entry_id for entry_id, _ in stream] == [f"{i}-0".encode() for i in range(1, 7)]
    assert [(e.type, e.kind, e.key) for e in decoded] == [
        ("ADDED", "Node", "n1"),
        ("ADDED", "Pod", "default/a"),
        ("MODIFIED", "Pod", "default/a"),
        ("MODIFIED", "Node", "n1"),
        ("MODIFIED", "Pod", "default/a"),
        ("DELETED", "Pod", "default/a"),
    ]
    assert len({e.epoch for e in decoded}) == 1
    for e in decoded:
        assert e.obj["metadata"]["resourceVersion"] == str(e.rv)
    bind, node_update = decoded[2], decoded[3]
    assert bind.old is not None and bind.old["metadata"]["resourceVersion"] == "2"
    assert bind.old["spec"].get("nodeName") is None
    assert bind.obj["spec"]["nodeName"] == "n1"
    assert node_update.old is not None
    assert node_update.old["status"]["allocatable"]["cpu"] == "4"
    assert node_update.obj["status"]["allocatable"]["cpu"] == "8"
    assert decoded[5].obj["status"]["nominatedNodeName"] == "n1", "DELETED carries last state"
    assert decoded[0].old is None and decoded[5].old is None


def test_stream_is_capped(r: redis.Redis, keys: Keys, clock: FakeClock) -> None:
    store = Store(r, keys, clock, max_events=100)
    for start in range(0, 1000, 100):
        store.create_many([make_pod(f"p{i}") for i in range(start, start + 100)])
    length = r.xlen(keys.events)
    assert 100 <= length < 300, length  # MAXLEN ~ trims whole stream nodes (100 entries)
    assert entries(r, keys)[-1][0] == b"1000-0"


def test_batch_writes_trim_every_stream_they_append_to(
    r: redis.Redis, keys: Keys, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The batch scripts append without MAXLEN and trim each stream once per call; the
    # Scheduled events are one entry per call in a log capped in calls.
    monkeypatch.setattr(event_log, "BINDING_HISTORY", 3)
    store = Store(r, keys, clock, max_events=100)
    store.create_many([make_node("n1")])
    batches = [[f"p{i}" for i in range(start, start + 100)] for start in range(0, 1000, 100)]
    for names in batches:
        store.create_many([make_pod(name) for name in names])
    for names in batches:
        bound = store.bind_many(
            [(f"default/{name}", None, "n1") for name in names],
            scheduled_by={f"default/{name}": "default-scheduler" for name in names},
        )
        assert {b.status for b in bound} == {"bound"}
    assert 100 <= r.xlen(keys.events) < 300  # MAXLEN ~ trims whole stream nodes
    assert entries(r, keys)[-1][0] == b"2001-0"
    assert not r.exists(keys.recorded_events)
    assert r.xlen(keys.recorded_bindings) == 3  # MAXLEN ~ 3 keeps a stream node of 3 or more
    assert len(event_log.read(r, keys)) == 300  # the last 3 calls' 100 bindings each


def test_list_filters_by_namespace_and_reports_rv(store: Store) -> None:
    store.create_many([make_pod("b"), make_pod("a"), make_pod("c", namespace="kube-system")])
    store.create(make_node("n1"))
    pods, rv = store.list("Pod")
    assert [p["metadata"]["name"] for p in pods] == ["a", "b", "c"]
    assert rv == 4
    system, rv = store.list("Pod", namespace="kube-system")
    assert [p["metadata"]["name"] for p in system] == ["c"]
    assert store.list("Pod", namespace="nope") == ([], 4)


def test_list_is_a_consistent_snapshot_under_concurrent_writes(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    writer_store = Store(r, keys, clock)
    reader_store = Store(r, keys, clock)
    done = threading.Event()

    def writer() -> None:
        for i in range(400):
            writer_store.create(make_pod(f"p{i}"))
            if i % 3 == 0:
                writer_store.bind(f"default/p{i}", None, "n1")
        done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    snapshots = 0
    while not done.is_set() or snapshots == 0:
        pods, rv = reader_store.list("Pod")
        snapshots += 1
        rvs = sorted(int(p["metadata"]["resourceVersion"]) for p in pods)
        assert all(x <= rv for x in rvs)
        # Replay the writer's deterministic history up to rv and compare.
        expected: dict[str, int] = {}
        current = 0
        for i in range(400):
            current += 1
            if current > rv:
                break
            expected[f"p{i}"] = current
            if i % 3 == 0:
                current += 1
                if current > rv:
                    break
                expected[f"p{i}"] = current
        assert {p["metadata"]["name"]: int(p["metadata"]["resourceVersion"]) for p in pods} == (
            expected
        )
    thread.join()
    assert snapshots > 1
