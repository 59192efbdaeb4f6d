"""Scheduler events through ``events.k8s.io/v1``, aggregated as client-go's event
broadcaster (tools/events) aggregates them.

An event is identified by its "isomorphic" key: type, reason, action, reporting
controller and instance, the object it is about and the related object. The first event
of a key is created; the second turns it into a series (``series.count`` 2, patched);
further ones only count, in memory, and the series is written again every 30 minutes and
a last time once it has been quiet for 6 minutes, when the key is forgotten (a key with no
series is forgotten 6 minutes after its event). So a pod that fails scheduling every
backoff makes one event with a growing count, not an event per attempt, and the API
server sees at most a few writes per key.

Writes run as tasks on the client's event loop (as kube's broadcaster writes each event on
a goroutine): recording an event only queues it, and the events queued between two turns
of the loop start with one wake-up, so a binder that bound a batch pays no thread hand-off
per event. At most WRITERS writes run at once. A write the API server refuses is dropped
(logged), one that cannot reach it is retried up to 12 times, 10 s apart, as client-go
does. More than QUEUE_LIMIT writes waiting drops the newest event (and counts it): events
are best effort.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from distsched.clock import SYSTEM_CLOCK, Clock
from distsched.kube.client import EVENTS, ApiError, KubeClient, Request, create_request

log = logging.getLogger(__name__)

FINISH_S = 6 * 60
REFRESH_S = 30 * 60
MAX_TRIES = 12
RETRY_S = 10.0
NOTE_LIMIT = 1024
QUEUE_LIMIT = 10_000
WRITERS = 32
SWEEP_S = 30.0

Obj = dict[str, Any]


def object_reference(obj: Obj) -> Obj:
    meta = obj.get("metadata") or {}
    ref = {
        "apiVersion": obj.get("apiVersion", "v1"),
        "kind": obj.get("kind", "Pod"),
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
    }
    if meta.get("namespace"):
        ref["namespace"] = meta["namespace"]
    return ref


def micro_time(ms: int) -> str:
    seconds, millis = divmod(ms, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}000Z"


def truncate(note: str) -> str:
    """kube's truncateMessage: notes longer than the API's limit end in " ..."."""
    return note if len(note) <= NOTE_LIMIT else note[: NOTE_LIMIT - 4] + " ..."


def new_event(
    regarding: Obj,
    related: Obj | None,
    event_type: str,
    reason: str,
    action: str,
    note: str,
    *,
    reporting: str,
    instance: str,
    now_ms: int,
) -> Obj:
    """An events.k8s.io/v1 Event about ``regarding`` (an :func:`object_reference`)."""
    event: Obj = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {
            "name": f"{regarding['name']}.{time.time_ns():x}",
            "namespace": regarding.get("namespace") or "default",
        },
        "eventTime": micro_time(now_ms),
        "reportingController": reporting,
        "reportingInstance": instance,
        "action": action,
        "reason": reason,
        "regarding": regarding,
        "note": truncate(note),
        "type": event_type,
    }
    if related is not None:
        event["related"] = related
    return event


@dataclass
class _Entry:
    event: Obj
    count: int = 1
    last_ms: int = 0
    written_count: int = 0
    name: str = ""
    refreshed_ms: int = 0
    # One write of a key at a time (a series patch needs its event); made on the loop.
    lock: asyncio.Lock | None = None


@dataclass
class EventStats:
    created: int = 0
    patched: int = 0
    dropped: int = 0
    failed: int = 0
    by_reason: dict[str, int] = field(default_factory=dict)


class EventRecorder:
    def __init__(
        self,
        client: KubeClient,
        *,
        controller: str = "default-scheduler",
        clock: Clock = SYSTEM_CLOCK,
        start: bool = True,
    ) -> None:
        self.client = client
        self.controller = controller
        self.instance = f"{controller}-{socket.gethostname()}"
        self.clock = clock
        self.stats = EventStats()
        self._cache: dict[tuple[Any, ...], _Entry] = {}
        self._lock = threading.Lock()
        self._inbox: list[_Entry] = []  # to write, gathered until the loop's next turn
        self._woken = False  # the loop was asked to start the inbox's writes
        self._outstanding = 0  # writes queued or running
        self._stopped = False
        self._gate: asyncio.Semaphore | None = None
        self._stop_event: asyncio.Event | None = None
        self._sweeper: asyncio.Task[None] | None = None
        if start:
            client.call_soon(self._start_sweeper)

    def eventf(
        self,
        regarding: Obj,
        related: Obj | None,
        event_type: str,
        reason: str,
        action: str,
        note: str,
        *,
        controller: str | None = None,
    ) -> None:
        """Record an event (kube's EventRecorder.Eventf); returns at once."""
        now = self.clock.now_ms()
        reporting = controller or self.controller
        ref = object_reference(regarding)
        rel = object_reference(related) if related is not None else None
        key = (
            event_type,
            reason,
            action,
            reporting,
            tuple(sorted(ref.items())),
            tuple(sorted(rel.items())) if rel else None,
        )
        with self._lock:
            known = self._cache.get(key)
            if known is not None:
                known.count += 1
                known.last_ms = now
                if known.count > 2:
                    return  # counted; written on refresh or when the series finishes
                entry = known
            else:
                event = new_event(
                    ref,
                    rel,
                    event_type,
                    reason,
                    action,
                    note,
                    reporting=reporting,
                    instance=f"{reporting}-{socket.gethostname()}",
                    now_ms=now,
                )
                entry = self._cache[key] = _Entry(event, last_ms=now, refreshed_ms=now)
                self.stats.by_reason[reason] = self.stats.by_reason.get(reason, 0) + 1
            wake = self._queue_locked([entry])
        if wake:
            self.client.call_soon(self._start_inbox)

    def _queue_locked(self, entries: list[_Entry]) -> bool:
        """Queue writes (the lock held); whether the loop must be woken for them."""
        for entry in entries:
            if self._outstanding >= QUEUE_LIMIT:
                self.stats.dropped += 1
                continue
            self._outstanding += 1
            self._inbox.append(entry)
        wake = bool(self._inbox) and not self._woken
        self._woken = self._woken or wake
        return wake

    # --- on the client's loop -----------------------------------------------------------
    def _start_inbox(self) -> None:
        with self._lock:
            entries, self._inbox, self._woken = self._inbox, [], False
        for entry in entries:
            asyncio.get_running_loop().create_task(self._write(entry))

    def _start_sweeper(self) -> None:
        if not self._stopped:
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep_every())

    async def _sweep_every(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_S)
            self.sweep()

    def sweep(self) -> None:
        """Refresh long series, write finished ones a last time, forget quiet keys."""
        now = self.clock.now_ms()
        with self._lock:
            due = []
            for key, entry in list(self._cache.items()):
                quiet = now - entry.last_ms >= FINISH_S * 1000
                if (
                    entry.count > 1
                    and entry.count != entry.written_count
                    and (quiet or now - entry.refreshed_ms >= REFRESH_S * 1000)
                ):
                    due.append(entry)
                if quiet:
                    del self._cache[key]
            wake = self._queue_locked(due)
        if wake:
            self.client.call_soon(self._start_inbox)

    async def _write(self, entry: _Entry) -> None:
        try:
            if self._gate is None:
                self._gate = asyncio.Semaphore(WRITERS)
            if entry.lock is None:
                entry.lock = asyncio.Lock()
            async with self._gate, entry.lock:
                await self._write_entry(entry)
        finally:
            with self._lock:
                self._outstanding -= 1

    async def _write_entry(self, entry: _Entry) -> None:
        for attempt in range(MAX_TRIES):
            with self._lock:
                count, last_ms, event = entry.count, entry.last_ms, entry.event
                entry.refreshed_ms = self.clock.now_ms()
            namespace = event["metadata"]["namespace"]
            try:
                if count > 1 and entry.name:
                    patch = {"series": {"count": count, "lastObservedTime": micro_time(last_ms)}}
                    await self.client.arequest(
                        Request(
                            "PATCH",
                            EVENTS.path(namespace, entry.name),
                            patch,
                            content_type="application/merge-patch+json",
                            what=EVENTS.describe(namespace),
                        )
                    )
                    self.stats.patched += 1
                else:
                    body = dict(event)
                    if count > 1:
                        body["series"] = {"count": count, "lastObservedTime": micro_time(last_ms)}
                    created = await self.client.arequest(create_request(EVENTS, body, namespace))
                    entry.name = str((created.get("metadata") or {}).get("name", ""))
                    self.stats.created += 1
                entry.written_count = count
                return
            except ApiError as exc:
                if exc.not_found and entry.name:
                    entry.name = ""  # the event expired: create it again
                    continue
                retry = (exc.status in (0, 429) or exc.status >= 500) and attempt + 1 < MAX_TRIES
                if retry and not await self._stopped_within(RETRY_S):
                    continue
                self.stats.failed += 1
                log.warning(
                    "event %s %s not written: %s",
                    event["reason"],
                    event["regarding"].get("name"),
                    exc,
                )
                return

    async def _stopped_within(self, seconds: float) -> bool:
        if self._stopped:
            return True
        if self._stop_event is None:
            self._stop_event = asyncio.Event()
        try:
            await asyncio.wait_for(self._stop_event.wait(), seconds)
        except TimeoutError:
            return self._stopped
        return True

    def _on_stop(self) -> None:
        if self._stop_event is not None:
            self._stop_event.set()
        if self._sweeper is not None:
            self._sweeper.cancel()

    # --- from any thread ------------------------------------------------------------------
    def flush(self, timeout_s: float = 10.0) -> None:
        """Wait until what was recorded so far is written (tests, shutdown)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if not self._outstanding:
                    return
            time.sleep(0.01)

    def stop(self) -> None:
        """Writes waiting to be retried give up; the periodic sweep ends."""
        self._stopped = True
        with contextlib.suppress(RuntimeError):  # the client's loop is closed already
            self.client.call_soon(self._on_stop)
