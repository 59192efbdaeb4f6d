"""Acknowledged means replicated: WAIT for replicas before a write is reported as done.

With a Sentinel deployment a write reaches the primary first and its replicas a moment
later (Redis replication is asynchronous). The writes a caller treats as done (apply,
create, update and delete of objects, a bind, a pop whose lease epoch a worker acts on, a
reservation whose token a binder relies on) are followed by :func:`acknowledge`: it
returns once ``policy.replicas`` replicas hold them, and raises :class:`NotReplicated`
(the write is on the primary but may be lost in a failover) when they do not within
``policy.timeout_ms``. The caller then reports failure, never success.

How one WAIT covers writes made on any connection: WAIT counts the replicas that have the
*calling connection's* last write, and a connection pool gives no guarantee that the
script and a later WAIT share a connection. So :func:`acknowledge` sends a marker write
(``INCR <tag>:ack``) and WAIT together on one connection (one pipeline, one round trip).
The primary's replication stream is a single ordered log: a replica that has the marker
has every write that completed before it was sent, on every connection of this process.
That also makes batching free: one acknowledgement after a batch of scripts (inside
:func:`batch`, or at the end of a Store call that ran several) covers all of them.

The policy is a property of the connection (set by :func:`distsched.connection.connect`
from ``--min-replicas-ack``), kept here per connection pool so that every Store, Ledger,
queue and binder built on a client follows it without new parameters. ``replicas == 0``
(the default without Sentinel) makes every call here a no-op.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import redis

from distsched import metrics


@dataclass(frozen=True, slots=True)
class AckPolicy:
    """Replicas that must hold a write before it counts as acknowledged (0: do not wait)."""

    replicas: int = 0
    timeout_ms: int = 1000


NO_ACK = AckPolicy()


class NotReplicated(redis.TimeoutError):
    """The write reached the primary but not enough replicas acknowledged it in time.

    A TimeoutError so that the roles' retry loops treat it like an outage (back off, say
    so, go on) and the CLI reports it as a runtime failure (exit 1). The write itself may
    still survive (or not): whatever depends on it was not done."""

    def __init__(self, what: str, acked: int, wanted: int, timeout_ms: int) -> None:
        self.what, self.acked, self.wanted, self.timeout_ms = what, acked, wanted, timeout_ms
        super().__init__(
            f"{what}: written on the primary but acknowledged by {acked} of {wanted} "
            f"replica(s) within {timeout_ms} ms; it may be lost in a failover"
        )


_policies: weakref.WeakKeyDictionary[Any, AckPolicy] = weakref.WeakKeyDictionary()
_local = threading.local()


def set_policy(client: redis.Redis, policy: AckPolicy) -> None:
    """Attach ``policy`` to the client's connection pool (and every client sharing it)."""
    _policies[client.connection_pool] = policy


def policy_of(client: redis.Redis) -> AckPolicy:
    pool = getattr(client, "connection_pool", None)
    if pool is None:
        return NO_ACK
    return _policies.get(pool, NO_ACK)


def _deferred() -> dict[int, list[str]]:
    state: dict[int, list[str]] | None = getattr(_local, "deferred", None)
    if state is None:
        state = _local.deferred = {}
    return state


def acknowledge(client: redis.Redis, marker_key: str, what: str) -> None:
    """Return once the policy's replicas hold every write this process completed on
    ``client``'s server so far; :class:`NotReplicated` if they do not in time. Inside
    :func:`batch` for the same pool (same thread), only notes that a wait is due."""
    policy = policy_of(client)
    if policy.replicas <= 0:
        return
    pending = _deferred().get(id(client.connection_pool))
    if pending is not None:
        pending.append(what)
        return
    _wait(client, marker_key, policy, what)


def _wait(client: redis.Redis, marker_key: str, policy: AckPolicy, what: str) -> None:
    pipe = client.pipeline(transaction=False)
    pipe.incr(marker_key)
    pipe.execute_command("WAIT", policy.replicas, policy.timeout_ms)
    try:
        _, acked = pipe.execute()
    except redis.ResponseError as exc:
        # NOREPLICAS: the primary's min-replicas-to-write refused even the marker.
        if "NOREPLICAS" in str(exc):
            metrics.replica_ack_failures.inc()
            raise NotReplicated(what, 0, policy.replicas, policy.timeout_ms) from exc
        raise
    if int(acked) < policy.replicas:
        metrics.replica_ack_failures.inc()
        raise NotReplicated(what, int(acked), policy.replicas, policy.timeout_ms)


@contextmanager
def batch(client: redis.Redis, marker_key: str, what: str | None = None) -> Iterator[None]:
    """One acknowledgement for every :func:`acknowledge` inside the block (on the same
    pool and thread), made when the outermost block exits without an exception. ``what``
    names the batch in a :class:`NotReplicated` (default: the first write and a count)."""
    if policy_of(client).replicas <= 0:
        yield
        return
    state = _deferred()
    pool_id = id(client.connection_pool)
    if pool_id in state:  # nested: the outer block waits
        yield
        return
    whats: list[str] = []
    state[pool_id] = whats
    try:
        yield
    finally:
        del state[pool_id]
    if whats:
        if what is None:
            what = whats[0] if len(whats) == 1 else f"{whats[0]} (+{len(whats) - 1} more)"
        _wait(client, marker_key, policy_of(client), what)


class _HasClientAndKeys(Protocol):
    _client: redis.Redis

    @property
    def keys(self) -> Any: ...


F = TypeVar("F", bound=Callable[..., Any])


def acknowledged(what: str) -> Callable[[F], F]:
    """Decorator for a write method of an object with ``_client`` and ``keys``: the
    method's writes are acknowledged (once) before it returns."""

    def decorate(method: F) -> F:
        @functools.wraps(method)
        def wrapper(self: _HasClientAndKeys, *args: Any, **kwargs: Any) -> Any:
            client, marker = self._client, self.keys.ack
            with batch(client, marker, what):
                result = method(self, *args, **kwargs)
                acknowledge(client, marker, what)
            return result

        return wrapper  # type: ignore[return-value]

    return decorate
