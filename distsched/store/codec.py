"""Object and event encoding shared by the store and its readers (informers, handlers).

Objects are plain Kubernetes-shaped dicts (camelCase). A stored value is
``msgpack.packb(obj, use_bin_type=True)`` of the whole object, resourceVersion included.

The resourceVersion is only known inside the write script, and Lua cannot re-encode
msgpack faithfully (cmsgpack turns ``{}`` into ``[]``). So Python packs the object with a
random placeholder string in ``metadata.resourceVersion`` and cuts the bytes around it
(:func:`pack_with_rv_slot`); the script splices the msgpack string of the rv in between
(``prefix .. 0xa0+len(rv) .. rv .. suffix``, a fixstr since an rv has < 32 digits). The
result is byte-for-byte what ``packb`` gives for the object with that rv.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import msgpack

from distsched.store.errors import InvalidObject

KINDS = ("Pod", "Node")  # what the scheduler reads: the default of snapshots and informers
API_VERSIONS = {
    "Pod": "v1",
    "Node": "v1",
    "Namespace": "v1",
    "PriorityClass": "scheduling.k8s.io/v1",
    "PodDisruptionBudget": "policy/v1",
    "Deployment": "apps/v1",
    "ReplicaSet": "apps/v1",
    "StatefulSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "Job": "batch/v1",
}
ALL_KINDS = tuple(API_VERSIONS)  # every kind the store keeps
CLUSTER_SCOPED = frozenset({"Node", "Namespace", "PriorityClass"})
DEFAULT_NAMESPACE = "default"

Obj = dict[str, Any]

_PLACEHOLDER_ATTEMPTS = 4

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"


def pod_key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


def object_key(obj: Mapping[str, Any]) -> tuple[str, str]:
    """``(kind, key)`` of an object: namespaced objects (pods, workloads, PDBs) are
    ``ns/name`` (namespace defaults to ``default``), cluster-scoped ones (nodes,
    namespaces, priority classes) are ``name``."""
    kind = obj.get("kind")
    if kind not in API_VERSIONS:
        raise InvalidObject(f"kind must be one of {', '.join(ALL_KINDS)}, got {kind!r}")
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        raise InvalidObject(f"{kind}: metadata must be a mapping")
    name = meta.get("name")
    if not isinstance(name, str) or not name or "/" in name:
        raise InvalidObject(f"{kind}: metadata.name must be a non-empty string without '/'")
    if kind in CLUSTER_SCOPED:
        if meta.get("namespace"):
            raise InvalidObject(f"{kind} {name}: cluster-scoped, namespace must be empty")
        return kind, name
    namespace = meta.get("namespace") or DEFAULT_NAMESPACE
    if not isinstance(namespace, str) or "/" in namespace:
        raise InvalidObject(f"{kind} {name}: metadata.namespace must be a string without '/'")
    return kind, pod_key(namespace, name)


def node_name_of(obj: Mapping[str, Any]) -> str:
    """``spec.nodeName`` of a pod ("" if unbound); "" for every other kind."""
    if obj.get("kind") != "Pod":
        return ""
    spec = obj.get("spec") or {}
    return str(spec.get("nodeName") or "")


def uid_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def rv_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def rfc3339(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def with_rv(obj: Obj, rv: int | str) -> Obj:
    """A shallow copy of ``obj`` whose metadata.resourceVersion is ``rv``."""
    return {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(rv)}}


def pack_with_rv_slot(obj: Obj) -> tuple[bytes, bytes]:
    """msgpack of ``obj`` split around its metadata.resourceVersion value.

    The placeholder is random per call, so no value inside the object can be crafted to
    collide with it; on the (2**-64) chance one does, another is drawn."""
    for _ in range(_PLACEHOLDER_ATTEMPTS):
        placeholder = "\x00rv:" + secrets.token_hex(8)
        marker = msgpack.packb(placeholder, use_bin_type=True)
        parts = msgpack.packb(with_rv(obj, placeholder), use_bin_type=True).split(marker)
        if len(parts) == 2:
            return parts[0], parts[1]
    raise InvalidObject("could not place the resourceVersion in the object's encoding")


def decode_object(blob: bytes | str) -> Obj:
    if isinstance(blob, str):
        raise TypeError("store values are msgpack bytes; use a client with decode_responses=False")
    obj: Obj = msgpack.unpackb(blob, raw=False)
    return obj


@dataclass(frozen=True, slots=True)
class Event:
    """One entry of the event stream.

    ``obj`` is the new object (ADDED, MODIFIED) or the last state (DELETED, with its
    metadata.resourceVersion set to the deletion's rv as Kubernetes does); ``old`` is the
    previous object of a MODIFIED event. ``epoch`` identifies the store's history: it
    changes when Redis lost the data, and then rv numbering restarted.
    """

    type: str
    kind: str
    key: str
    rv: int
    epoch: str
    obj: Obj
    old: Obj | None = None


def field_str(fields: Mapping[bytes, bytes], name: bytes) -> str:
    return fields[name].decode()


def decode_event(fields: Mapping[bytes, bytes]) -> Event:
    """An :class:`Event` from the raw fields of a stream entry."""
    etype = field_str(fields, b"type")
    rv = int(fields[b"rv"])
    obj = decode_object(fields[b"obj"])
    if etype == DELETED:
        obj = with_rv(obj, rv)
    old_blob = fields.get(b"old")
    return Event(
        type=etype,
        kind=field_str(fields, b"kind"),
        key=field_str(fields, b"key"),
        rv=rv,
        epoch=field_str(fields, b"epoch"),
        obj=obj,
        old=decode_object(old_blob) if old_blob else None,
    )
