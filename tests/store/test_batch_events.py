"""Batch entries: the pod events a write script appends to the store's stream alone (pending
pods the store enqueued itself, reserved bindings) go in as one entry per run of rvs, and
every reader gets each event exactly as its own entry would have carried it."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
import redis

from distsched.cli.watch import Watch
from distsched.clock import FakeClock
from distsched.keys import Keys
from distsched.store import FuncHandler, Informer, Store, decode_stream
from distsched.store.codec import decode_object, entry_events
from distsched.store.informer import MethodHandler
from tests.store.helpers import entries, make_node, make_pod
from tests.workers.harness import InProcessCluster

GATES = {"schedulingGates": [{"name": "wait"}]}


def expanded(r: redis.Redis, keys: Keys) -> list[tuple[int, dict[bytes, bytes]]]:
    return [
        (rv, dict(fields)) for _, entry in entries(r, keys) for rv, fields in entry_events(entry)
    ]


def test_a_create_of_enqueued_pods_is_one_entry_with_each_event_as_its_own_would_be(
    r: redis.Redis, clock: FakeClock
) -> None:
    batched, single = Keys("batched"), Keys("single")
    r.hset(batched.profiles, "default-scheduler", "n")  # the store enqueues these pods
    pods = [make_pod(f"p{i}", nodeName="") for i in range(5)]
    pods[2]["status"] = {"nominatedNodeName": "n1"}
    for keys in (batched, single):
        Store(r, keys, clock).create_many(pods)

    assert [entry_id for entry_id, _ in entries(r, batched)] == [b"5-0"]
    assert len(entries(r, single)) == 5
    with_batch = expanded(r, batched)
    without = expanded(r, single)
    assert [rv for rv, _ in with_batch] == [1, 2, 3, 4, 5]

    def but_epoch(fields: dict[bytes, bytes]) -> dict[bytes, Any]:
        # each store has its own epoch, and gave each pod a uid of its own
        out: dict[bytes, Any] = {k: v for k, v in fields.items() if k != b"epoch"}
        obj = decode_object(out[b"obj"])
        del obj["metadata"]["uid"]
        out[b"obj"] = obj
        return out

    assert [but_epoch(f) for _, f in with_batch] == [but_epoch(f) for _, f in without]
    store = Store(r, batched, clock)
    events = list(decode_stream(entries(r, batched)))
    assert [(e.type, e.key, e.rv) for e in events] == [
        ("ADDED", f"default/p{i}", i + 1) for i in range(5)
    ]
    assert [e.obj for e in events] == [store.get("Pod", f"default/p{i}") for i in range(5)]
    assert events[2].nominated == "n1" and events[1].nominated == ""


def test_events_for_the_queue_stream_cut_a_batch_and_ids_stay_in_rv_order(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    r.hset(keys.profiles, "default-scheduler", "g")
    store = Store(r, keys, clock)
    store.create_many(
        [
            make_pod("a"),
            make_pod("b"),
            make_pod("gated", **GATES),  # the handlers' PreEnqueue: its own entry, on q:events
            make_pod("c"),
            make_node("n1"),
            make_pod("d"),
            make_pod("e"),
        ]
    )
    assert [entry_id for entry_id, _ in entries(r, keys)] == [
        b"2-0",
        b"3-0",
        b"4-0",
        b"5-0",
        b"7-0",
    ]
    events = list(decode_stream(entries(r, keys)))
    assert [(e.rv, e.key) for e in events] == [
        (1, "default/a"),
        (2, "default/b"),
        (3, "default/gated"),
        (4, "default/c"),
        (5, "n1"),
        (6, "default/d"),
        (7, "default/e"),
    ]
    assert [f[b"key"] for _, f in r.xrange(keys.queue_events)] == [b"default/gated", b"n1"]


def test_informers_follow_batches_and_relist_when_one_starts_past_their_position(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    r.hset(keys.profiles, "default-scheduler", "n")
    store = Store(r, keys, clock)
    lazy_informer, eager_informer = Informer(r, keys), Informer(r, keys)
    lazy: list[tuple[str, Any]] = []
    eager: list[tuple[str, Any]] = []
    lazy_informer.add_handler(
        "Pod", FuncHandler(add=lambda ref, _i: lazy.append(("add", ref.get()))), lazy=True
    )
    eager_informer.add_handler("Pod", FuncHandler(add=lambda obj, _i: eager.append(("add", obj))))
    for informer in (lazy_informer, eager_informer):
        informer.poll_once()
    nominated = make_pod("p1")
    nominated["status"] = {"nominatedNodeName": "n1"}
    store.create_many([make_pod("p0"), nominated, make_pod("p2")])  # rv 1-3, one entry
    assert lazy_informer.poll_once() == eager_informer.poll_once() == 3
    assert lazy == eager
    assert [obj["metadata"]["name"] for _, obj in lazy] == ["p0", "p1", "p2"]
    refs = [lazy_informer._indexer["Pod"][f"default/p{i}"] for i in range(3)]
    assert [(ref.node, ref.nominated) for ref in refs] == [("", ""), ("", "n1"), ("", "")]
    assert lazy_informer.resource_version == 3

    store.create(make_node("n1"))  # rv 4
    store.create_many([make_pod(f"q{i}") for i in range(3)])  # rv 5-7
    r.xtrim(keys.events, maxlen=1, approximate=False)  # rv 4 is gone: the batch starts at 5
    relists = lazy_informer.relists
    lazy_informer.poll_once()
    assert lazy_informer.relists == relists + 1
    assert lazy_informer.resource_version == 7
    assert sorted(p["metadata"]["name"] for p in lazy_informer.list("Pod")) == [
        "p0", "p1", "p2", "q0", "q1", "q2",
    ]  # fmt: skip


def test_reserved_bindings_are_one_entry_that_readers_rebuild(
    r: redis.Redis, keys: Keys, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(make_node("n1"))
    cluster.store.create_many([make_pod(f"p{i}") for i in range(4)])
    cluster.handle_events()
    watch = Watch(cluster.store, "Pod", [], None, int(r.get(keys.resource_version) or 0))
    lazy_informer, eager_informer = Informer(r, keys), Informer(r, keys)
    lazy: list[tuple[Any, Any]] = []
    eager: list[tuple[Any, Any]] = []
    lazy_informer.add_handler(
        "Pod", FuncHandler(update=lambda old, new: lazy.append((old.get(), new.get()))), lazy=True
    )
    eager_informer.add_handler("Pod", FuncHandler(update=lambda old, new: eager.append((old, new))))
    for informer in (lazy_informer, eager_informer):
        informer.poll_once()
    before = len(entries(r, keys))
    cluster.schedule(cluster.pop())
    cluster.bind()
    added = entries(r, keys)[before:]
    assert len(added) == 1 and added[0][1][b"type"] == b"MODIFIED" and b"batch" in added[0][1]
    bound = [e for e in decode_stream(entries(r, keys)) if e.binding]
    assert sorted(e.key for e in bound) == [f"default/p{i}" for i in range(4)]
    for e in bound:
        assert e.obj == cluster.store.get("Pod", e.key)
        assert e.obj["spec"]["nodeName"] == "n1" and e.old is not None
        assert "nodeName" not in e.old["spec"]
    assert lazy_informer.poll_once() == eager_informer.poll_once() == 4
    assert lazy == eager and len(lazy) == 4
    assert all(new["spec"]["nodeName"] == "n1" for _, new in lazy)
    # `get -w` reads the batch as the events after its position: no relist, every pod
    monkeypatch.setattr(watch, "relist", lambda: pytest.fail("the watch relisted"))
    changed = watch.poll()
    assert changed is not None
    assert sorted(p["spec"]["nodeName"] for p in changed[0]) == ["n1"] * 4
    assert watch.rv == int(r.get(keys.resource_version) or 0)


def test_the_stream_cap_counts_events_not_entries(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    # A batch entry holds many events: the write scripts' cap keeps the events of about
    # the last max_events rvs, however few entries hold them.
    r.hset(keys.profiles, "default-scheduler", "n")
    store = Store(r, keys, clock, max_events=100)
    for start in range(0, 1000, 100):
        store.create_many([make_pod(f"p{i}") for i in range(start, start + 100)])
    kept = expanded(r, keys)
    assert 100 <= len(kept) <= 300, len(kept)
    assert kept[-1][0] == 1000
    assert [rv for rv, _ in kept] == list(range(kept[0][0], 1001))


def seeded_informer(
    r: redis.Redis, keys: Keys, clock: FakeClock, handler: Any
) -> tuple[Informer, bytes, bytes]:
    """An informer with ``handler`` (lazy) for pods, caught up with one pod created
    (rv 1); the store's epoch and that pod's blob, for batch entries written by hand."""
    Store(r, keys, clock).create(make_pod("seed"))
    informer = Informer(r, keys)
    informer.add_handler("Pod", handler, lazy=True)
    informer.poll_once()
    epoch = r.get(keys.store_epoch)
    blob = r.hget(keys.objects("Pod"), "default/seed")
    assert epoch is not None and blob is not None
    return informer, epoch, blob


def append_batch(
    r: redis.Redis, keys: Keys, epoch: bytes, etype: str, first: int, items: list[list[bytes]]
) -> None:
    """A batch entry of pod events for rvs ``first``.. as the write scripts append one."""
    last = first + len(items) - 1
    r.set(keys.resource_version, last)
    fields = {"type": etype, "kind": "Pod", "rv": last, "epoch": epoch, "first": first}
    r.xadd(keys.events, {**fields, "batch": msgpack.packb(items)}, id=f"{last}-0")


def test_an_item_of_another_shape_is_delivered_from_its_fields(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    # The informer reads the writers' two shapes by position; any other item (a field
    # a later writer adds, say) goes the general way, from the fields it stands for.
    refs: list[Any] = []
    handler = FuncHandler(add=lambda ref, _i: refs.append(ref))
    informer, epoch, blob = seeded_informer(r, keys, clock, handler)
    items = [[b"default/x", b"obj", blob, b"node", b"", b"extra", b"1"]]
    append_batch(r, keys, epoch, "ADDED", 2, items)
    assert informer.poll_once() == 1 and informer.resource_version == 2
    assert [(ref.key, ref.get()["metadata"]["name"]) for ref in refs[1:]] == [("default/x", "seed")]
    assert refs[1].nominated == ""  # "extra" is no nominated node


def test_a_handler_of_many_gets_the_pods_of_a_batch_entry_in_calls_that_keep_order(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    # A lazy pod handler with on_many takes a batch entry's pods in one call; an item the
    # informer reads the general way (from its fields) comes on its own, between the pods
    # before and after it.
    calls: list[tuple[str, list[str]]] = []
    handler = MethodHandler(
        lambda ref, _initial: calls.append(("add", [ref.key])),
        lambda _old, new: calls.append(("update", [new.key])),
        lambda ref, _unknown: calls.append(("delete", [ref.key])),
        lambda pairs: calls.append(("many", [new.key for _, new in pairs])),
    )
    informer, epoch, blob = seeded_informer(r, keys, clock, handler)
    calls.clear()
    append_batch(
        r,
        keys,
        epoch,
        "ADDED",
        2,
        [
            [b"default/a", b"obj", blob, b"node", b""],
            [b"default/x", b"obj", blob, b"node", b"", b"extra", b"1"],
            [b"default/b", b"obj", blob, b"node", b""],
            [b"default/c", b"obj", blob, b"node", b"", b"nom", b"n1"],
        ],
    )
    assert informer.poll_once() == 4
    assert calls == [
        ("many", ["default/a"]),
        ("many", ["default/x"]),
        ("many", ["default/b", "default/c"]),
    ]
    calls.clear()
    at = b"2026-12-06T00:00:00Z"
    append_batch(
        r,
        keys,
        epoch,
        "MODIFIED",
        6,
        [
            [b"default/a", b"node", b"n1", b"bound", at],
            [b"default/c", b"node", b"n2", b"bound", at],
        ],
    )
    assert informer.poll_once() == 2 and informer.resource_version == 7
    assert calls == [("many", ["default/a", "default/c"])]
    bound = {key: informer.get("Pod", key) for key in ("default/a", "default/c")}
    assert {key: obj["spec"]["nodeName"] for key, obj in bound.items() if obj} == {
        "default/a": "n1",
        "default/c": "n2",
    }


def test_a_batch_entry_holds_at_most_64_events(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    # An informer reads up to 256 entries at a time: entries stay small enough for that.
    r.hset(keys.profiles, "default-scheduler", "n")
    Store(r, keys, clock).create_many([make_pod(f"p{i}") for i in range(150)])
    assert [entry_id for entry_id, _ in entries(r, keys)] == [b"64-0", b"128-0", b"150-0"]
    assert [rv for rv, _ in expanded(r, keys)] == list(range(1, 151))
