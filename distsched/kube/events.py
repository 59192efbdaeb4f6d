"""Scheduler events through ``events.k8s.io/v1``, aggregated as client-go's event
broadcaster (tools/events) aggregates them.

An event is identified by its "isomorphic" key: type, reason, action, reporting
controller and instance, the object it is about and the related object. The first event
of a key is created; the second turns it into a series (``series.count`` 2, patched);
further ones only count, in memory, and the series is written again every 30 minutes and
a last time once it has been quiet for 6 minutes, when the key is forgotten (a key with no
series is forgotten 6 minutes after its event). So a pod that fails scheduling every
backoff makes one event with a growing count, not an event per attempt, and the API
server sees at most a few writes per key. Writes happen on a background thread; a write
the API server refuses is dropped (logged), one that cannot reach it is retried up to 12
times, 10 s apart, as client-go does. A full queue drops the newest event (and counts
it): events are best effort.
"""

from __future__ import annotations

import logging
import queue
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from distsched.clock import SYSTEM_CLOCK, Clock
from distsched.kube.client import EVENTS, ApiError, KubeClient

log = logging.getLogger(__name__)

FINISH_S = 6 * 60
REFRESH_S = 30 * 60
MAX_TRIES = 12
RETRY_S = 10.0
NOTE_LIMIT = 1024
QUEUE_LIMIT = 10_000
WRITERS = 8

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


@dataclass
class _Entry:
    event: Obj
    count: int = 1
    last_ms: int = 0
    written_count: int = 0
    name: str = ""
    refreshed_ms: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


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
        self._work: queue.Queue[Callable[[], None]] = queue.Queue(QUEUE_LIMIT)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        if start:
            # Several writers: an event is one API call, and a busy API server answers in
            # tens of milliseconds (kube's broadcaster writes each event on a goroutine).
            for i in range(WRITERS):
                thread = threading.Thread(target=self._run, args=(i == 0,), daemon=True)
                thread.name = f"kube-events-{i}"
                thread.start()
                self._threads.append(thread)

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
                self._submit(lambda: self._write(known))
                return
            event: Obj = {
                "apiVersion": "events.k8s.io/v1",
                "kind": "Event",
                "metadata": {
                    "name": f"{ref['name']}.{time.time_ns():x}",
                    "namespace": ref.get("namespace") or "default",
                },
                "eventTime": micro_time(now),
                "reportingController": reporting,
                "reportingInstance": f"{reporting}-{socket.gethostname()}",
                "action": action,
                "reason": reason,
                "regarding": ref,
                "note": truncate(note),
                "type": event_type,
            }
            if rel is not None:
                event["related"] = rel
            entry = self._cache[key] = _Entry(event, last_ms=now, refreshed_ms=now)
            self.stats.by_reason[reason] = self.stats.by_reason.get(reason, 0) + 1
        self._submit(lambda: self._write(entry))

    def _submit(self, work: Callable[[], None]) -> None:
        try:
            self._work.put_nowait(work)
        except queue.Full:
            self.stats.dropped += 1

    def flush(self, timeout_s: float = 10.0) -> None:
        """Wait until what was recorded so far is written (tests, shutdown)."""
        deadline = time.monotonic() + timeout_s
        while self._work.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.01)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(5)

    def _run(self, sweeps: bool) -> None:
        next_sweep = time.monotonic() + 30 if sweeps else float("inf")
        while not self._stop.is_set():
            try:
                work = self._work.get(timeout=1.0)
            except queue.Empty:
                work = None
            if work is not None:
                try:
                    work()
                finally:
                    self._work.task_done()
            if time.monotonic() >= next_sweep:
                self._sweep()
                next_sweep = time.monotonic() + 30

    def _sweep(self) -> None:
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
        for entry in due:
            self._write(entry)

    def _write(self, entry: _Entry) -> None:
        with entry.lock:  # one write of a key at a time: a series patch needs its event
            self._write_entry(entry)

    def _write_entry(self, entry: _Entry) -> None:
        for attempt in range(MAX_TRIES):
            with self._lock:
                count, last_ms, event = entry.count, entry.last_ms, entry.event
                entry.refreshed_ms = self.clock.now_ms()
            namespace = event["metadata"]["namespace"]
            try:
                if count > 1 and entry.name:
                    patch = {"series": {"count": count, "lastObservedTime": micro_time(last_ms)}}
                    self.client.request(
                        "PATCH",
                        EVENTS.path(namespace, entry.name),
                        body=patch,
                        content_type="application/merge-patch+json",
                        what=EVENTS.describe(namespace),
                    )
                    self.stats.patched += 1
                else:
                    body = dict(event)
                    if count > 1:
                        body["series"] = {"count": count, "lastObservedTime": micro_time(last_ms)}
                    created = self.client.create(EVENTS, body, namespace)
                    entry.name = str((created.get("metadata") or {}).get("name", ""))
                    self.stats.created += 1
                entry.written_count = count
                return
            except ApiError as exc:
                if exc.not_found and entry.name:
                    entry.name = ""  # the event expired: create it again
                    continue
                transient = exc.status in (0, 429) or exc.status >= 500
                if transient and attempt + 1 < MAX_TRIES and not self._stop.wait(RETRY_S):
                    continue
                self.stats.failed += 1
                log.warning(
                    "event %s %s not written: %s",
                    event["reason"],
                    event["regarding"].get("name"),
                    exc,
                )
                return
