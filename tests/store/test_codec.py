"""The meta string, the binding a reader applies, and lazily decoded events."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
import redis
from hypothesis import given, settings
from hypothesis import strategies as st

from distsched.clock import FakeClock
from distsched.keys import Keys
from distsched.store import BindRequest, Event, Meta, ObjectRef, Store, Unresolved, parse_meta
from distsched.store.codec import (
    blob_ref,
    bound_ref,
    decode_event,
    encode_meta,
    set_condition,
    with_binding,
    with_rv,
)
from tests.store.helpers import decoded, entries, events, make_node, make_pod


def _bound_pod_as_main_wrote_it(pod: dict, node: str, now: str, rv: int) -> dict:
    """What Store._bound_pod + the rv splice stored before binds wrote the meta alone."""
    status = dict(pod.get("status") or {})
    conditions = list(status.get("conditions") or [])
    status["conditions"] = set_condition(
        conditions, {"type": "PodScheduled", "status": "True"}, now
    )
    bound = {**pod, "spec": {**(pod.get("spec") or {}), "nodeName": node}, "status": status}
    return with_rv(bound, rv)


_condition = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["PodScheduled", "Ready"]),
        "status": st.sampled_from(["True", "False"]),
    },
    optional={
        "reason": st.sampled_from(["Unschedulable", "x"]),
        "lastTransitionTime": st.just("t0"),
    },
)


@settings(max_examples=200, deadline=None)
@given(
    has_spec=st.booleans(),
    status=st.one_of(
        st.none(),
        st.fixed_dictionaries({}, optional={"conditions": st.lists(_condition, max_size=3)}),
        st.fixed_dictionaries({"nominatedNodeName": st.just("n9")}),
    ),
    rv=st.integers(1, 10**12),
)
def test_a_binding_applied_by_readers_packs_to_the_bytes_a_whole_write_stored(
    has_spec: bool, status: dict | None, rv: int
) -> None:
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod"}
    pod["metadata"] = {"name": "a", "namespace": "default", "uid": "u", "resourceVersion": "1"}
    if has_spec:
        pod["spec"] = {"containers": [{"name": "c", "image": "i"}]}
    if status is not None:
        pod["status"] = status
    before = msgpack.packb(pod, use_bin_type=True)
    old_way = _bound_pod_as_main_wrote_it(pod, "n1", "2024-01-01T00:00:00Z", rv)
    new_way = with_binding(pod, "n1", rv, "2024-01-01T00:00:00Z")
    assert msgpack.packb(new_way, use_bin_type=True) == msgpack.packb(old_way, use_bin_type=True)
    assert msgpack.packb(pod, use_bin_type=True) == before, "the input is not changed"


@pytest.mark.parametrize(
    ("raw", "meta"),
    [
        (b"42|node-7||3f0c", Meta("42", "node-7", "", "3f0c")),
        (b"5|||", Meta("5", "", "", "")),
        ("9|n1|2024-01-01T00:00:00Z|a|b|c", Meta("9", "n1", "2024-01-01T00:00:00Z", "a|b|c")),
        (b'{"rv": "12", "uid": "u-1", "node": "n2"}', Meta("12", "n2", "", "u-1")),  # older
        (b'{"rv": "3", "uid": "u", "node": ""}', Meta("3", "", "", "u")),
    ],
)
def test_meta_strings_parse(raw: bytes | str, meta: Meta) -> None:
    assert parse_meta(raw) == meta
    assert parse_meta(encode_meta(meta)) == meta


@pytest.mark.parametrize("manifest_uid", ["x|y||z", "a\nb", "same"])
def test_a_given_uid_never_reaches_the_meta(
    store: Store, r: redis.Redis, keys: Keys, manifest_uid: str
) -> None:
    # kube's API server ignores metadata.uid on create: the store assigns every uid.
    objs = [make_pod("a"), make_pod("b")]
    for obj in objs:
        obj["metadata"]["uid"] = manifest_uid
    created = store.create_many(objs)
    uids = [p["metadata"]["uid"] for p in created]
    assert manifest_uid not in uids and len(set(uids)) == 2
    assert all(len(u) == 36 and "|" not in u and "\n" not in u for u in uids)
    assert parse_meta(r.hget(keys.store_meta("Pod"), "default/a")).uid == uids[0]
    assert store.bind("default/a", uids[0], "n1") == "bound"
    assert store.update_pod_status("default/a", nominated_node_name="n1", uid=uids[0])
    assert store.delete("Pod", "default/a", uid=uids[0])["spec"]["nodeName"] == "n1"


def test_node_names_with_the_separator_are_refused(store: Store, r: redis.Redis) -> None:
    from distsched.store import InvalidObject

    with pytest.raises(InvalidObject):
        store.create(make_pod("a", nodeName="n|1"))
    store.create(make_pod("b"))
    with pytest.raises(InvalidObject):
        store.update({**make_pod("b", nodeName="bad|node")})
    assert store.resource_version() == 1


def test_scripts_read_a_meta_written_by_an_older_version(
    store: Store, r: redis.Redis, keys: Keys
) -> None:
    pod = store.create(make_pod("a"))
    uid = pod["metadata"]["uid"]
    r.hset(keys.store_meta("Pod"), "default/a", f'{{"rv": "1", "uid": "{uid}", "node": ""}}')
    assert store.bind("default/a", uid, "n1") == "bound"
    assert r.hget(keys.store_meta("Pod"), "default/a").startswith(b"2|n1|")  # type: ignore[union-attr]
    assert store.get("Pod", "default/a")["spec"]["nodeName"] == "n1"  # type: ignore[index]


def test_events_decode_nothing_until_asked(store: Store, r: redis.Redis, keys: Keys) -> None:
    store.create_many([make_node("n1"), make_pod("a")])
    store.update_pod_status("default/a", nominated_node_name="n1")
    (_, node_fields), (_, add_fields), (_, nominated_fields) = entries(r, keys)
    node_event, add, nominated = (
        decode_event(node_fields),
        decode_event(add_fields),
        decode_event(nominated_fields),
    )
    assert (add.node, add.nominated, add.new.decoded) == ("", "", False)
    assert (nominated.node, nominated.nominated, nominated.new.decoded) == ("", "n1", False)
    assert nominated.previous is not None and not nominated.previous.decoded
    assert node_event.kind == "Node" and not node_event.new.decoded
    assert add.obj["metadata"]["name"] == "a" and add.new.decoded
    assert b"old" in nominated_fields and b"old" not in node_fields


def test_only_pod_and_node_updates_carry_the_previous_object(
    store: Store, r: redis.Redis, keys: Keys
) -> None:
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}
    store.create_many([ns, make_node("n1")])
    store.apply({**ns, "metadata": {"name": "team", "labels": {"a": "b"}}})
    store.apply(make_node("n1", cpu="8"))
    namespace_update, node_update = events(r, keys)[2:]
    assert b"old" not in namespace_update
    assert b"old" in node_update


def test_a_binding_without_a_previous_copy_asks_the_store(
    store: Store, r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    store.create_many([make_pod("a"), make_pod("b"), make_pod("c")])
    store.bind_many([BindRequest(f"default/{n}", None, "n1") for n in "abc"])
    store.update_pod_status("default/b", nominated_node_name="n1")  # b moved on
    store.delete("Pod", "default/c")  # c is gone
    asked: list[tuple[str, int]] = []

    def fetch(key: str, rv: int) -> tuple[Any, Any]:
        asked.append((key, rv))
        return store.binding_states([(key, rv, "n1")])[0]

    bind_a, bind_b, bind_c = (decode_event(f, None, fetch) for _, f in entries(r, keys)[3:6])
    assert bind_a.binding and not asked, "nothing read before someone asks"
    exact = decoded(r, keys)[3]
    assert (bind_a.old, bind_a.obj) == (exact.old, exact.obj)
    assert bind_b.obj == store.get("Pod", "default/b") and bind_b.old is None
    with pytest.raises(Unresolved):
        _ = bind_c.obj
    assert bind_c.old is None
    assert [k for k, _ in asked] == ["default/a", "default/b", "default/c"]


def test_event_equality_compares_the_objects(store: Store, r: redis.Redis, keys: Keys) -> None:
    store.create(make_pod("a"))
    store.bind("default/a", None, "n1")
    add, bind = decoded(r, keys)
    assert bind == Event(bind.type, "Pod", "default/a", bind.rv, bind.epoch, bind.obj, add.obj)
    assert bind != Event(bind.type, "Pod", "default/a", bind.rv, bind.epoch, add.obj, add.obj)
    ref = ObjectRef("k", {"kind": "Pod", "spec": {"nodeName": "n2"}})
    assert (ref.node, ref.nominated, ref.decoded) == ("n2", "", True)


def test_may_contain_looks_at_the_blob_before_anything_is_decoded(
    store: Store, r: redis.Redis, keys: Keys
) -> None:
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []}}
    store.create_many([make_pod("plain"), make_pod("anti", affinity=anti)])
    store.bind_many([BindRequest(f"default/{n}", None, "n1") for n in ("plain", "anti")])
    add_plain, add_anti, bind_plain, bind_anti = (f for _, f in entries(r, keys))
    plain, anti_ref = decode_event(add_plain).new, decode_event(add_anti).new
    assert not plain.may_contain(b"podAffinity", b"podAntiAffinity")
    assert anti_ref.may_contain(b"podAntiAffinity") and not anti_ref.may_contain(b"podAffinity")
    # A binding looks at the blob it is rebuilt from; nothing gets decoded.
    bound_plain = decode_event(bind_plain, plain).new
    bound_anti = decode_event(bind_anti, anti_ref).new
    assert not bound_plain.may_contain(b"podAntiAffinity")
    assert bound_anti.may_contain(b"podAntiAffinity")
    assert not (plain.decoded or bound_plain.decoded or bound_anti.decoded)
    # Decoded (the blob dropped), or a binding of a decoded copy: it cannot tell.
    plain.get()
    assert bound_plain.may_contain(b"podAntiAffinity")
    assert ObjectRef("k", {"kind": "Pod"}).may_contain(b"x")


def test_source_is_the_object_a_binding_is_rebuilt_from(
    store: Store, r: redis.Redis, keys: Keys
) -> None:
    store.create(make_pod("a"))
    store.bind("default/a", None, "n1")
    (_, add), (_, bind) = entries(r, keys)
    before = decode_event(add).new
    bound = decode_event(bind, before).new
    assert bound.source() is before.get() and not bound.decoded
    assert bound.get()["spec"]["nodeName"] == "n1"
    assert bound.source() is bound.get()


def test_a_bound_ref_is_its_previous_copy_bound_and_nothing_more() -> None:
    pod = {"kind": "Pod", "metadata": {"name": "a", "namespace": "default"}, "spec": {}}
    previous = blob_ref("default/a", msgpack.packb(pod), None, None, "", "n9")
    bound = bound_ref(previous, "n1", 42, "2026-12-07T00:00:00Z")
    # Known at once, nothing decoded: the node it is bound to, the copy it comes from.
    assert (bound.node, bound.is_binding_of(previous), bound.decoded) == ("n1", True, False)
    assert bound.blob() == msgpack.packb(pod)
    assert previous.nominated == "n9" and not previous.decoded
    assert bound.get() == with_binding(pod, "n1", 42, "2026-12-07T00:00:00Z")
    assert bound.get()["metadata"]["resourceVersion"] == "42"
    # What the entry did not say is read from the object; other names are not attributes.
    assert bound.nominated == ""
    with pytest.raises(AttributeError):
        _ = bound.no_such_field  # type: ignore[attr-defined]
