"""Informer: list + watch, handlers, relist after trimmed or lost history."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import redis

from distsched.keys import Keys
from distsched.store import FuncHandler, Informer, Store
from tests.store.helpers import Recorder, make_node, make_pod


def informer_with(r: redis.Redis, keys: Keys, **kw: Any) -> tuple[Informer, Recorder, Recorder]:
    informer = Informer(r, keys, **kw)
    pods, nodes = Recorder(), Recorder()
    informer.add_handler("Pod", pods)
    informer.add_handler("Node", nodes)
    return informer, pods, nodes


def test_initial_list_then_add_update_delete(store: Store, r: redis.Redis, keys: Keys) -> None:
    store.create_many([make_pod("a"), make_node("n1")])
    informer, pods, nodes = informer_with(r, keys)
    assert not informer.has_synced
    assert informer.poll_once() == 2
    assert informer.has_synced and informer.resource_version == 2
    assert pods.calls == [("add", "a", "1", True)]
    assert nodes.calls == [("add", "n1", "2", True)]

    store.create(make_pod("b"))
    store.bind("default/a", None, "n1")
    store.delete("Pod", "default/b")
    store.apply(make_node("n1", cpu="8"))
    assert informer.poll_once() == 4
    assert pods.calls[1:] == [
        ("add", "b", "3", False),
        ("update", "a", "1", "4"),
        ("delete", "b", "5", False),
    ]
    assert nodes.calls[1:] == [("update", "n1", "2", "6")]
    assert informer.get("Pod", "default/a")["spec"]["nodeName"] == "n1"  # type: ignore[index]
    assert informer.get("Pod", "default/b") is None
    assert informer.list("Node")[0]["status"]["allocatable"]["cpu"] == "8"
    assert informer.poll_once() == 0
    assert informer.relists == 1


def test_informer_for_one_kind_skips_others(store: Store, r: redis.Redis, keys: Keys) -> None:
    informer = Informer(r, keys, kinds=["Node"])
    seen = Recorder()
    informer.add_handler("Node", seen)
    informer.poll_once()
    store.create_many([make_pod("a"), make_node("n1"), make_pod("b")])
    assert informer.poll_once() == 1
    assert seen.calls == [("add", "n1", "2", False)]
    assert informer.resource_version == 3


def test_late_handler_gets_the_indexer_as_initial_adds(
    store: Store, r: redis.Redis, keys: Keys
) -> None:
    store.create(make_pod("a"))
    informer = Informer(r, keys)
    informer.poll_once()
    late = Recorder()
    informer.add_handler("Pod", late)
    assert late.calls == [("add", "a", "1", True)]


def test_a_failing_handler_does_not_stop_delivery(
    store: Store, r: redis.Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    informer = Informer(r, keys)

    def boom(obj: dict, initial: bool) -> None:
        raise RuntimeError("handler bug")

    ok = Recorder()
    informer.add_handler("Pod", FuncHandler(add=boom))
    informer.add_handler("Pod", ok)
    informer.poll_once()
    store.create_many([make_pod("a"), make_pod("b")])
    with caplog.at_level(logging.ERROR):
        assert informer.poll_once() == 2
    assert [c[1] for c in ok.calls] == ["a", "b"]
    assert "handler bug" in caplog.text


def test_relist_after_trim_synthesizes_deletes_updates_adds(
    store: Store, r: redis.Redis, keys: Keys
) -> None:
    store.create_many([make_pod("keep"), make_pod("change"), make_pod("gone"), make_pod("again")])
    informer, pods, _ = informer_with(r, keys)
    informer.poll_once()
    old_uid = informer.get("Pod", "default/again")["metadata"]["uid"]  # type: ignore[index]
    pods.calls.clear()

    store.delete("Pod", "default/gone")  # rv 5
    store.bind("default/change", None, "n1")  # rv 6
    store.delete("Pod", "default/again")  # rv 7
    store.create(make_pod("again"))  # rv 8
    store.create(make_pod("new"))  # rv 9
    r.xtrim(keys.events, maxlen=2, approximate=False)  # keeps rv 8, 9

    informer.poll_once()
    assert informer.relists == 2
    assert informer.resource_version == 9
    assert sorted(pods.calls) == sorted(
        [
            ("delete", "gone", "3", True),
            ("delete", "again", "4", True),
            ("update", "change", "2", "6"),
            ("add", "again", "8", False),
            ("add", "new", "9", False),
        ]
    )
    deletes_first = [c[0] for c in pods.calls]
    assert deletes_first[:2] == ["delete", "delete"]
    assert informer.get("Pod", "default/again")["metadata"]["uid"] != old_uid  # type: ignore[index]
    assert sorted(p["metadata"]["name"] for p in informer.list("Pod")) == [
        "again",
        "change",
        "keep",
        "new",
    ]
    store.create(make_pod("after"))
    assert informer.poll_once() == 1
    assert pods.calls[-1] == ("add", "after", "10", False)


def test_relist_when_every_entry_was_trimmed(store: Store, r: redis.Redis, keys: Keys) -> None:
    store.create(make_pod("a"))
    informer, pods, _ = informer_with(r, keys)
    informer.poll_once()
    store.delete("Pod", "default/a")
    r.xtrim(keys.events, maxlen=0, approximate=False)
    assert r.xlen(keys.events) == 0
    informer.poll_once()
    assert pods.calls[-1] == ("delete", "a", "1", True)
    assert informer.resource_version == 2
    assert informer.relists == 2


def test_relist_when_redis_lost_the_data(store: Store, r: redis.Redis, keys: Keys) -> None:
    store.create_many([make_pod("a"), make_pod("b"), make_pod("c")])
    informer, pods, _ = informer_with(r, keys)
    informer.poll_once()
    r.flushdb()
    informer.poll_once()  # idle check: store rv 0 < 3
    assert sorted(c[0:2] for c in pods.calls[3:]) == [
        ("delete", "a"),
        ("delete", "b"),
        ("delete", "c"),
    ]
    assert informer.resource_version == 0


def test_new_history_past_our_position_is_detected_by_epoch(
    store: Store, r: redis.Redis, keys: Keys
) -> None:
    store.create_many([make_pod("a"), make_pod("b")])
    informer, pods, _ = informer_with(r, keys)
    informer.poll_once()
    r.flushdb()
    store.create_many([make_pod(f"x{i}") for i in range(5)])  # rv 1..5 in a new epoch
    informer.poll_once()  # reads entries 3.. : contiguous rvs, but another epoch
    assert informer.relists == 2
    assert sorted(p["metadata"]["name"] for p in informer.list("Pod")) == [
        f"x{i}" for i in range(5)
    ]
    assert ("delete", "a", "1", True) in pods.calls


def test_informer_on_an_empty_store_adopts_the_first_epoch(
    store: Store, r: redis.Redis, keys: Keys
) -> None:
    informer, pods, _ = informer_with(r, keys)
    assert informer.poll_once() == 0
    store.create(make_pod("a"))
    assert informer.poll_once() == 1
    assert informer.relists == 1
    assert pods.calls == [("add", "a", "1", False)]


def test_threaded_informer_delivers_events(store: Store, r: redis.Redis, keys: Keys) -> None:
    store.create(make_node("n1"))
    informer, pods, nodes = informer_with(r, keys, block_ms=100)
    informer.start()
    try:
        assert informer.wait_synced(5)
        assert nodes.calls == [("add", "n1", "1", True)]
        store.create(make_pod("a"))
        store.bind("default/a", None, "n1")
        store.delete("Pod", "default/a")
        assert pods.wait_for(3) == [
            ("add", "a", "2", False),
            ("update", "a", "2", "3"),
            ("delete", "a", "4", False),
        ]
    finally:
        informer.stop()
    informer.start()  # restartable after stop()
    try:
        with pytest.raises(RuntimeError):
            informer.start()
    finally:
        informer.stop()


class ObjectRecorder:
    """An EventHandler that keeps what it was given (objects, or refs when lazy)."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def on_add(self, obj: Any, initial_list: bool) -> None:
        self.calls.append(("add", obj, initial_list))

    def on_update(self, old: Any, new: Any) -> None:
        self.calls.append(("update", old, new))

    def on_delete(self, obj: Any, final_state_unknown: bool) -> None:
        self.calls.append(("delete", obj, final_state_unknown))


