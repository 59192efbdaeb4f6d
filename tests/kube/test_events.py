"""The event recorder (kube's events.k8s.io broadcaster): aggregation into series, writes
as tasks on the client's loop, retries, limits. A fake API on a real event loop; no API
server needed."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from distsched.clock import FakeClock
from distsched.kube import events as events_module
from distsched.kube.client import ApiError, Request
from distsched.kube.events import FINISH_S, EventRecorder


class FakeApi:
    """What the recorder uses of KubeClient: ``call_soon`` and ``arequest``, on a loop
    of its own thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.requests: list[Request] = []
        self.wakes = 0
        self.fail_status: int | None = None
        self.hold: asyncio.Event | None = None

    def call_soon(self, callback: Callable[[], object]) -> None:
        self.wakes += 1
        self.loop.call_soon_threadsafe(callback)

    async def arequest(self, req: Request) -> dict[str, Any]:
        self.requests.append(req)
        if self.hold is not None:
            await self.hold.wait()
        if self.fail_status is not None:
            raise ApiError(self.fail_status, "", "refused", verb="create", what="events")
        if req.method == "POST":
            return {"metadata": {"name": req.body["metadata"]["name"]}}
        return {}

    def block_loop(self) -> threading.Event:
        """Keep the loop busy until the returned event is set."""
        release, entered = threading.Event(), threading.Event()

        def busy() -> None:
            entered.set()
            release.wait(10)

        self.loop.call_soon_threadsafe(busy)
        entered.wait(5)
        return release

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


@pytest.fixture
def api() -> Iterator[FakeApi]:
    fake = FakeApi()
    yield fake
    fake.close()


def pod(name: str) -> dict[str, Any]:
    return {"metadata": {"namespace": "default", "name": name, "uid": f"uid-{name}"}}


def recorder(api: FakeApi, clock: FakeClock | None = None) -> EventRecorder:
    return EventRecorder(api, controller="default-scheduler", clock=clock or FakeClock())  # type: ignore[arg-type]


def test_each_pods_scheduled_event_is_created_with_kubes_fields(api: FakeApi) -> None:
    rec = recorder(api)
    for i in range(50):
        rec.eventf(pod(f"p{i}"), None, "Normal", "Scheduled", "Binding", f"assigned to n{i}")
    rec.flush(5)
    assert rec.stats.created == 50 and not rec.stats.failed
    posts = [r for r in api.requests if r.method == "POST"]
    assert len(posts) == 50
    body = posts[0].body
    assert posts[0].path == "/apis/events.k8s.io/v1/namespaces/default/events"
    assert body["regarding"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "p0",
        "uid": "uid-p0",
        "namespace": "default",
    }
    assert body["reason"] == "Scheduled" and body["action"] == "Binding"
    assert body["reportingController"] == "default-scheduler"
    assert body["note"] == "assigned to n0" and "series" not in body


def test_events_recorded_while_the_loop_is_busy_start_with_one_wake_up(api: FakeApi) -> None:
    rec = recorder(api)
    rec.flush(5)
    release = api.block_loop()
    before = api.wakes
    for i in range(100):
        rec.eventf(pod(f"p{i}"), None, "Normal", "Scheduled", "Binding", "assigned")
    assert api.wakes - before == 1
    release.set()
    rec.flush(5)
    assert rec.stats.created == 100


def test_a_repeated_event_becomes_one_series(api: FakeApi) -> None:
    clock = FakeClock()
    rec = recorder(api, clock)
    p = pod("stuck")
    for _ in range(3):
        rec.eventf(p, None, "Warning", "FailedScheduling", "Scheduling", "0/3 nodes")
        rec.flush(5)
        clock.step(1000)
    assert [r.method for r in api.requests] == ["POST", "PATCH"]
    assert api.requests[1].body["series"]["count"] == 2
    assert rec.stats.created == 1 and rec.stats.patched == 1
    # quiet for FINISH_S: written a last time with its count, then forgotten
    clock.step(FINISH_S * 1000)
    rec.sweep()
    rec.flush(5)
    assert api.requests[-1].method == "PATCH" and api.requests[-1].body["series"]["count"] == 3
    rec.eventf(p, None, "Warning", "FailedScheduling", "Scheduling", "0/3 nodes")
    rec.flush(5)
    assert api.requests[-1].method == "POST"  # a new event: the key was forgotten


def test_a_refused_event_is_dropped_and_an_unreachable_one_gives_up_on_stop(
    api: FakeApi,
) -> None:
    rec = recorder(api)
    api.fail_status = 422
    rec.eventf(pod("a"), None, "Normal", "Scheduled", "Binding", "x")
    rec.flush(5)
    assert rec.stats.failed == 1 and len(api.requests) == 1  # not retried
    api.fail_status = 0  # unreachable: retried every RETRY_S until stopped
    rec.eventf(pod("b"), None, "Normal", "Scheduled", "Binding", "x")
    deadline = time.monotonic() + 5
    while len(api.requests) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    started = time.monotonic()
    rec.stop()
    rec.flush(5)
    assert time.monotonic() - started < 2
    assert rec.stats.failed == 2 and len(api.requests) == 2


def test_a_full_queue_drops_the_newest_events(
    api: FakeApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(events_module, "QUEUE_LIMIT", 5)
    rec = recorder(api)
    hold = asyncio.Event()
    api.hold = hold
    for i in range(8):
        rec.eventf(pod(f"p{i}"), None, "Normal", "Scheduled", "Binding", "x")
    assert rec.stats.dropped == 3
    api.loop.call_soon_threadsafe(hold.set)
    rec.flush(5)
    assert rec.stats.created == 5
