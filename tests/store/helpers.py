"""Object builders, stream helpers and a recording event handler for the store tests."""

from __future__ import annotations

import threading
from typing import Any, cast

import redis

from distsched.keys import Keys
from distsched.store import Event, decode_stream
from tests.support.objects import node, pod


def make_pod(name: str, namespace: str = "default", **spec: Any) -> dict[str, Any]:
    """A pod app=web requesting 100m cpu (no memory)."""
    return pod(name, namespace=namespace, labels={"app": "web"}, memory=None, image="nginx", **spec)


def make_node(name: str, cpu: str = "4") -> dict[str, Any]:
    return node(name, cpu=cpu, memory="8Gi", pods="110")


def entries(r: redis.Redis, keys: Keys) -> list[tuple[bytes, dict[bytes, bytes]]]:
    """(id, raw fields) of every entry in the event stream, oldest first."""
    return cast(list[tuple[bytes, dict[bytes, bytes]]], r.xrange(keys.events))


def events(r: redis.Redis, keys: Keys) -> list[dict[bytes, bytes]]:
    """Raw fields of every entry in the event stream, oldest first."""
    return [fields for _, fields in entries(r, keys)]


def decoded(r: redis.Redis, keys: Keys) -> list[Event]:
    """Every event of the stream, decoded in order as a reader does (bindings, which carry
    no object, rebuilt from the earlier entries)."""
    return list(decode_stream(entries(r, keys)))


class Recorder:
    """An EventHandler that records (what, name, rv, flag) tuples."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.changed = threading.Condition()

    def _record(self, *call: Any) -> None:
        with self.changed:
            self.calls.append(call)
            self.changed.notify_all()

    def on_add(self, obj: dict, initial_list: bool) -> None:
        self._record(
            "add", obj["metadata"]["name"], obj["metadata"]["resourceVersion"], initial_list
        )

    def on_update(self, old: dict, new: dict) -> None:
        self._record(
            "update",
            new["metadata"]["name"],
            old["metadata"]["resourceVersion"],
            new["metadata"]["resourceVersion"],
        )

    def on_delete(self, obj: dict, final_state_unknown: bool) -> None:
        self._record(
            "delete",
            obj["metadata"]["name"],
            obj["metadata"]["resourceVersion"],
            final_state_unknown,
        )

    def wait_for(self, n: int, timeout: float = 5.0) -> list[tuple[Any, ...]]:
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.calls) >= n, timeout), self.calls
            return list(self.calls)
