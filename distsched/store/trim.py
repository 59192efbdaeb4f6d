"""Trimming the event streams by what their readers have read, so that Redis memory follows
the live cluster, not the run's length.

Two streams grow with every write:

- ``store:events``, which every informer tails with XREAD (no consumer group, so Redis
  cannot tell how far each has read). Each informer reports its position, at most every
  :data:`REPORT_INTERVAL_MS`, in ``store:readers`` (reader -> ``<rv>|<ms>``). The trim
  keeps every entry a live reader (one that reported within :data:`READER_TTL_MS`) has
  not read yet, and the last :data:`KEEP_EVENTS` entries for operators' XRANGE. A reader
  that stalled longer (SIGSTOP, a long GC, a network partition) loses its hold: when it
  comes back it finds the gap and relists, exactly as after any trim.
- ``q:events``, which the workers' queue handlers read through a consumer group: Redis
  knows the group's last delivered entry and its pending (unacknowledged) entries, so the
  trim keeps the pending ones and everything not yet delivered.

Both trims use ``XTRIM MINID ~`` (Redis >= 6.2; ``approximate=False`` for exact): whole
macro nodes go, so up to ~100 entries more than the minimum stay. The write scripts keep
their cap (one ``XTRIM MINID ~`` per call, after their appends: the events of about the
last ``max_events`` rvs, however many entries hold them) as the bound when some reader
holds the stream back.
"""

from __future__ import annotations

from typing import Any, cast

import redis

from distsched.keys import Keys
from distsched.redis_text import as_text

REPORT_INTERVAL_MS = 5_000
"""How often an informer writes its position (it also does on every relist)."""
READER_TTL_MS = 60_000
"""A reader that has not reported for this long no longer holds the stream back."""
KEEP_EVENTS = 1_000
"""Entries kept behind the slowest live reader's position, for operators' XRANGE."""


def report_position(
    client: redis.Redis | redis.client.Pipeline, keys: Keys, reader: str, rv: int, now_ms: int
) -> None:
    """``reader`` has read the store's events up to ``rv`` (inclusive)."""
    client.hset(keys.stream_readers, reader, f"{rv}|{now_ms}")


def forget_reader(client: redis.Redis, keys: Keys, reader: str) -> None:
    """``reader`` stops reading (it no longer holds the stream back)."""
    client.hdel(keys.stream_readers, reader)


def readers(client: redis.Redis, keys: Keys) -> dict[str, tuple[int, int]]:
    """reader -> (rv read up to, ms of its last report); unreadable entries are skipped."""
    out: dict[str, tuple[int, int]] = {}
    for name, value in client.hgetall(keys.stream_readers).items():
        rv, _, at = as_text(value).partition("|")
        if rv.isdigit() and at.isdigit():
            out[as_text(name)] = (int(rv), int(at))
    return out


def trim_store_events(
    client: redis.Redis,
    keys: Keys,
    *,
    now_ms: int,
    keep: int = KEEP_EVENTS,
    reader_ttl_ms: int = READER_TTL_MS,
    approximate: bool = True,
) -> int:
    """Trim ``store:events`` below what every live reader has read, keeping ``keep`` more;
    readers silent for ``reader_ttl_ms`` are dropped first. Returns the entries trimmed."""
    live: list[int] = []
    stale: list[str] = []
    for name, (rv, at) in readers(client, keys).items():
        if now_ms - at > reader_ttl_ms:
            stale.append(name)
        else:
            live.append(rv)
    if stale:
        client.hdel(keys.stream_readers, *stale)
    head = int(client.get(keys.resource_version) or 0)
    first_kept = head - keep + 1
    if live:
        first_kept = min(first_kept, min(live) + 1)
    if first_kept <= 1:
        return 0
    return int(client.xtrim(keys.events, minid=f"{first_kept}-0", approximate=approximate))


def trim_queue_events(
    client: redis.Redis, keys: Keys, group: str, *, approximate: bool = True
) -> int:
    """Trim ``q:events`` below the consumer group's oldest pending entry, or below what it
    has delivered when nothing is pending. No group yet: nothing is trimmed (the write
    scripts' cap still holds). Returns the entries trimmed."""
    try:
        groups = cast(list[dict[str, Any]], client.xinfo_groups(keys.queue_events))
    except redis.ResponseError:  # no such stream yet
        return 0
    info = next((g for g in groups if as_text(g["name"]) == group), None)
    if info is None:
        return 0
    pending = cast(dict[str, Any], client.xpending(keys.queue_events, group))
    if pending["pending"]:
        first_kept = as_text(pending["min"])
    else:
        last = as_text(info["last-delivered-id"])
        ms, _, seq = last.partition("-")
        first_kept = f"{ms}-{int(seq or 0) + 1}"
    if first_kept in ("0-0", "0-1"):
        return 0
    return int(client.xtrim(keys.queue_events, minid=first_kept, approximate=approximate))
