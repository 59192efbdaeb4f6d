"""Object builders and stream helpers for the store tests."""

from __future__ import annotations

from typing import Any, cast

import redis

from distsched.keys import Keys
from distsched.store import Event, decode_stream


def make_pod(name: str, namespace: str = "default", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "web"}},
        "spec": {
            "containers": [
                {"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "100m"}}}
            ],
            **spec,
        },
    }


def make_node(name: str, cpu: str = "4") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
    }


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
