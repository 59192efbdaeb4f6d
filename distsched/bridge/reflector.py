"""List and watch one resource of the API server (client-go's Reflector, reduced).

It lists (paged) and hands the whole list to its sink (``replace``), then watches from the
list's resourceVersion with bookmarks and hands each event on (``changes``). A watch the
server ends (its timeout) is opened again from the last version seen; 410 Gone (the
version is too old) means a new list; any other failure (the API server restarting,
network) is waited out with capped backoff and said in the log. :meth:`relist` asks for a
new list from another thread (the store lost its data).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection
from typing import Protocol

from distsched import metrics
from distsched.bridge.convert import Mirrored, Obj, store_object, wanted
from distsched.connection import Backoff
from distsched.kube.client import ApiError, KubeClient, WatchCancel
from distsched.store.codec import object_key
from distsched.store.mirror import Change

log = logging.getLogger(__name__)


class Sink(Protocol):
    def replace(self, kind: str, objs: list[Obj]) -> None: ...

    def changes(self, kind: str, changes: list[Change]) -> None: ...


class Reflector:
    def __init__(
        self,
        client: KubeClient,
        mirrored: Mirrored,
        sink: Sink,
        *,
        profiles: Collection[str],
        stop: threading.Event,
        watch_timeout_s: int = 300,
    ) -> None:
        self.client = client
        self.mirrored = mirrored
        self.sink = sink
        self.profiles = frozenset(profiles)
        self.stop = stop
        self.watch_timeout_s = watch_timeout_s
        self.resource_version = ""
        self.synced = threading.Event()
        self.lists = 0
        self._relist = threading.Event()
        self._cancel = WatchCancel()
        self._thread: threading.Thread | None = None

    @property
    def kind(self) -> str:
        return self.mirrored.kind

    def start(self) -> Reflector:
        self._thread = threading.Thread(target=self.run, name=f"reflector-{self.kind}", daemon=True)
        self._thread.start()
        return self

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def relist(self) -> None:
        """List again now (the watch in progress is ended)."""
        self._relist.set()
        self._cancel.cancel()

    def close(self) -> None:
        """End the watch in progress; with ``stop`` set, the thread returns."""
        self._cancel.cancel()

    def _params(self) -> dict[str, str]:
        selector = self.mirrored.field_selector
        return {"fieldSelector": selector} if selector else {}

    def run(self) -> None:
        backoff = Backoff(initial_s=0.2, max_s=10.0)
        need_list = True
        while not self.stop.is_set():
            try:
                if need_list or self._relist.is_set():
                    self._relist.clear()
                    self._cancel.reset()
                    self._list()
                    need_list = False
                self._watch()
                if backoff.failures:
                    log.warning("bridge: %s watch is back", self.kind)
                backoff.reset()
            except ApiError as exc:
                if exc.gone:
                    log.info("bridge: %s: resourceVersion too old; listing again", self.kind)
                    need_list = True
                    continue
                delay = backoff.next_delay()
                metrics.bridge_watch_errors.labels(self.kind).inc()
                log.warning("bridge: %s: %s; retrying in %.1fs", self.kind, exc, delay)
                self.stop.wait(delay)
            except Exception:
                delay = backoff.next_delay()
                log.exception(
                    "bridge: %s: unexpected error; listing again in %.1fs", self.kind, delay
                )
                need_list = True
                self.stop.wait(delay)

    def _convert(self, obj: Obj) -> Obj:
        return store_object(self.kind, self.mirrored.api_version, obj)

    def _list(self) -> None:
        items, rv = self.client.list(self.mirrored.resource, params=self._params())
        objs = [self._convert(o) for o in items if wanted(self.kind, o, self.profiles)]
        self.sink.replace(self.kind, objs)
        self.resource_version = rv
        self.lists += 1
        metrics.bridge_lists.labels(self.kind).inc()
        self.synced.set()

    def _watch(self) -> None:
        """One watch, until the server ends it (or a stop or relist is asked for). Each
        change goes to the sink as it comes: the sink batches what queued up meanwhile."""
        events = self.client.watch(
            self.mirrored.resource,
            resource_version=self.resource_version,
            params=self._params(),
            timeout_s=self.watch_timeout_s,
            cancel=self._cancel,
        )
        try:
            for event in events:
                meta = event.obj.get("metadata") or {}
                if meta.get("resourceVersion"):
                    self.resource_version = str(meta["resourceVersion"])
                if event.type != "BOOKMARK":
                    self.sink.changes(self.kind, [self._change(event.type, event.obj)])
                if self.stop.is_set() or self._relist.is_set():
                    return
        finally:
            events.close()

    def _change(self, event_type: str, obj: Obj) -> Change:
        """An event as a change of the store: a deletion, or an object the store keeps no
        longer (a pending pod being deleted) or never kept (the deletion is then a no-op),
        or the object as it is now."""
        if event_type == "DELETED" or not wanted(self.kind, obj, self.profiles):
            kind, key = object_key(self._convert(obj))
            return Change.delete(kind, key, str((obj.get("metadata") or {}).get("uid", "")))
        return Change.upsert(self._convert(obj))
