"""The scheduler's events in standalone mode: what kube-scheduler writes to the API server
as Events (Scheduled, FailedScheduling, Preempted), kept in two Redis streams with a
bounded history, for ``distsched get events`` and ``distsched describe``.

One stream entry per event occurrence (``Keys.recorded_events``; the entry's id is its
time), trimmed to about :data:`HISTORY` entries as it is written (``MAXLEN ~`` on each
XADD), so recording costs one command and no read. The binder's Scheduled events go to a
stream of their own (``Keys.recorded_bindings``), one entry per batch of bindings, written
by store_bind.lua: fields ``n`` (how many) and ``scheduled``, msgpack ``[ns/name, node,
source, uid, ...]``; it keeps about :data:`BINDING_HISTORY` batches (an entry per pod
cost the binding script a third of its time). Readers aggregate occurrences of both into
core/v1 Events as kube's event recorder aggregates them into a series: one Event per
(type, reason, object, reporting controller, related object), with ``count``, the first
and the last time; its message is the latest occurrence's (kube's series keeps the first
note; the latest is what ``distsched explain`` says too). Against a real cluster the
bridge writes events to the API server instead (distsched/kube/events.py).

======== =========================================================================
field    holds
======== =========================================================================
type     Normal or Warning
reason   Scheduled, FailedScheduling, Preempted
action   Binding, Scheduling, Preempting (events.k8s.io's action)
ns, name the pod the event is about
uid      that pod's uid ("" when the writer did not know it)
message  kube's message ("0/N nodes are available: ...", "Successfully assigned ...")
source   the reporting controller: the pod's scheduler name (profile)
related  "ns/name" of the related pod (Preempted: the preemptor), or ""
======== =========================================================================
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import msgpack
import redis

from distsched.keys import Keys
from distsched.redis_text import as_text

HISTORY = 10_000
"""About this many occurrences are kept (the oldest go first)."""

BINDING_HISTORY = 256
"""About this many batches of Scheduled events are kept (each as many as the binder's
batch held: 1 to 1,000 bindings)."""

DEFAULT_SOURCE = "default-scheduler"
ACTIONS = {"Scheduled": "Binding", "FailedScheduling": "Scheduling", "Preempted": "Preempting"}

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class PodEvent:
    """One event about a pod, as kube's EventRecorder.Eventf records it."""

    pod_key: str  # namespace/name
    uid: str
    event_type: str  # Normal or Warning
    reason: str
    message: str
    source: str = DEFAULT_SOURCE
    related: str = ""  # the related pod's namespace/name (Preempted: the preemptor)

    def fields(self) -> dict[Any, Any]:
        namespace, _, name = self.pod_key.partition("/")
        return {
            "type": self.event_type,
            "reason": self.reason,
            "action": ACTIONS.get(self.reason, "Scheduling"),
            "ns": namespace,
            "name": name,
            "uid": self.uid,
            "message": self.message,
            "source": self.source or DEFAULT_SOURCE,
            "related": self.related,
        }


def scheduled(pod_key: str, uid: str, node: str, source: str) -> PodEvent:
    """kube's Scheduled event of a pod bound to ``node`` (store_bind.lua writes the same)."""
    return PodEvent(
        pod_key, uid, "Normal", "Scheduled", scheduled_message(pod_key, node), source=source
    )


def scheduled_message(pod_key: str, node: str) -> str:
    return f"Successfully assigned {pod_key} to {node}"


def record(client: redis.Redis, keys: Keys, events: Sequence[PodEvent]) -> None:
    """Append ``events``, one round trip for all of them. Events are best effort for kube
    too, but a Redis error propagates here: the caller's retry policy applies, as for its
    other writes."""
    if not events:
        return
    pipe = client.pipeline(transaction=False)
    for event in events:
        pipe.xadd(keys.recorded_events, event.fields(), maxlen=HISTORY, approximate=True)
    pipe.execute()


@dataclass
class _Series:
    first_ms: int
    last_id: tuple[int, int]  # the last occurrence's entry id: orders the series
    count: int
    fields: dict[str, str]

    @property
    def last_ms(self) -> int:
        return self.last_id[0]


