"""Permit's Wait across processes: kube's WaitingPod on a Redis list per pod.

A Permit plugin that returns Wait leaves the pod reserved; the scheduling worker hands it
to the binder with the waiting plugins' names and each one's deadline (its own timeout).
Whoever decides for a plugin (the plugin itself in another process, or a controller, as
coscheduling does) calls :func:`allow` or :func:`reject`; the binder's
:func:`wait_on_permit` returns Success once every waiting plugin allowed, and an
Unschedulable status on the first rejection or at a waiting plugin's deadline (kube's message:
"rejected due to timeout after waiting ... at plugin ...").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import redis

from distsched.clock import Clock
from distsched.framework.status import Code, Status
from distsched.keys import Keys
from distsched.redis_text import as_text

VERDICT_TTL_S = 3600
LOST_RESERVATION = "pod deleted, or its reservation expired, while waiting on permit"


def allow(client: redis.Redis, keys: Keys, pod_key: str, plugin: str) -> None:
    """``plugin`` lets the waiting pod go on (kube's WaitingPod.Allow)."""
    pipe = client.pipeline(transaction=False)
    pipe.rpush(keys.permit(pod_key), f"allow:{plugin}")
    pipe.expire(keys.permit(pod_key), VERDICT_TTL_S)
    pipe.execute()


def reject(client: redis.Redis, keys: Keys, pod_key: str, plugin: str, message: str) -> None:
    """``plugin`` rejects the waiting pod (kube's WaitingPod.Reject)."""
    pipe = client.pipeline(transaction=False)
    pipe.rpush(keys.permit(pod_key), f"reject:{plugin}:{message}")
    pipe.expire(keys.permit(pod_key), VERDICT_TTL_S)
    pipe.execute()


def wait_on_permit(
    client: redis.Redis,
    keys: Keys,
    waiting: Mapping[str, tuple[Sequence[str], int | Mapping[str, int]]],
    clock: Clock,
    *,
    keep_alive: Callable[[Sequence[str]], Iterable[str]] | None = None,
    poll_s: float = 1.0,
) -> dict[str, Status]:
    """Wait for the verdicts of several waiting pods at once: pod key -> (plugins, deadline
    ms, one for all plugins or one per plugin). Each plugin's own deadline rejects the pod
    when that plugin has not allowed it by then (kube: a timer per plugin). Returns pod
    key -> Success or an Unschedulable status. ``keep_alive`` is called with the
    still-waiting pods about every ``poll_s`` (the binder renews their reservations so the
    reaper leaves them alone) and returns those whose reservation is gone: they are
    rejected at once (kube's RejectWaitingPod when a waiting pod is deleted)."""
    deadlines: dict[str, dict[str, int]] = {}
    for key, (plugins, deadline) in waiting.items():
        if plugins:
            if isinstance(deadline, int):
                deadlines[key] = dict.fromkeys(plugins, deadline)
            else:
                deadlines[key] = {p: int(deadline[p]) for p in plugins}
    pending = {key: set(d) for key, d in deadlines.items()}
    results = {key: Status.success() for key in waiting if key not in pending}
    list_to_pod = {keys.permit(key): key for key in pending}
    while pending:
        now = clock.now_ms()
        for key in list(pending):
            late = sorted(p for p in pending[key] if deadlines[key][p] <= now)
            if late:
                del pending[key]
                results[key] = Status(
                    Code.UNSCHEDULABLE,
                    f"rejected due to timeout after waiting at plugin {late[0]}",
                    plugin=late[0],
                )
        if not pending:
            break
        if keep_alive is not None:
            for key in keep_alive(list(pending)):
                if pending.pop(key, None) is not None:
                    results[key] = Status(Code.UNSCHEDULABLE, LOST_RESERVATION)
            if not pending:
                break
        soonest = min(deadlines[k][p] for k in pending for p in pending[k]) - now
        reply = client.blpop(
            [keys.permit(k) for k in pending], timeout=max(0.01, min(poll_s, soonest / 1000))
        )
        if reply is None:
            continue
        list_key, raw = reply
        pod_key = list_to_pod[as_text(list_key)]
        verdict = as_text(raw)
        kind, _, rest = verdict.partition(":")
        plugin, _, message = rest.partition(":")
        if pod_key not in pending:
            continue
        if kind == "allow":
            pending[pod_key].discard(plugin)
            if not pending[pod_key]:
                del pending[pod_key]
                results[pod_key] = Status.success()
        elif kind == "reject":
            del pending[pod_key]
            results[pod_key] = Status(Code.UNSCHEDULABLE, message or "rejected", plugin=plugin)
    if waiting:
        client.delete(*(keys.permit(k) for k in waiting))
    return results
