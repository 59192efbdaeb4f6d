"""bind / bind_many: idempotence, conflicts, races between the read and the script."""

from __future__ import annotations

import pickle
from typing import Any

import msgpack
import pytest
import redis

from distsched.cache.ledger_types import encode_record
from distsched.clock import FakeClock
from distsched.keys import Keys
from distsched.queue_types import encode_info
from distsched.store import (
    BindConflict,
    BindRequest,
    InvalidObject,
    NotFound,
    Store,
    UidMismatch,
    decode_event,
)
from tests.store.helpers import decoded, events, make_pod


def test_bind_sets_node_name_and_pod_scheduled(store: Store, r: redis.Redis, keys: Keys) -> None:
    pod = store.create(make_pod("a"))
    store.update_pod_status(
        "default/a",
        conditions=[{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
    )
    assert store.bind("default/a", pod["metadata"]["uid"], "n1") == "bound"
    bound = store.get("Pod", "default/a")
    assert bound is not None
    assert bound["spec"]["nodeName"] == "n1"
    assert bound["spec"]["containers"] == pod["spec"]["containers"]
    assert bound["status"]["conditions"] == [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2023-11-14T22:13:20Z"}
    ]
    ev = events(r, keys)[-1]
    assert ev[b"type"] == b"MODIFIED"
    # A binding's entry is compact: no object, the node and the binding's time.
    assert b"obj" not in ev and b"old" not in ev
    assert (ev[b"node"], ev[b"bound"]) == (b"n1", b"2023-11-14T22:13:20Z")
    event = decoded(r, keys)[-1]
    assert event.binding and event.node == "n1"
    assert event.old is not None and event.old["spec"].get("nodeName") is None
    assert event.obj == bound
    # The store wrote the meta alone; its blob is still the unbound pod.
    assert r.hget(keys.store_meta("Pod"), "default/a") == (
        f"3|n1|2023-11-14T22:13:20Z|{pod['metadata']['uid']}".encode()
    )
    assert msgpack.unpackb(r.hget(keys.objects("Pod"), "default/a")) == event.old


def test_bind_same_node_twice_is_one_event(store: Store, r: redis.Redis, keys: Keys) -> None:
    store.create(make_pod("a"))
    assert store.bind("default/a", None, "n1") == "bound"
    assert store.bind("default/a", None, "n1") == "already-bound"
    assert [e[b"type"] for e in events(r, keys)] == [b"ADDED", b"MODIFIED"]
    assert store.resource_version() == 2


def test_bind_to_another_node_is_refused(store: Store) -> None:
    store.create(make_pod("a"))
    store.bind("default/a", None, "n1")
    with pytest.raises(BindConflict) as exc:
        store.bind("default/a", None, "n2")
    assert (exc.value.node, exc.value.wanted) == ("n1", "n2")
    assert store.get("Pod", "default/a")["spec"]["nodeName"] == "n1"  # type: ignore[index]
    assert store.resource_version() == 2


def test_bind_deleted_pod_is_not_found(store: Store) -> None:
    store.create(make_pod("a"))
    store.delete("Pod", "default/a")
    with pytest.raises(NotFound):
        store.bind("default/a", None, "n1")
    assert store.get("Pod", "default/a") is None
    assert store.resource_version() == 2


def test_bind_other_incarnation_is_uid_mismatch(store: Store) -> None:
    old = store.create(make_pod("a"))
    store.delete("Pod", "default/a")
    store.create(make_pod("a"))
    with pytest.raises(UidMismatch):
        store.bind("default/a", old["metadata"]["uid"], "n1")
    assert store.get("Pod", "default/a")["spec"].get("nodeName") is None  # type: ignore[index]


def test_bind_many_reports_each_item(store: Store, r: redis.Redis, keys: Keys) -> None:
    pods = store.create_many([make_pod(n) for n in ("a", "b", "c", "d", "e")])
    store.bind("default/b", None, "n1")
    store.bind("default/c", None, "n1")
    uid_a = pods[0]["metadata"]["uid"]
    before = len(events(r, keys))
    results = store.bind_many(
        [
            BindRequest("default/a", uid_a, "n2"),
            ("default/b", None, "n1"),
            ("default/c", None, "n2"),
            ("default/missing", None, "n2"),
            ("default/d", "not-its-uid", "n2"),
            ("default/e", None, "n3"),
        ]
    )
    assert [(x.pod_key, x.status, x.node) for x in results] == [
        ("default/a", "bound", "n2"),
        ("default/b", "already-bound", "n1"),
        ("default/c", "conflict", "n1"),
        ("default/missing", "not-found", ""),
        ("default/d", "uid-mismatch", ""),
        ("default/e", "bound", "n3"),
    ]
    assert [x.ok for x in results] == [True, True, False, False, False, True]
    new = events(r, keys)[before:]
    assert [(e[b"key"], int(e[b"rv"])) for e in new] == [
        (b"default/a", results[0].rv),
        (b"default/e", results[5].rv),
    ]
    assert results[5].rv == results[0].rv + 1  # type: ignore[operator]


def test_bind_many_same_pod_twice_in_a_batch(store: Store) -> None:
    store.create(make_pod("a"))
    results = store.bind_many([("default/a", None, "n1"), ("default/a", None, "n2")])
    assert [(x.status, x.node) for x in results] == [("bound", "n1"), ("conflict", "n1")]


def _race_before_script(
    monkeypatch: pytest.MonkeyPatch, store: Store, action: object, times: int = 1
) -> list[str]:
    """Run ``action()`` right before ``store``'s bind script, ``times`` times; returns one
    entry per script call."""
    scripts = store._scripts
    original = scripts.get
    seen: list[str] = []

    def get(name: str) -> Any:
        script = original(name)
        if name != "store_bind":
            return script

        def racing(**kw: Any) -> Any:
            seen.append(name)
            if len(seen) <= times:
                action()  # type: ignore[operator]
            return script(**kw)

        return racing

    monkeypatch.setattr(scripts, "get", get)
    return seen


def test_a_write_just_before_the_bind_is_kept(
    store: Store, r: redis.Redis, keys: Keys, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.create(make_pod("a"))
    other = Store(r, keys, clock)
    seen = _race_before_script(
        monkeypatch, store, lambda: other.update_pod_status("default/a", nominated_node_name="n5")
    )
    assert store.bind("default/a", None, "n1") == "bound"
    assert len(seen) == 1, "a bind reads nothing first, so nothing to retry"
    pod = store.get("Pod", "default/a")
    assert pod is not None
    assert pod["spec"]["nodeName"] == "n1"
    assert pod["status"]["nominatedNodeName"] == "n5", "the racing status write is kept"


@pytest.mark.parametrize(
    ("race", "error"),
    [
        (lambda s: s.bind("default/a", None, "n9"), BindConflict),
        (lambda s: s.delete("Pod", "default/a"), NotFound),
        (lambda s: (s.delete("Pod", "default/a"), s.create(make_pod("a"))), UidMismatch),
    ],
)
def test_the_script_itself_refuses_binds_that_lost_a_race(
    store: Store,
    r: redis.Redis,
    keys: Keys,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
    race: object,
    error: type[Exception],
) -> None:
    pod = store.create(make_pod("a"))
    other = Store(r, keys, clock)
    seen = _race_before_script(monkeypatch, store, lambda: race(other))  # type: ignore[operator]
    with pytest.raises(error):
        store.bind("default/a", pod["metadata"]["uid"], "n1")
    assert len(seen) == 1, "refused by the script, no retry"
    for ev in decoded(r, keys):
        assert ev.node != "n1"


def test_bad_node_names_are_refused_before_any_write(
    store: Store, r: redis.Redis, keys: Keys
) -> None:
    store.create_many([make_pod("a"), make_pod("b")])
    for node in ("", "n|1"):
        with pytest.raises(InvalidObject):
            store.bind_many([("default/a", None, "n1"), ("default/b", None, node)])
    assert store.resource_version() == 2
    assert len(events(r, keys)) == 2


def test_update_and_delete_after_a_bind_keep_the_binding(
    store: Store, r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    """The blob predates the binding until the next full write: every reader applies the
    meta, and the events of later writes carry what readers need to do the same."""
    clock.set(1_700_000_000_000)
    pod = store.create(make_pod("a"))
    store.bind("default/a", None, "n1")
    bound = store.get("Pod", "default/a")
    assert bound is not None
    assert store.list("Pod")[0] == [bound]
    assert store.snapshot().objects["Pod"]["default/a"] == bound
    assert store.get_many("Pod", ["default/a", "default/x"]) == [bound, None]
    updated = store.update_pod_status("default/a", nominated_node_name="n1")
    assert updated["spec"]["nodeName"] == "n1"
    assert updated["status"]["conditions"] == bound["status"]["conditions"]
    assert store.get("Pod", "default/a") == updated
    meta = r.hget(keys.store_meta("Pod"), "default/a")
    assert meta == f"3|n1||{pod['metadata']['uid']}".encode(), "whole again: no bound_at"
    update_event = decoded(r, keys)[-1]
    assert (update_event.old, update_event.obj) == (bound, updated)
    assert update_event.nominated == "n1"

    store.create(make_pod("b"))
    store.bind("default/b", None, "n2")
    bound_b = store.get("Pod", "default/b")
    assert bound_b is not None
    last = store.delete("Pod", "default/b")
    assert last == {**bound_b, "metadata": {**bound_b["metadata"], "resourceVersion": "6"}}
    raw = events(r, keys)[-1]
    assert raw[b"node"] == b"n2" and b"objmeta" in raw
    deleted = decode_event(raw)
    assert deleted.obj == last, "a DELETED entry is decodable on its own"


def test_bind_result_is_its_status_string_and_pickles(store: Store) -> None:
    store.create(make_pod("a"))
    (result,) = store.bind_many([("default/a", None, "n1")])
    assert result == "bound" and result.status == "bound" and result.ok
    assert (result.pod_key, result.node, result.rv) == ("default/a", "n1", 2)
    copy = pickle.loads(pickle.dumps(result))
    assert (copy, copy.pod_key, copy.node, copy.rv) == ("bound", "default/a", "n1", 2)


def test_bind_many_in_reservation_mode_binds_only_reserved_pods_and_confirms_them(
    store: Store, r: redis.Redis, keys: Keys
) -> None:
    """The binder's mode: a pod is written only while the ledger holds its reservation
    under the job's token, and the reservation is confirmed in the same script."""
    store.create_many([make_pod(n) for n in ("held", "reaped", "moved")])

    def record(node: str, token: str) -> str:
        return encode_record(
            node=node, uid="", requests={}, ports=(), token=token, anti_affinity_keys=()
        )

    r.hset(keys.ledger_pods, "default/held", record("n1", "7"))
    r.hset(keys.ledger_pods, "default/moved", record("n2", "9"))
    r.zadd(keys.ledger_assumed, {"default/held": 1, "default/moved": 1})
    info = {"w": "assumed", "uid": "", "p": 0, "ts": 1, "its": 1, "a": 1}
    r.hset(
        keys.info, "default/held", encode_info({**info, "cy": 1, "e": 7, "d": 1, "bo": 0, "pl": ""})
    )
    before = len(events(r, keys))

    results = store.bind_many(
        [
            ("default/held", None, "n1"),
            ("default/reaped", None, "n1"),
            ("default/moved", None, "n1"),
        ],
        reservations={"default/held": "7", "default/reaped": "8", "default/moved": "9"},
    )
    assert [x.status for x in results] == ["bound", "unreserved", "unreserved"]
    assert len(events(r, keys)) == before + 1
    assert store.get("Pod", "default/reaped")["spec"].get("nodeName", "") == ""
    assert r.zscore(keys.ledger_assumed, "default/held") is None
    assert r.zscore(keys.ledger_assumed, "default/moved") is not None
    assert r.hget(keys.info, "default/held") is None

    # The same job again: idempotent, nothing written.
    again = store.bind_many([("default/held", None, "n1")], reservations={"default/held": "7"})
    assert [x.status for x in again] == ["already-bound"]
    assert len(events(r, keys)) == before + 1