def read(
    client: redis.Redis,
    keys: Keys,
    *,
    namespace: str | None = None,
    pod_key: str | None = None,
) -> list[Obj]:
    """The recorded events as core/v1 Events (aggregated: see the module docstring), in
    the order of their last occurrence; only ``namespace``'s (None: all), only ``pod_key``'s."""
    series: dict[tuple[str, ...], _Series] = {}
    pipe = client.pipeline(transaction=False)
    pipe.xrange(keys.recorded_events, "-", "+")
    pipe.xrange(keys.recorded_bindings, "-", "+")
    singles, batches = pipe.execute()
    occurrences = heapq.merge(_singles(singles), _scheduled(batches), key=lambda o: o[0])
    for entry, fields in occurrences:
        if namespace is not None and fields.get("ns") != namespace:
            continue
        if pod_key is not None and f"{fields.get('ns')}/{fields.get('name')}" != pod_key:
            continue
        key = tuple(
            fields.get(f, "") for f in ("type", "reason", "ns", "name", "uid", "source", "related")
        )
        known = series.get(key)
        if known is None:
            series[key] = _Series(entry[0], entry, 1, fields)
        else:
            known.last_id, known.count, known.fields = entry, known.count + 1, fields
    return [_as_event(s) for s in sorted(series.values(), key=lambda s: s.last_id)]


def _entry_id(raw: Any) -> tuple[int, int]:
    ms, _, seq = as_text(raw).partition("-")
    return int(ms), int(seq or 0)


def _singles(entries: Any) -> Iterator[tuple[tuple[int, int], dict[str, str]]]:
    for entry_id, raw in entries:
        yield _entry_id(entry_id), {as_text(k): as_text(v) for k, v in raw.items()}


def _scheduled(entries: Any) -> Iterator[tuple[tuple[int, int], dict[str, str]]]:
    """Each batch entry's Scheduled events, at the entry's time."""
    for entry_id, raw in entries:
        at = _entry_id(entry_id)
        try:
            items = msgpack.unpackb(raw[b"scheduled"], raw=False)
        except (KeyError, ValueError, msgpack.UnpackException):
            continue  # not a batch this reader knows
        for i in range(0, len(items) - 3, 4):
            pod_key, node, source, uid = (str(x) for x in items[i : i + 4])
            yield at, scheduled(pod_key, uid, node, source).fields()


def newest_ids(client: redis.Redis, keys: Keys) -> tuple[Any, Any]:
    """The newest entry ids of the two logs (None where empty): changed when an event
    was recorded."""
    pipe = client.pipeline(transaction=False)
    pipe.xrevrange(keys.recorded_events, "+", "-", count=1)
    pipe.xrevrange(keys.recorded_bindings, "+", "-", count=1)
    single, batch = pipe.execute()
    return (single[0][0] if single else None, batch[0][0] if batch else None)


def timestamp(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms // 1000))


def _as_event(s: _Series) -> Obj:
    f = s.fields
    involved: Obj = {"kind": "Pod", "namespace": f.get("ns", ""), "name": f.get("name", "")}
    if f.get("uid"):
        involved["uid"] = f["uid"]
    involved["apiVersion"] = "v1"
    event: Obj = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            # kube names an event after its object and the time it was first seen
            "name": f"{f.get('name', '')}.{s.first_ms * 1_000_000:x}",
            "namespace": f.get("ns", ""),
            "creationTimestamp": timestamp(s.first_ms),
        },
        "involvedObject": involved,
        "reason": f.get("reason", ""),
        "message": f.get("message", ""),
        "source": {"component": f.get("source", "")},
        "firstTimestamp": timestamp(s.first_ms),
        "lastTimestamp": timestamp(s.last_ms),
        "count": s.count,
        "type": f.get("type", ""),
        "action": f.get("action", ""),
        "reportingComponent": f.get("source", ""),
        "reportingInstance": "",
    }
    if f.get("related"):
        namespace, _, name = f["related"].partition("/")
        event["related"] = {"kind": "Pod", "namespace": namespace, "name": name, "apiVersion": "v1"}
    return event
