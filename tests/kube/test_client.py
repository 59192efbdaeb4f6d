"""The API client against a real kube-apiserver: lists, watches, writes, bindings, errors."""

from __future__ import annotations

import threading

import pytest

from distsched.kube.client import NODES, PODS, ApiError, KubeClient, WatchEvent
from distsched.kube.config import load
from distsched.kube.testenv import TestEnv
from tests.kube.helpers import api_node, api_pod, clean, node_of

pytestmark = pytest.mark.kube


def test_list_pages_and_watch_from_the_lists_version(kube: KubeClient) -> None:
    clean(kube)
    for i in range(7):
        kube.create(PODS, api_pod(f"p{i}", scheduler="nobody"), "default")
    items, rv = kube.list(PODS, namespace="default", page=3)
    assert sorted(p["metadata"]["name"] for p in items) == [f"p{i}" for i in range(7)]
    seen: list[WatchEvent] = []

    def watch() -> None:
        for event in kube.watch(PODS, resource_version=rv, namespace="default", timeout_s=5):
            seen.append(event)
            if event.type == "DELETED":
                return

    thread = threading.Thread(target=watch)
    thread.start()
    kube.create(PODS, api_pod("late", scheduler="nobody"), "default")
    kube.delete(PODS, "p0", "default", grace_period_s=0)
    thread.join(10)
    # A deletion may show the deletion timestamp first (MODIFIED), then the DELETED.
    assert (seen[0].type, seen[0].obj["metadata"]["name"]) == ("ADDED", "late")
    assert (seen[-1].type, seen[-1].obj["metadata"]["name"]) == ("DELETED", "p0")


def test_bindings_and_their_conflicts(kube: KubeClient) -> None:
    clean(kube)
    kube.create(NODES, api_node("n1"))
    created = kube.create(PODS, api_pod("p", scheduler="nobody"), "default")
    uid = created["metadata"]["uid"]
    with pytest.raises(ApiError) as wrong_uid:
        kube.bind("default", "p", "n1", uid="not-the-uid")
    assert wrong_uid.value.conflict
    kube.bind("default", "p", "n1", uid=uid)
    assert node_of(kube, "p") == "n1"
    with pytest.raises(ApiError) as again:
        kube.bind("default", "p", "n1", uid=uid)
    assert again.value.conflict
    with pytest.raises(ApiError) as gone:
        kube.bind("default", "missing", "n1")
    assert gone.value.not_found


def test_an_rbac_denial_is_one_line_naming_the_verb_and_resource(apiserver: TestEnv) -> None:
    limited = KubeClient(load(str(apiserver.limited_kubeconfig)))
    try:
        with pytest.raises(ApiError) as denied:
            limited.bind("default", "p", "n1")
        message = str(denied.value)
        assert "\n" not in message
        assert message.startswith("forbidden: create pods/binding in namespace default:")
        assert "distsched-limited" in message
        with pytest.raises(ApiError) as listing:
            limited.list(NODES)
        assert str(listing.value).startswith("forbidden: get nodes:")
    finally:
        limited.close()