def test_a_binding_is_delivered_as_the_previous_object_and_the_bound_one(
    store: Store, r: redis.Redis, keys: Keys
) -> None:
    """A binding's entry carries no object: the handlers still get (old, new) as if the
    whole pod had been shipped, equal to what the store reads before and after."""
    store.create(make_pod("a"))
    informer = Informer(r, keys)
    seen = ObjectRecorder()
    informer.add_handler("Pod", seen)
    informer.poll_once()
    before = store.get("Pod", "default/a")
    store.bind("default/a", None, "n1")
    after = store.get("Pod", "default/a")
    store.update_pod_status("default/a", nominated_node_name="n1")
    informer.poll_once()
    assert seen.calls[1] == ("update", before, after)
    assert seen.calls[2] == ("update", after, store.get("Pod", "default/a"))
    assert informer.get("Pod", "default/a") == store.get("Pod", "default/a")


def test_a_lazy_handler_gets_refs_and_pending_pods_stay_undecoded(
    store: Store, r: redis.Redis, keys: Keys
) -> None:
    informer = Informer(r, keys)
    lazy = ObjectRecorder()
    informer.add_handler("Pod", lazy, lazy=True)
    informer.poll_once()
    store.create_many([make_pod("pending"), make_pod("bound")])
    store.update_pod_status("default/pending", nominated_node_name="n2")
    store.bind("default/bound", None, "n1")
    informer.poll_once()
    (_, pending, _), (_, bound_add, _), (_, _, nominated), (_, old, new) = lazy.calls
    assert (pending.key, pending.node, pending.nominated) == ("default/pending", "", "")
    assert (nominated.nominated, new.node, old.node) == ("n2", "n1", "")
    assert not any(ref.decoded for ref in (pending, bound_add, nominated, old, new))
    assert new.get() == store.get("Pod", "default/bound")
    assert old.decoded, "the bound pod is built from the previous copy"
    assert informer.get("Pod", "default/pending") == store.get("Pod", "default/pending")


