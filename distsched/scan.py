"""Reading a large hash a page at a time (HSCAN), for sweeps that must not block Redis
with one HGETALL over every pod; deleting every key of a pattern in pages."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import redis


def hash_pages(client: redis.Redis, key: str, count: int = 500) -> Iterator[dict[Any, Any]]:
    """The hash's fields and values, one HSCAN page at a time. A field changed meanwhile
    may come twice or be missed: callers re-check what they act on in their scripts."""
    cursor = 0
    while True:
        cursor, page = client.hscan(key, cursor, count=count)
        if page:
            yield cast(dict[Any, Any], page)
        if cursor == 0:
            return


def delete_matching(client: redis.Redis, pattern: str, page: int = 500) -> None:
    """Delete every key matching ``pattern`` (a throwaway deployment's, ``Keys.pattern``):
    listed with SCAN first, then deleted ``page`` keys per command."""
    found = list(client.scan_iter(match=pattern, count=1000))
    for start in range(0, len(found), page):
        client.delete(*found[start : start + page])
