"""Locks that let one worker at a time decide pods constrained over a multi-node topology
key (a zone).

Two workers deciding pods of one spread or affinity group at once both decide on the
domain counts they saw, and the ledger refuses whichever reserves second (the domain's
generation moved): with maxSkew 1 nearly every batch of the second worker. kube-scheduler
decides every pod one after another; here only the batches that depend on the same
multi-node key wait for each other, from the view's refresh to the reservation, while
other pods are scheduled in parallel. The lock is a performance device only: safety
comes from the ledger's generation checks, so an expired lock (a stalled holder) costs a
conflict, never a violation.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import redis

from distsched.keys import Keys
from distsched.lua import ScriptSet

LOCK_TTL_MS = 5_000
WAIT_SLICE_S = 0.05
"""Longest single wait on a lock's wake list before trying again."""


class TopologyLocks:
    def __init__(self, client: redis.Redis, keys: Keys, *, ttl_ms: int = LOCK_TTL_MS) -> None:
        self._client = client
        self._keys = keys
        self._ttl_ms = ttl_ms
        self._token = uuid.uuid4().hex
        self._release = ScriptSet(client).get("lock_release")
        self.waited_s = 0.0

    def _names(self, key: str) -> tuple[str, str]:
        lock = self._keys.lock(f"topology:{key}")
        return lock, lock + ":wake"

    @contextmanager
    def hold(self, topology_keys: Iterable[str]) -> Iterator[None]:
        """Hold the locks of ``topology_keys`` (taken in sorted order: no deadlock)."""
        held: list[str] = []
        try:
            for key in sorted(set(topology_keys)):
                self._acquire(key)
                held.append(key)
            yield
        finally:
            for key in reversed(held):
                lock, wake = self._names(key)
                self._release(keys=[lock, wake], args=[self._token])

    def _acquire(self, key: str) -> None:
        lock, wake = self._names(key)
        started = time.monotonic()
        while not self._client.set(lock, self._token, nx=True, px=self._ttl_ms):
            self._client.blpop([wake], timeout=WAIT_SLICE_S)
        self.waited_s += time.monotonic() - started
