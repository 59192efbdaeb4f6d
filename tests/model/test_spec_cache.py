"""The parsed-spec cache of Pod.from_dict (issue 14): pods of one template share a decoded
spec, and nothing a pod parses to, or fails with, depends on what was parsed before."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from distsched.model import ManifestError, Pod
from distsched.model.decode import SPEC_CACHE, SpecCache, _decode_pod_spec
from distsched.model.fields import Fields
from tests.model.strategies import pods

Obj = dict[str, Any]


@pytest.fixture(autouse=True)
def empty_cache() -> Iterator[None]:
    SPEC_CACHE.clear()
    yield
    SPEC_CACHE.clear()


def template_pod(name: str, **meta: Any) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "shop", **meta},
        "spec": {
            "containers": [
                {
                    "name": "web",
                    "image": "nginx",
                    "ports": [{"containerPort": 80, "hostPort": 8080}],
                    "resources": {"limits": {"cpu": "250m", "memory": "64Mi"}},
                }
            ],
            "nodeSelector": {"disk": "ssd"},
            "tolerations": [{"key": "dedicated", "operator": "Exists"}],
        },
    }


def error_of(obj: Obj) -> str:
    with pytest.raises(ManifestError) as info:
        Pod.from_dict(obj)
    return str(info.value)


def test_two_pods_of_one_template_keep_their_own_metadata() -> None:
    b_obj = template_pod("web-b", uid="u-b", labels={"app": "web", "i": "b"}, resourceVersion="7")
    a = Pod.from_dict(template_pod("web-a", uid="u-a", labels={"app": "web", "i": "a"}))
    b = Pod.from_dict(b_obj)
    assert (SPEC_CACHE.misses, SPEC_CACHE.hits) == (1, 1)
    assert b.spec is a.spec  # decoded once
    assert (a.key, a.metadata.uid, a.metadata.labels["i"]) == ("shop/web-a", "u-a", "a")
    assert (b.key, b.metadata.uid, b.metadata.labels["i"]) == ("shop/web-b", "u-b", "b")
    assert b.metadata.resource_version == "7" and a.metadata.resource_version == ""
    SPEC_CACHE.clear()
    assert Pod.from_dict(b_obj) == b


def test_a_bound_pod_takes_the_template_and_its_own_node_name() -> None:
    pending = Pod.from_dict(template_pod("web-a"))
    bound_obj = template_pod("web-b")
    bound_obj["spec"]["nodeName"] = "node-7"
    bound = Pod.from_dict(bound_obj)
    assert SPEC_CACHE.hits == 1
    assert bound.spec.node_name == "node-7" and pending.spec.node_name == ""
    assert bound.spec.containers is pending.spec.containers
    assert bound.spec == _decode_pod_spec(Fields(bound_obj["spec"], "spec"))
    # Bound first: the pending pod of the same template must not inherit the node.
    SPEC_CACHE.clear()
    assert Pod.from_dict(bound_obj).spec.node_name == "node-7"
    assert Pod.from_dict(template_pod("web-c")).spec.node_name == ""
    assert SPEC_CACHE.hits == 1


def test_an_invalid_node_name_fails_the_same_way_on_a_cached_template() -> None:
    bad = template_pod("web-b")
    bad["spec"]["nodeName"] = "Not_A_Node"
    cold = error_of(bad)
    Pod.from_dict(template_pod("web-a"))
    assert error_of(bad) == cold
    assert "spec.nodeName" in cold
    bad["spec"]["nodeName"] = 7
    cold = error_of(bad)
    SPEC_CACHE.clear()
    Pod.from_dict(template_pod("web-a"))
    assert error_of(bad) == cold


def test_an_invalid_spec_is_never_cached_and_fails_the_same_way_every_time() -> None:
    bad = template_pod("web-a")
    bad["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "lots"
    first = error_of(bad)
    assert 'invalid quantity "lots"' in first and "shop/web-a" in first
    assert len(SPEC_CACHE) == 0
    assert error_of(bad) == first
    other = copy.deepcopy(bad)
    other["metadata"]["name"] = "web-b"
    assert error_of(other) == first.replace("web-a", "web-b")
    assert len(SPEC_CACHE) == 0


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("priority", True),  # a bool is not an integer, although True == 1 in Python
        ("priority", 1.0),
        ("priority", "1"),
    ],
)
def test_values_equal_in_python_but_not_in_json_are_told_apart(field: str, value: Any) -> None:
    good = template_pod("web-a")
    good["spec"][field] = 1
    assert Pod.from_dict(good).spec.priority == 1
    bad = template_pod("web-b")
    bad["spec"][field] = value
    message = error_of(bad)
    SPEC_CACHE.clear()
    assert error_of(bad) == message


def test_a_spec_msgpack_cannot_pack_is_decoded_without_the_cache() -> None:
    import datetime

    obj = template_pod("web-a")
    obj["spec"]["containers"][0]["image"] = datetime.date(2024, 1, 1)  # YAML gives dates
    message = error_of(obj)
    assert "expected a string" in message
    assert len(SPEC_CACHE) == 0


def test_the_cache_is_bounded_and_keeps_the_recently_used() -> None:
    cache = SpecCache(size=2)

    def spec(cpu: str) -> Fields:
        container = {"name": "c", "resources": {"requests": {"cpu": cpu}}}
        return Fields({"containers": [container]}, "spec")

    cache.decode(spec("1"))
    cache.decode(spec("2"))
    cache.decode(spec("1"))  # 1 is now the most recently used
    cache.decode(spec("3"))  # evicts 2
    assert len(cache) == 2
    hits = cache.hits
    cache.decode(spec("1"))
    cache.decode(spec("3"))
    assert cache.hits == hits + 2
    cache.decode(spec("2"))
    assert cache.misses == 4


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(pods, pods)
def test_decoding_does_not_depend_on_what_was_decoded_before(a: Pod, b: Pod) -> None:
    a_obj, b_obj = a.to_dict(), b.to_dict()
    SPEC_CACHE.clear()
    cold_a, cold_b = Pod.from_dict(a_obj), Pod.from_dict(b_obj)
    assert (cold_a, cold_b) == (a, b)
    # b's spec under a's metadata, from a warm cache, equals a cold decode of it.
    mixed = {**a_obj, "spec": b_obj["spec"]}
    warm = Pod.from_dict(mixed)
    SPEC_CACHE.clear()
    assert warm == Pod.from_dict(mixed)
    assert warm.metadata == a.metadata
