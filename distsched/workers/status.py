"""Read-only views for operators: `distsched queue` and `distsched explain`."""

from __future__ import annotations

import json
from typing import Any

import redis

from distsched.keys import Keys

SUB_QUEUES = ("active", "backoff", "unschedulable", "gated", "inflight")


def _decode(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _pod_of_member(queue: str, member: str) -> str:
    # activeQ members are "<ts>|ns/name"; every other sub-queue holds ns/name.
    return member.split("|", 1)[1] if queue == "active" and "|" in member else member


def queue_status(client: redis.Redis, keys: Keys, head: int = 5) -> dict[str, Any]:
    """Counts of every place a pod can be, and the first pods of each sub-queue."""
    names = (*SUB_QUEUES, "dead")
    pipe = client.pipeline(transaction=False)
    for name in names:
        pipe.zcard(getattr(keys, name))
    pipe.zcard(keys.cache("assumed"))
    for name in names:
        pipe.zrange(getattr(keys, name), 0, head - 1)
    results = pipe.execute()
    counts = dict(zip(names, results[: len(names)], strict=True))
    counts["assumed"] = results[len(names)]
    counts["dead-lettered"] = counts.pop("dead")
    heads_raw = results[len(names) + 1 :]
    heads = {
        ("dead-lettered" if name == "dead" else name): [
            _pod_of_member(name, _decode(m)) for m in members
        ]
        for name, members in zip(names, heads_raw, strict=True)
    }
    ordered = {k: counts[k] for k in (*SUB_QUEUES, "assumed", "dead-lettered")}
    return {"counts": ordered, "heads": heads}


def explain_pod(client: redis.Redis, keys: Keys, pod_key: str) -> str | None:
    """A sentence on the pod's state; for a pending pod, the last attempt's diagnosis."""
    info_raw = client.hget(keys.info, pod_key)
    diagnosis_raw = client.hget(keys.explain, pod_key)
    if info_raw is None and diagnosis_raw is None:
        return None
    lines: list[str] = []
    if info_raw is not None:
        info = json.loads(info_raw)
        where = info.get("w") or "handed to the binder"
        lines.append(
            f"pod {pod_key}: {where}, attempts {info.get('a', 0)}, priority {info.get('p', 0)}"
        )
        if info.get("pl"):
            lines.append(f"unschedulable plugins: {info['pl'].replace(',', ', ')}")
    if diagnosis_raw is not None:
        diagnosis = json.loads(diagnosis_raw)
        lines.append(diagnosis["message"])
    return "\n".join(lines)
