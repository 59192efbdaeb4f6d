"""What the store holds, read as a test checks it."""

from __future__ import annotations

from typing import cast

import redis

from distsched.keys import DEFAULT_SCHEDULER, Keys
from distsched.redis_text import as_text
from distsched.store import parse_meta


def bound_nodes(client: redis.Redis, keys: Keys | None = None) -> dict[str, str]:
    """ns/name -> node of every bound pod, from the store's meta hash (one HGETALL);
    ``keys`` default to the default deployment's (a ProcessGroup's)."""
    keys = keys or Keys(DEFAULT_SCHEDULER)
    meta = cast(dict[bytes, bytes], client.hgetall(keys.store_meta("Pod")))
    return {as_text(k): node for k, raw in meta.items() if (node := parse_meta(raw).node)}
