"""Read-only views of a deployment for operators: where every pending pod is (the queue's
sub-queues, the ledger's assumed set, the dead letters) and why a pod is pending.

`distsched queue`, `distsched explain`, the demo and replay use them. They read Redis
directly (no worker needs to run) and write nothing.
"""

from __future__ import annotations

from typing import Any

import redis

from distsched.cache.ledger_types import NodeUsage
from distsched.explain_record import read_explanation
from distsched.keys import Keys
from distsched.queue_types import DEAD, SUB_QUEUES, decode_info, key_of_active_member
from distsched.redis_text import as_text
from distsched.store import parse_meta

LIVE_QUEUES = tuple(name for name in SUB_QUEUES if name != DEAD)
"""The queue's sorted sets a pod waits in, in the order `distsched queue` shows them."""

PLACES = (*LIVE_QUEUES, "assumed", "dead-lettered")
"""Every place a pending pod can be: the sub-queues, the ledger's assumed set (reserved,
waiting for the binder) and the dead-letter set."""


def _place_keys(keys: Keys) -> dict[str, str]:
    return {
        **{name: getattr(keys, name) for name in LIVE_QUEUES},
        "assumed": keys.ledger_assumed,
        "dead-lettered": keys.dead,
    }


def queue_status(client: redis.Redis, keys: Keys, head: int = 5) -> dict[str, Any]:
    """Counts of every place a pending pod can be, and the first ``head`` pods of each
    (activeQ in pop order, backoffQ by expiry, the others by their score)."""
    place_keys = _place_keys(keys)
    pipe = client.pipeline(transaction=False)
    for key in place_keys.values():
        pipe.zcard(key)
    for key in place_keys.values():
        if head > 0:
            pipe.zrange(key, 0, head - 1)
    results = pipe.execute()
    sizes, heads_raw = results[: len(place_keys)], results[len(place_keys) :]
    counts = {place: int(n) for place, n in zip(place_keys, sizes, strict=True)}
    if head <= 0:
        heads_raw = [[] for _ in place_keys]
    heads = {
        # activeQ members are "<ts>|ns/name"; every other set holds ns/name.
        place: [
            key_of_active_member(as_text(m)) if place == "active" else as_text(m) for m in members
        ]
        for place, members in zip(place_keys, heads_raw, strict=True)
    }
    return {"counts": counts, "heads": heads}


def pod_explanation(client: redis.Redis, keys: Keys, pod_key: str) -> dict[str, Any] | None:
    """What is known about a pod's scheduling, or None if the store has no such pod.

    Keys: ``pod``, ``state`` (``bound``, a sub-queue name, ``assumed``, ``binding`` or
    ``unknown``), ``node`` (when bound), ``attempts``, ``priority``, ``plugins`` (those
    that rejected it last), ``message`` (kube's "0/N nodes are available: ..." of the last
    failed attempt, from the worker's ``Keys.explain`` record) and ``at_ms``.
    """
    pipe = client.pipeline(transaction=False)
    pipe.hget(keys.store_meta("Pod"), pod_key)
    pipe.hget(keys.info, pod_key)
    pipe.sismember(keys.gang_held, pod_key)
    pipe.hget(keys.gang_of, pod_key)
    meta_raw, info_raw, held, group = pipe.execute()
    if meta_raw is None:
        return None
    meta = parse_meta(meta_raw)
    info = decode_info(pod_key, info_raw) if info_raw is not None else {}
    diagnosis = read_explanation(client, keys, pod_key)
    if meta.node:
        state = "bound"
    elif info:
        # "" means the cache took it over: reserved and handed to the binder.
        state = info.get("w") or "binding"
    else:
        state = "unknown"  # not queued (yet): no worker has handled its event
    plugins = diagnosis.plugins if diagnosis is not None else None
    if plugins is None:
        plugins = tuple(p for p in str(info.get("pl", "")).split(",") if p)
    explanation: dict[str, Any] = {
        "pod": pod_key,
        "state": state,
        "node": meta.node or None,
        "attempts": int(info.get("a", 0)),
        "priority": int(info.get("p", 0)),
        "plugins": list(plugins),
        "message": diagnosis.message if diagnosis is not None and state != "bound" else "",
        "at_ms": diagnosis.at_ms if diagnosis is not None else None,
    }
    if held and group is not None and state == "gated":
        explanation["message"] = _gang_wait(client, keys, as_text(group))
    return explanation


def _gang_wait(client: redis.Redis, keys: Keys, group: str) -> str:
    """Why a gang member is held (the queue's GangScheduling PreEnqueue)."""
    pipe = client.pipeline(transaction=False)
    pipe.hget(keys.gang_members, group)
    pipe.hget(keys.gang_min, group)
    members, minimum = pipe.execute()
    if minimum is None:
        return f"gang {group}: waiting for PodGroup {group} to exist"
    have = len(as_text(members).split(",")) if members else 0
    return f"gang {group}: waiting for members: {have} of minimum {int(minimum)} exist"


def format_explanation(explanation: dict[str, Any]) -> str:
    pod, state = explanation["pod"], explanation["state"]
    if state == "bound":
        return f"pod {pod} is bound to node {explanation['node']}"
    lines = [
        f"pod {pod}: {state}, {explanation['attempts']} attempt(s), "
        f"priority {explanation['priority']}"
    ]
    if explanation["message"]:
        lines.append(explanation["message"])
    elif state == "unknown":
        lines.append("no worker has queued it yet (is a worker running for this scheduler?)")
    else:
        lines.append("no failed scheduling attempt recorded")
    if explanation["plugins"]:
        lines.append("rejected by plugins: " + ", ".join(explanation["plugins"]))
    return "\n".join(lines)


def explain_pod(client: redis.Redis, keys: Keys, pod_key: str) -> str | None:
    """:func:`pod_explanation` as text, or None if there is no such pod."""
    explanation = pod_explanation(client, keys, pod_key)
    return None if explanation is None else format_explanation(explanation)


def ledger_nodes(client: redis.Redis, keys: Keys, names: list[str]) -> dict[str, dict[str, Any]]:
    """The ledger's allocatable and requested amounts of the named nodes (canonical units:
    cpu millicores, bytes, pod counts), read in one MULTI without scripts (the operator's
    ACL user may run it): ``{"allocatable": {...}, "requested": {...}}`` per node the ledger
    holds as live; a node it does not hold (no worker has seen it yet) is left out.
    Requested is what assumed and bound pods hold: what the scheduler places against."""
    if not names:
        return {}
    pipe = client.pipeline(transaction=True)
    for name in names:
        pipe.hgetall(keys.ledger_node(name))
    pipe.hmget(keys.ledger_usage, names)
    *hashes, usages = pipe.execute()
    out: dict[str, dict[str, Any]] = {}
    for name, raw, usage in zip(names, hashes, usages, strict=True):
        fields = {as_text(k): as_text(v) for k, v in raw.items()}
        if not fields or fields.get("live") == "0":
            continue
        allocatable: dict[str, int] = {}
        for field_name, value in fields.items():
            kind, _, resource = field_name.partition(":")
            if kind == "alloc" and resource and not resource.startswith("+"):
                allocatable[resource] = int(float(value))
        requested = NodeUsage.parse(name, as_text(usage) if usage else "").requested
        out[name] = {"allocatable": allocatable, "requested": dict(requested)}
    return out
