"""KubeWriter's background writes, on a fake client whose loop the test runs: what is
queued for one pod, and what replaces what."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, cast

from distsched.kube.client import KubeClient, Request
from distsched.kube.events import EventRecorder
from distsched.kube.writer import KubeWriter


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
