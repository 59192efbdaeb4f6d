"""The explain record: why a pod's last scheduling (or binding) attempt failed.

One JSON value per pod in the ``q:explain`` hash (``Keys.explain``), written when an
attempt fails and read by ``distsched queue``/``distsched explain``, the metrics collector
(``unschedulable_pods{plugin,profile}``) and ``distsched replay``. This module is the one
place that knows its fields; writers and readers go through :func:`record_failure` and
:func:`read_explanations`.

======== ============== ===========================================================
field    type           holds
======== ============== ===========================================================
message  str            kube's "0/N nodes are available: ..." or the binding error
plugins  [str]          plugins that rejected the pod (empty for a binding failure)
profile  str            the pod's profile (schedulerName); "" if the writer had none
at_ms    int            when the attempt failed (the writer's clock, ms)
queue    str            the sub-queue the pod went back to
======== ============== ===========================================================
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis

from distsched.keys import Keys
from distsched.redis_text import as_text
from distsched.scan import hash_pages


@dataclass(frozen=True, slots=True)
class Explanation:
    message: str
    plugins: tuple[str, ...] | None = None  # None: an older record that did not say
    profile: str = ""
    at_ms: int | None = None
    queue: str = ""

    def to_json(self) -> str:
        return json.dumps(
            {
                "message": self.message,
                "plugins": list(self.plugins or ()),
                "profile": self.profile,
                "at_ms": self.at_ms,
                "queue": self.queue,
            }
        )

    @classmethod
    def from_json(cls, raw: str | bytes) -> Explanation:
        data: dict[str, Any] = json.loads(raw)
        plugins = data.get("plugins")
        return cls(
            message=str(data.get("message", "")),
            plugins=None if plugins is None else tuple(plugins),
            profile=str(data.get("profile", "")),
            at_ms=data.get("at_ms"),
            queue=str(data.get("queue", "")),
        )


def record_failure(
    client: redis.Redis | redis.client.Pipeline, keys: Keys, pod_key: str, explanation: Explanation
) -> None:
    """Record ``explanation`` as the pod's last failed attempt (replacing the previous one)."""
    client.hset(keys.explain, pod_key, explanation.to_json())


def read_explanations(
    client: redis.Redis, keys: Keys, pod_keys: Sequence[str]
) -> list[Explanation | None]:
    """The explain record of each pod, in order; None for a pod that has none."""
    if not pod_keys:
        return []
    return decode_explanations(client.hmget(keys.explain, list(pod_keys)))


def queue_read_explanations(
    pipe: redis.client.Pipeline, keys: Keys, pod_keys: Sequence[str]
) -> None:
    """:func:`read_explanations` as one command of the caller's pipeline (``pod_keys`` not
    empty); pass its reply to :func:`decode_explanations`."""
    pipe.hmget(keys.explain, list(pod_keys))


def decode_explanations(raws: Sequence[str | bytes | None]) -> list[Explanation | None]:
    return [None if raw is None else Explanation.from_json(raw) for raw in raws]


def read_explanation(client: redis.Redis, keys: Keys, pod_key: str) -> Explanation | None:
    [found] = read_explanations(client, keys, [pod_key])
    return found


def forget_explanations(
    client: redis.Redis | redis.client.Pipeline, keys: Keys, pod_keys: Sequence[str]
) -> None:
    """Drop the records of pods that no longer have a failure to explain (bound pods)."""
    if pod_keys:
        client.hdel(keys.explain, *pod_keys)


def forget_explanations_of_deleted_pods(client: redis.Redis, keys: Keys) -> list[str]:
    """Drop the records of pods the store no longer has (the store's delete drops a pod's
    record with it; one written by an attempt that ended after the delete stays behind).
    Returns the keys dropped. A record the sweep reads while its pod is being created again
    may go too: it is only the explanation of an earlier attempt."""
    dropped: list[str] = []
    for page in hash_pages(client, keys.explain):
        pods = list(page)
        metas = client.hmget(keys.store_meta("Pod"), pods)
        gone = [key for key, meta in zip(pods, metas, strict=True) if meta is None]
        if gone:
            client.hdel(keys.explain, *gone)
            dropped += [as_text(key) for key in gone]
    return dropped
