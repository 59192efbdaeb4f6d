"""The Kubernetes mode's writers on fakes: KubeWriter's background writes (a client whose
loop the test runs: what is queued for one pod, what replaces what), and what
KubeClusterWriter writes into the store before the API server answers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, cast

import pytest
import redis

from distsched.clock import FakeClock
from distsched.framework.plugins.default_preemption import terminating_by_preemption
from distsched.keys import Keys
from distsched.kube.client import KubeClient, Request
from distsched.kube.cluster_writer import KubeClusterWriter
from distsched.kube.events import EventRecorder
from distsched.kube.writer import KubeWriter
from distsched.model import Pod, PodRef
from distsched.model.decode import pod_from_dict
from distsched.store import Store, StoreError
from tests.store.helpers import make_pod


class LoopClient:
    """The part of KubeClient the writer's background work uses: ``call_soon`` keeps the
    callbacks until :meth:`drain` runs them, and every request is recorded and answered."""

    def __init__(self) -> None:
        self.callbacks: list[Callable[[], object]] = []
        self.sent: list[tuple[str, str]] = []

    def call_soon(self, callback: Callable[[], object]) -> None:
        self.callbacks.append(callback)

    async def arequest(self, req: Request) -> dict[str, Any]:
        self.sent.append((req.method, req.path))
        return {}

    def drain(self) -> None:
        async def run() -> None:
            while self.callbacks:
                self.callbacks.pop(0)()
                for _ in range(10):  # let the tasks started run to their end
                    await asyncio.sleep(0)

        asyncio.run(run())


class NoEvents:
    def eventf(self, *args: Any, **kwargs: Any) -> None:
        pass


def pod(name: str, node: str = "") -> dict[str, Any]:
    return {
        "metadata": {"namespace": "default", "name": name, "uid": f"uid-{name}"},
        "spec": {"nodeName": node, "priority": 0},
        "status": {},
    }


def test_a_status_patch_queued_after_an_eviction_does_not_replace_it() -> None:
    """Both are background work of the same pod: a status patch (the latest of a pod
    wins) once took the eviction's place, so the victim was never deleted and the
    writer said it was still being deleted for ever."""
    client = LoopClient()
    writer = KubeWriter(cast(KubeClient, client), events=cast(EventRecorder, NoEvents()))
    victim = pod("victim", node="n1")
    writer.preempt(victim, pod("preemptor"), "n1")
    writer.nominate(victim, "n2")
    assert writer.deleting(["default/victim"])
    client.drain()
    assert ("DELETE", "/api/v1/namespaces/default/pods/victim") in client.sent
    assert ("PATCH", "/api/v1/namespaces/default/pods/victim/status") in client.sent
    assert not writer.deleting(["default/victim"])


def test_status_patches_of_one_pod_still_merge_into_one_request() -> None:
    client = LoopClient()
    writer = KubeWriter(cast(KubeClient, client), events=cast(EventRecorder, NoEvents()))
    pending = pod("pending")
    writer.nominate(pending, "n1")
    writer.condition(pending, reason="Unschedulable", message="0/1 nodes are available")
    client.drain()
    assert client.sent == [("PATCH", "/api/v1/namespaces/default/pods/pending/status")]


def view_pod(store: Store, key: str) -> Pod:
    obj = store.get("Pod", key)
    assert obj is not None
    return pod_from_dict(obj)


def view_pod_of(obj: dict[str, Any]) -> Pod:
    return pod_from_dict(obj)


class RecordingApi:
    """The KubeWriter calls KubeClusterWriter makes for nominations, recorded."""

    def __init__(self) -> None:
        self.nominated: list[tuple[str, str]] = []

    def nominate(self, pod: dict[str, Any], node: str) -> None:
        self.nominated.append((pod["metadata"]["name"], node))


def test_a_nomination_reaches_the_store_before_the_api_server_answers(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    """Issue 23: through the API server alone, the other workers learned a nomination
    seconds later under load and chose the same node and victims for their own
    preemptors. The store (the workers' shared nominator) has it at once."""
    store = Store(r, keys, clock=clock)
    created = store.create(make_pod("urgent"))
    api = RecordingApi()
    writer = KubeClusterWriter(cast(KubeWriter, api), store)
    ref = PodRef("default/urgent", created["metadata"]["uid"])
    writer.set_nominated_node(ref, "n1")
    stored = store.get("Pod", "default/urgent")
    assert stored is not None and stored["status"]["nominatedNodeName"] == "n1"
    assert api.nominated == [("urgent", "n1")]
    writer.set_nominated_node(ref, "")
    stored = store.get("Pod", "default/urgent")
    assert stored is not None and not stored["status"].get("nominatedNodeName")
    assert api.nominated[-1] == ("urgent", "")
    with pytest.raises(StoreError):
        writer.set_nominated_node(PodRef("default/urgent", "another-uid"), "n1")
    assert len(api.nominated) == 2, "nothing to the API server for a pod the store lacks"


class PreemptingApi(RecordingApi):
    scheduler_name = "default-scheduler"

    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        self.clock = clock
        self.evicted: list[str] = []
        self.conditions: list[dict[str, Any] | None] = []

    def victim_condition(self, preemptor: dict[str, Any]) -> dict[str, Any]:
        return KubeWriter.victim_condition(cast(KubeWriter, self), preemptor)

    def preempt(
        self,
        victim: dict[str, Any],
        preemptor: dict[str, Any],
        node: str,
        condition: dict[str, Any] | None = None,
    ) -> None:
        self.evicted.append(victim["metadata"]["name"])
        self.conditions.append(condition)


def test_a_victim_is_marked_in_the_store_before_its_eviction_is_sent(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    """The other workers count it as terminating (DefaultPreemption's eligibility check)
    while its deletion waits behind the API server's writes."""
    store = Store(r, keys, clock=clock)
    store.create(make_pod("victim", nodeName="n1"))
    api = PreemptingApi(clock)
    writer = KubeClusterWriter(cast(KubeWriter, api), store)
    victim = view_pod(store, "default/victim")
    writer.preempt(victim, preemptor=view_pod_of(make_pod("urgent")), node="n1")
    assert api.evicted == ["victim"]
    marked = view_pod(store, "default/victim")
    assert terminating_by_preemption(marked, clock.now_ms() / 1000)
    # the API server gets the store's condition, not a second one with its own time
    sent = api.conditions[0]
    assert sent is not None and sent["reason"] == "PreemptionByScheduler"
    stored = store.get("Pod", "default/victim")
    assert stored is not None
    assert [c for c in stored["status"]["conditions"] if c["type"] == "DisruptionTarget"] == [sent]
    store.delete("Pod", "default/victim")
    writer.preempt(victim, preemptor=view_pod_of(make_pod("urgent")), node="n1")
    assert api.evicted == ["victim", "victim"], "gone from the store: still sent"