def test_a_binding_of_a_pod_the_informer_has_no_copy_of_reads_the_store(
    store: Store, r: redis.Redis, keys: Keys
) -> None:
    store.create_many([make_pod("a"), make_pod("b")])
    informer = Informer(r, keys)
    seen = ObjectRecorder()
    informer.add_handler("Pod", seen)
    informer.poll_once()
    before = store.get("Pod", "default/a")
    informer._indexer["Pod"].clear()  # as if it had missed them (not expected in practice)
    store.bind_many([("default/a", None, "n1"), ("default/b", None, "n1")])
    store.delete("Pod", "default/b")
    informer.poll_once()
    assert seen.calls[2] == ("update", before, store.get("Pod", "default/a"))
    assert [c[0] for c in seen.calls[3:]] == ["delete"], "b: gone, only its delete"


def test_a_relist_skips_an_undecodable_record_with_a_warning(
    store: Store, r: redis.Redis, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    store.create_many([make_pod("a"), make_pod("c")])
    r.hset(keys.objects("Pod"), "default/b", b"\xc1 damaged")
    informer, pods, _ = informer_with(r, keys)
    with caplog.at_level(logging.WARNING, logger="distsched.store.informer"):
        assert informer.poll_once() == 2
    assert informer.has_synced
    assert sorted(c[1] for c in pods.calls) == ["a", "c"]
    assert "default/b" in caplog.text


def test_lazy_handlers_see_the_same_history_as_eager_ones(
    store: Store, r: redis.Redis, keys: Keys
) -> None:
    """Pod events for lazy-only handlers take a shorter path (no Event in between): every
    kind of pod event must come out as the general path gives it to an eager handler."""
    store.create_many([make_pod("a"), make_pod("b"), make_node("n1")])
    lazy_informer, eager_informer = Informer(r, keys), Informer(r, keys)
    lazy, eager = ObjectRecorder(), ObjectRecorder()
    lazy_informer.add_handler("Pod", lazy, lazy=True)
    eager_informer.add_handler("Pod", eager)
    for informer in (lazy_informer, eager_informer):
        informer.poll_once()
    store.create(make_pod("c"))
    store.update_pod_status("default/c", nominated_node_name="n1")
    store.bind("default/a", None, "n1")
    store.bind("default/c", None, "n1")
    store.update(
        {
            **store.get("Pod", "default/b"),
            "metadata": {**store.get("Pod", "default/b")["metadata"], "labels": {"app": "db"}},
        }
    )
    store.delete("Pod", "default/a")
    store.create(make_pod("a"))
    store.bind("default/a", None, "n1")
    assert lazy_informer.poll_once() == eager_informer.poll_once() == 8

    def as_objects(call: tuple[Any, ...]) -> tuple[Any, ...]:
        kind, first, second = call
        if kind == "update":
            return kind, first.get(), second.get()
        return kind, first.get(), second

    assert [as_objects(c) for c in lazy.calls] == eager.calls
    assert [c[2].node for c in lazy.calls if c[0] == "update"] == ["", "n1", "n1", "", "n1"]
    for key in ("default/a", "default/b", "default/c"):
        assert lazy_informer.get("Pod", key) == store.get("Pod", key)


# ------------------------------------------------------------------ pods left out
def _leave_web(blob: bytes) -> bool:
    """Leave out pending pods labelled app=web (make_pod's), hold the others."""
    return b"web" in blob


def leaving_informer(r: redis.Redis, keys: Keys) -> tuple[Informer, ObjectRecorder]:
    informer = Informer(r, keys, leave_pending=_leave_web)
    seen = ObjectRecorder()
    informer.add_handler("Pod", seen, lazy=True)
    informer.poll_once()
    return informer, seen


def _calls(seen: ObjectRecorder) -> list[tuple[str, str]]:
    return [(kind, first.key if kind != "update" else second.key) for kind, first, second in
            seen.calls]  # fmt: skip


@pytest.mark.parametrize("many", [True, False], ids=["batch-entry", "single-entries"])
def test_pending_pods_left_out_and_their_bindings_are_neither_held_nor_delivered(
    store: Store, r: redis.Redis, keys: Keys, many: bool
) -> None:
    informer, seen = leaving_informer(r, keys)
    other = {"labels": {"app": "db"}}
    pods = [make_pod("web-1"), make_pod("web-2"), make_pod("nominated"), make_pod("db")]
    pods[3]["metadata"].update(other)
    pods[2]["status"] = {"nominatedNodeName": "n2"}
    if many:
        r.hset(keys.profiles, "default-scheduler", "n")  # the store enqueues: batch entries
        store.create_many(pods)
        store.bind_many([(f"default/{p}", None, "n1") for p in ("web-1", "db")])
    else:
        for obj in pods:
            store.create(obj)
        store.bind("default/web-1", None, "n1")
        store.bind("default/db", None, "n1")
    informer.poll_once()
    assert _calls(seen) == [("add", "default/nominated"), ("add", "default/db"),
                            ("update", "default/db")]  # fmt: skip
    assert informer.get("Pod", "default/web-1") is None, "bound by another: dropped"
    assert informer.get("Pod", "default/db") == store.get("Pod", "default/db")
    assert not informer.holds_every_pod
    assert informer.resource_version == int(r.get(keys.resource_version) or 0)
    # web-2's blob was set aside: asked for (a worker popped it), it is held from then on.
    assert informer.get("Pod", "default/web-2") == store.get("Pod", "default/web-2")
    store.bind("default/web-2", None, "n1")
    informer.poll_once()
    assert _calls(seen)[3:] == [("update", "default/web-2")]
    assert seen.calls[3][2].get() == store.get("Pod", "default/web-2")


def test_any_other_event_of_a_pod_left_out_is_delivered_and_holds_it(
    store: Store, r: redis.Redis, keys: Keys
) -> None:
    store.create_many([make_pod("a"), make_pod("b"), make_pod("c")])
    informer, seen = leaving_informer(r, keys)  # listed: all three held
    seen.calls.clear()
    store.create_many([make_pod("d"), make_pod("e"), make_pod("f"), make_pod("g")])  # left out
    store.update_pod_status("default/d", nominated_node_name="n1")
    store.delete("Pod", "default/e")
    informer.hold("default/f", store.get("Pod", "default/f"))
    store.bind_many([("default/a", None, "n1"), ("default/d", None, "n1"),
                     ("default/f", None, "n1")])  # fmt: skip
    informer.poll_once()
    assert _calls(seen) == [("add", "default/d"), ("delete", "default/e"), ("update", "default/a"),
                            ("update", "default/d"), ("update", "default/f")]  # fmt: skip
    for key in ("default/a", "default/d", "default/f"):
        assert informer.get("Pod", key) == store.get("Pod", key)
    assert seen.calls[-1][2].get() == store.get("Pod", "default/f")
    assert informer.get("Pod", "default/e") is None
    # What list() answers holds those set aside too.
    assert sorted(o["metadata"]["name"] for o in informer.list("Pod")) == list("abcdfg")


def test_hold_all_relists_and_then_follows_every_pod(
    store: Store, r: redis.Redis, keys: Keys
) -> None:
    informer, seen = leaving_informer(r, keys)
    store.create_many([make_pod("a"), make_pod("b")])
    store.bind("default/a", None, "n1")
    informer.poll_once()
    assert seen.calls == []
    assert informer.hold_all() == 2
    assert sorted((kind, ref.key, ref.node) for kind, ref, _ in seen.calls) == [
        ("add", "default/a", "n1"), ("add", "default/b", "")]  # fmt: skip
    assert informer.holds_every_pod
    store.create(make_pod("c"))
    store.bind("default/b", None, "n2")
    informer.poll_once()
    assert _calls(seen)[2:] == [("add", "default/c"), ("update", "default/b")]
    assert informer.hold_all() == 0
