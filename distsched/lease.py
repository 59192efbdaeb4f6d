"""Leader leases in Redis: one holder among a role's instances (the controller, the API
bridge), as kube's controllers elect a leader with a coordination Lease.

A lease is a key (``T:lock:<name>``) holding its holder's identity with a TTL; the holder
renews it every turn (``controller_lease.lua``: take it if free or expired, renew it if
ours). A holder that stalls loses it after ``lease_ms`` without anyone having to notice;
writers that must not act on a lost lease check it in the same transaction as their
writes (:class:`distsched.store.mirror.Fence`).
"""

from __future__ import annotations

import os
import secrets
import socket

import redis

from distsched.keys import Keys
from distsched.lua import ScriptSet
from distsched.redis_text import as_text

DEFAULT_LEASE_MS = 15_000


class Lease:
    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        name: str,
        *,
        lease_ms: int = DEFAULT_LEASE_MS,
        identity: str | None = None,
    ) -> None:
        self._client = client
        self.key = keys.lock(name)
        self._lease_ms = lease_ms
        self.identity = identity or f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"
        self._scripts = ScriptSet(client)

    def hold(self) -> bool:
        """Take the lease if free, renew it if ours; whether we hold it now."""
        reply = self._scripts.get("controller_lease")(
            keys=[self.key], args=[self.identity, self._lease_ms]
        )
        return bool(reply)

    def release(self) -> None:
        holder = self._client.get(self.key)
        if holder is not None and as_text(holder) == self.identity:
            self._client.delete(self.key)
