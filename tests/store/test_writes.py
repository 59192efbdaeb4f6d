"""create / create_many / update / apply / delete / update_pod_status and their preconditions."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
import redis
from hypothesis import given, settings
from hypothesis import strategies as st

from distsched.clock import FakeClock
from distsched.keys import Keys
from distsched.store import (
    AlreadyExists,
    BindConflict,
    Conflict,
    InvalidObject,
    NotFound,
    Store,
    UidMismatch,
)
from distsched.store.codec import pack_with_rv_slot
from tests.store.helpers import events, make_node, make_pod


def test_create_assigns_uid_timestamp_and_rv(store: Store, clock: FakeClock) -> None:
    clock.set(1_700_000_000_000)
    pod = store.create(make_pod("a"))
    meta = pod["metadata"]
    assert meta["resourceVersion"] == "1"
    assert meta["creationTimestamp"] == "2023-11-14T22:13:20Z"
    assert len(meta["uid"]) == 36
    assert store.get("Pod", "default/a") == pod
    node = store.create(make_node("n1"))
    assert node["metadata"]["resourceVersion"] == "2"
    assert "namespace" not in node["metadata"]
    assert store.get("Node", "n1") == node


def test_create_ignores_a_given_uid_and_defaults_namespace(store: Store) -> None:
    obj = make_pod("a")
    del obj["metadata"]["namespace"]
    obj["metadata"]["uid"] = "my-uid"
    pod = store.create(obj)
    assert pod["metadata"]["uid"] != "my-uid" and len(pod["metadata"]["uid"]) == 36
    assert pod["metadata"]["namespace"] == "default"
    assert "namespace" not in obj["metadata"], "the caller's object must not be changed"


def test_create_twice_is_already_exists_and_writes_nothing(
    store: Store, r: redis.Redis, keys: Keys
) -> None:
    first = store.create(make_pod("a"))
    with pytest.raises(AlreadyExists):
        store.create(make_pod("a"))
    assert store.get("Pod", "default/a") == first
    assert store.resource_version() == 1
    assert len(events(r, keys)) == 1


def test_same_name_in_other_namespace_or_kind_is_another_object(store: Store) -> None:
    store.create(make_pod("a"))
    store.create(make_pod("a", namespace="other"))
    store.create(make_node("a"))
    assert store.get("Pod", "other/a") is not None
    assert store.get("Node", "a") is not None


def test_empty_maps_and_lists_survive_the_round_trip(
    store: Store, r: redis.Redis, keys: Keys
) -> None:
    obj = make_pod("a", nodeSelector={}, tolerations=[])
    obj["metadata"]["annotations"] = {}
    store.create(obj)
    got = store.get("Pod", "default/a")
    assert got is not None
    assert got["spec"]["nodeSelector"] == {}
    assert got["spec"]["tolerations"] == []
    assert got["metadata"]["annotations"] == {}
    assert msgpack.unpackb(events(r, keys)[0][b"obj"]) == got


@pytest.mark.parametrize(
    "obj",
    [
        {"kind": "Service", "metadata": {"name": "x"}},  # no apiVersion: no store kind
        {"apiVersion": "v1", "kind": "Ser vice", "metadata": {"name": "x"}},
        {"apiVersion": "Example.com/v1", "kind": "Widget", "metadata": {"name": "x"}},
        {"apiVersion": "v1", "kind": "ClusterRole", "metadata": {"name": "x", "namespace": "a"}},
        {"kind": "Pod", "metadata": {}},
        {"kind": "Pod", "metadata": {"name": "a/b"}},
        {"kind": "Node", "metadata": {"name": "n", "namespace": "default"}},
        {"kind": "Pod"},
    ],
)
def test_invalid_objects_are_refused(store: Store, obj: dict) -> None:
    with pytest.raises(InvalidObject):
        store.create(obj)
    assert store.resource_version() == 0


def test_every_kind_has_a_store_of_its_own(store: Store, r: redis.Redis, keys: Keys) -> None:
    """Kinds distsched does not act on are kept as given, per store kind: the kind for a
    built-in group (namespaced or not as kube has it), Kind.group for a custom resource
    (scoped by the namespace the loader gave it)."""
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": {}}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "system:metrics-server"}, "rules": []}  # fmt: skip
    widget = {"apiVersion": "example.com/v1", "kind": "Pod",  # a custom kind named Pod
              "metadata": {"name": "w", "namespace": "team"}, "spec": {"size": 3}}  # fmt: skip
    created = store.create_many([service, role, widget, make_pod("a")])
    assert [(o["kind"], o["apiVersion"]) for o in created[:3]] == [
        ("Service", "v1"), ("ClusterRole", "rbac.authorization.k8s.io/v1"),
        ("Pod", "example.com/v1"),
    ]  # fmt: skip
    assert store.get("Service", "default/web")["spec"] == {}  # type: ignore[index]
    assert store.get("ClusterRole", "system:metrics-server") is not None
    assert store.get("Pod.example.com", "team/w")["spec"] == {"size": 3}  # type: ignore[index]
    assert [p["metadata"]["name"] for p in store.list("Pod")[0]] == ["a"]
    assert store.custom_kinds() == ["Pod.example.com"]
    assert [e[b"kind"] for e in events(r, keys)] == [
        b"Service", b"ClusterRole", b"Pod.example.com", b"Pod",
    ]  # fmt: skip
    assert store.apply({**service, "spec": {"ports": []}})[1] == "configured"
    store.delete("Pod.example.com", "team/w")
    assert store.get("Pod.example.com", "team/w") is None


def test_create_many_assigns_consecutive_rvs_across_kinds(
    store: Store, r: redis.Redis, keys: Keys
) -> None:
    objs = [make_node("n1"), make_pod("a"), make_pod("b"), make_node("n2")]
    created = store.create_many(objs)
    assert [o["metadata"]["resourceVersion"] for o in created] == ["1", "2", "3", "4"]
    assert [e[b"key"] for e in events(r, keys)] == [b"n1", b"default/a", b"default/b", b"n2"]
    assert [o["metadata"]["name"] for o in store.list("Node")[0]] == ["n1", "n2"]
    assert store.create_many([]) == []


def test_create_many_is_all_or_nothing(store: Store, r: redis.Redis, keys: Keys) -> None:
    store.create(make_pod("b"))
    with pytest.raises(AlreadyExists) as exc:
        store.create_many([make_pod("a"), make_pod("b"), make_pod("c")])
    assert exc.value.key == "default/b"
    assert store.get("Pod", "default/a") is None
    assert store.get("Pod", "default/c") is None
    assert store.resource_version() == 1
    assert len(events(r, keys)) == 1


def test_create_many_refuses_a_key_twice_in_the_batch(store: Store) -> None:
    with pytest.raises(AlreadyExists):
        store.create_many([make_pod("a"), make_node("a"), make_pod("a")])
    assert store.list("Pod") == ([], 0)
    assert store.list("Node") == ([], 0)


def test_update_with_current_rv(store: Store, r: redis.Redis, keys: Keys) -> None:
    pod = store.create(make_pod("a"))
    changed = {**pod, "metadata": {**pod["metadata"], "labels": {"app": "db"}}}
    updated = store.update(changed)
    assert updated["metadata"]["resourceVersion"] == "2"
    assert updated["metadata"]["labels"] == {"app": "db"}
    assert updated["metadata"]["uid"] == pod["metadata"]["uid"]
    assert store.get("Pod", "default/a") == updated
    last = events(r, keys)[-1]
    assert last[b"type"] == b"MODIFIED"
    assert msgpack.unpackb(last[b"old"]) == pod
    assert msgpack.unpackb(last[b"obj"]) == updated


def test_update_with_stale_rv_is_conflict(store: Store, r: redis.Redis, keys: Keys) -> None:
    pod = store.create(make_pod("a"))
    store.update({**pod, "metadata": {**pod["metadata"], "labels": {"v": "2"}}})
    with pytest.raises(Conflict) as exc:
        store.update({**pod, "metadata": {**pod["metadata"], "labels": {"v": "3"}}})
    assert (exc.value.expected_rv, exc.value.current_rv) == ("1", "2")
    assert store.get("Pod", "default/a")["metadata"]["labels"] == {"v": "2"}  # type: ignore[index]
    assert len(events(r, keys)) == 2


def test_update_with_empty_rv_is_unconditional(store: Store) -> None:
    store.create(make_pod("a"))
    store.update_pod_status("default/a", nominated_node_name="n9")
    obj = make_pod("a")
    obj["metadata"]["labels"] = {"v": "new"}
    updated = store.update(obj)
    assert updated["metadata"]["resourceVersion"] == "3"
    assert updated["metadata"]["labels"] == {"v": "new"}
    assert updated["status"] == {"nominatedNodeName": "n9"}, "status kept when not given"


def test_update_keeps_uid_timestamp_and_binding(store: Store, clock: FakeClock) -> None:
    pod = store.create(make_pod("a"))
    store.bind("default/a", None, "n1")
    clock.step(60_000)
    obj = make_pod("a")
    obj["metadata"]["creationTimestamp"] = "1999-01-01T00:00:00Z"
    obj["metadata"]["labels"] = {"app": "db"}
    updated = store.update(obj)
    assert updated["metadata"]["uid"] == pod["metadata"]["uid"]
    assert updated["metadata"]["creationTimestamp"] == pod["metadata"]["creationTimestamp"]
    assert updated["spec"]["nodeName"] == "n1"
    assert updated["metadata"]["labels"] == {"app": "db"}
    moved = make_pod("a", nodeName="n2")
    with pytest.raises(BindConflict):
        store.update(moved)
    assert store.get("Pod", "default/a")["spec"]["nodeName"] == "n1"  # type: ignore[index]


def test_update_with_other_uid_or_missing_object(store: Store) -> None:
    with pytest.raises(NotFound):
        store.update(make_pod("a"))
    store.create(make_pod("a"))
    obj = make_pod("a")
    obj["metadata"]["uid"] = "someone-else"
    with pytest.raises(UidMismatch):
        store.update(obj)


def test_update_without_change_writes_nothing(store: Store, r: redis.Redis, keys: Keys) -> None:
    pod = store.create(make_pod("a"))
    assert store.update(pod) == pod
    assert store.update(make_pod("a")) == pod
    assert len(events(r, keys)) == 1


def test_update_retries_when_another_write_slips_in(
    store: Store, r: redis.Redis, keys: Keys, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.create(make_pod("a"))
    other = Store(r, keys, clock)
    merge = Store._merge_update
    calls = []

    def racing_merge(current: dict, obj: dict, kind: str, key: str) -> dict:
        calls.append(current["metadata"]["resourceVersion"])
        if len(calls) == 1:
            other.update_pod_status("default/a", nominated_node_name="n7")
        return merge(current, obj, kind, key)

    monkeypatch.setattr(store, "_merge_update", racing_merge)
    obj = make_pod("a")
    obj["metadata"]["labels"] = {"v": "2"}
    updated = store.update(obj)
    assert calls == ["1", "2"], "the script refused the stale merge and Python re-read"
    assert updated["metadata"]["resourceVersion"] == "3"
    assert updated["status"] == {"nominatedNodeName": "n7"}, "the racing write is not lost"


def test_conditional_update_does_not_retry_a_lost_race(
    store: Store, r: redis.Redis, keys: Keys, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    pod = store.create(make_pod("a"))
    other = Store(r, keys, clock)
    merge = Store._merge_update

    def racing_merge(current: dict, obj: dict, kind: str, key: str) -> dict:
        if current["metadata"]["resourceVersion"] == "1":
            other.update_pod_status("default/a", nominated_node_name="n7")
        return merge(current, obj, kind, key)

    monkeypatch.setattr(store, "_merge_update", racing_merge)
    with pytest.raises(Conflict):
        store.update({**pod, "metadata": {**pod["metadata"], "labels": {"v": "2"}}})
    assert store.get("Pod", "default/a")["metadata"]["labels"] == {"app": "web"}  # type: ignore[index]


def test_apply_creates_configures_and_is_idempotent(
    store: Store, r: redis.Redis, keys: Keys
) -> None:
    obj, action = store.apply(make_node("n1"))
    assert action == "created"
    again, action = store.apply(make_node("n1"))
    assert (again, action) == (obj, "unchanged")
    bigger, action = store.apply(make_node("n1", cpu="8"))
    assert action == "configured"
    assert bigger["status"]["allocatable"]["cpu"] == "8"
    assert bigger["metadata"]["uid"] == obj["metadata"]["uid"]
    stale = {**make_node("n1", cpu="2"), "metadata": {**obj["metadata"]}}
    _, action = store.apply(stale)
    assert action == "configured", "apply ignores resourceVersion"
    assert [e[b"type"] for e in events(r, keys)] == [b"ADDED", b"MODIFIED", b"MODIFIED"]


def test_delete(store: Store, r: redis.Redis, keys: Keys) -> None:
    pod = store.create(make_pod("a"))
    last = store.delete("Pod", "default/a", uid=pod["metadata"]["uid"])
    assert last["metadata"]["resourceVersion"] == "2"
    assert last["spec"] == pod["spec"]
    assert store.get("Pod", "default/a") is None
    with pytest.raises(NotFound):
        store.delete("Pod", "default/a")
    ev = events(r, keys)[-1]
    assert (ev[b"type"], ev[b"rv"]) == (b"DELETED", b"2")
    assert msgpack.unpackb(ev[b"obj"]) == pod, "the event carries the last stored state"


def test_delete_with_wrong_uid_is_refused(store: Store, r: redis.Redis, keys: Keys) -> None:
    store.create(make_pod("a"))
    with pytest.raises(UidMismatch):
        store.delete("Pod", "default/a", uid="old-incarnation")
    assert store.get("Pod", "default/a") is not None
    assert store.resource_version() == 1
    assert len(events(r, keys)) == 1


def test_delete_then_create_gives_a_new_uid(store: Store) -> None:
    first = store.create(make_pod("a"))
    store.delete("Pod", "default/a")
    second = store.create(make_pod("a"))
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    assert second["metadata"]["resourceVersion"] == "3"


def test_update_pod_status_sets_conditions_without_touching_spec(
    store: Store, clock: FakeClock, r: redis.Redis, keys: Keys
) -> None:
    pod = store.create(make_pod("a"))
    unschedulable = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "0/3 nodes are available",
    }
    after = store.update_pod_status(
        "default/a", nominated_node_name="n2", conditions=[unschedulable]
    )
    assert after["spec"] == pod["spec"]
    assert after["status"]["nominatedNodeName"] == "n2"
    (cond,) = after["status"]["conditions"]
    assert cond == {**unschedulable, "lastTransitionTime": "2023-11-14T22:13:20Z"}
    clock.step(5_000)
    same = store.update_pod_status("default/a", conditions=[unschedulable])
    assert same == after, "an unchanged status writes nothing"
    new_message = {**unschedulable, "message": "0/4 nodes are available"}
    later = store.update_pod_status("default/a", conditions=[new_message])
    (cond,) = later["status"]["conditions"]
    assert cond["message"] == "0/4 nodes are available"
    assert cond["lastTransitionTime"] == "2023-11-14T22:13:20Z", "status did not transition"
    cleared = store.update_pod_status("default/a", nominated_node_name="")
    assert "nominatedNodeName" not in cleared["status"]
    assert len(events(r, keys)) == 4


def test_update_pod_status_preconditions(store: Store) -> None:
    with pytest.raises(NotFound):
        store.update_pod_status("default/a", nominated_node_name="n1")
    store.create(make_pod("a"))
    with pytest.raises(UidMismatch):
        store.update_pod_status("default/a", nominated_node_name="n1", uid="other")
    with pytest.raises(InvalidObject):
        store.update_pod_status("default/a", conditions=[{"type": "PodScheduled"}])


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.text(max_size=40),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(
    spec=st.dictionaries(st.text(max_size=10), json_values, max_size=5),
    rv=st.integers(1, 10**18),
)
def test_rv_slot_splice_is_byte_identical_to_packb(spec: dict, rv: int) -> None:
    obj: dict[str, Any] = {"kind": "Pod", "metadata": {"name": "a", "labels": {}}, "spec": spec}
    prefix, suffix = pack_with_rv_slot(obj)
    text = str(rv).encode()
    spliced = prefix + bytes([0xA0 + len(text)]) + text + suffix
    expected = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(rv)}}
    assert spliced == msgpack.packb(expected, use_bin_type=True)


def test_apply_recreates_an_object_deleted_after_its_read(
    store: Store, r: redis.Redis, keys: Keys, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.create(make_node("n1"))
    other = Store(r, keys, clock)
    merge = Store._merge_update

    def racing_merge(current: dict, obj: dict, kind: str, key: str) -> dict:
        other.delete("Node", "n1")
        return merge(current, obj, kind, key)

    monkeypatch.setattr(store, "_merge_update", racing_merge)
    obj, action = store.apply(make_node("n1", cpu="8"))
    assert action == "created"
    assert obj["metadata"]["resourceVersion"] == "3"
    assert [e[b"type"] for e in events(r, keys)] == [b"ADDED", b"DELETED", b"ADDED"]


def test_store_refuses_a_decoding_client(redis_url: str, keys: Keys) -> None:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    with pytest.raises(ValueError, match="decode_responses"):
        Store(client, keys)
    client.close()


def test_apply_many_creates_the_new_ones_in_one_batch(
    store: Store, r: redis.Redis, keys: Keys
) -> None:
    store.create_many([make_node("n1"), make_node("n2")])
    actions = store.apply_many(
        [make_node("n1"), make_node("n2", cpu="8"), make_pod("p"), make_node("n3"), make_pod("q")]
    )
    assert actions == ["unchanged", "configured", "created", "created", "created"]
    types_and_keys = [(e[b"type"], e[b"key"]) for e in events(r, keys)[2:]]
    assert types_and_keys == [
        (b"ADDED", b"default/p"),
        (b"ADDED", b"n3"),
        (b"ADDED", b"default/q"),
        (b"MODIFIED", b"n2"),
    ], "the three new objects went in one create_many before the update"
    assert store.apply_many([make_pod("z"), make_pod("z")]) == ["created", "unchanged"]
    assert store.apply_many([]) == []


def test_values_resembling_the_rv_placeholder_are_stored_verbatim(store: Store) -> None:
    tricky = {"a": "\x00distsched:rv\x00", "b": "\x00rv:0123456789abcdef", "c": "\x00rv:"}
    store.create(make_pod("a", nodeSelector=tricky))
    got = store.get("Pod", "default/a")
    assert got is not None
    assert got["spec"]["nodeSelector"] == tricky
    assert got["metadata"]["resourceVersion"] == "1"
