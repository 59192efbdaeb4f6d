"""Waiting for what other processes or threads do: poll, never sleep a fixed time."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TypeVar

import redis

from distsched.keys import Keys
from tests.support.readers import bound_nodes

T = TypeVar("T")


def wait_for(
    what: str,
    probe: Callable[[], T | None],
    timeout_s: float,
    *,
    every: float = 0.05,
    retry: tuple[type[Exception], ...] = (),
    context: Callable[[], str] | None = None,
) -> T:
    """Poll ``probe`` until it returns something truthy, and return that. An exception of
    a ``retry`` type counts as "not yet". After ``timeout_s`` the test fails naming
    ``what``, the last value and ``context()`` (a log's tail, say)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = probe()
        except retry:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            where = f"\n{context()}" if context is not None else ""
            raise AssertionError(
                f"timed out after {timeout_s}s waiting for {what} (last: {value!r}){where}"
            )
        time.sleep(every)


def seconds_until(
    what: str,
    probe: Callable[[], object],
    timeout_s: float,
    *,
    every: float = 0.05,
    retry: tuple[type[Exception], ...] = (),
) -> float:
    """:func:`wait_for`, returning how long it took."""
    start = time.monotonic()
    wait_for(what, probe, timeout_s, every=every, retry=retry)
    return time.monotonic() - start


def wait_all_bound(
    client: redis.Redis,
    pods: Iterable[str],
    timeout_s: float = 20.0,
    *,
    keys: Keys | None = None,
    retry: tuple[type[Exception], ...] = (),
) -> dict[str, float]:
    """Poll every 20 ms until every pod is bound; returns when (time.monotonic) each was
    first seen bound."""
    pending = set(pods)
    seen: dict[str, float] = {}

    def probe() -> bool:
        now = time.monotonic()
        for key in pending & set(bound_nodes(client, keys)):
            seen[key] = now
        pending.difference_update(seen)
        return not pending

    try:
        wait_for(f"{len(pending)} pods to be bound", probe, timeout_s, every=0.02, retry=retry)
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {len(pending)} unbound, e.g. {sorted(pending)[:5]}") from None
    return seen
