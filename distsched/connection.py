"""Redis connections for every role: URL, ACL credentials, TLS, Sentinel, waiting out outages.

A URL may carry an ACL user and password (``redis://user:pass@host:6379/0``) and TLS
(``rediss://``). Certificate options come from the CLI or the environment
(``DISTSCHED_REDIS_CA``, ``DISTSCHED_REDIS_CERT``, ``DISTSCHED_REDIS_KEY``).

Sentinel: ``redis+sentinel://[user:password@]host1:port1,host2:port2/<service>/<db>``
(``rediss+sentinel://`` for TLS to the Sentinels and the data nodes, with the same
certificate options). The client asks the Sentinels for the service's primary whenever it
opens a connection (redis-py's :class:`~redis.sentinel.SentinelConnectionPool`), so every
process follows a failover without a restart: commands fail while the primary is down,
the roles' retry loops wait that out, and the next connection goes to the promoted
replica. A connection still open to a demoted primary gets READONLY, which redis-py turns
into a connection error (and a reconnect through the Sentinels). The URL's user and
password are the data nodes'; Sentinels that need their own take ``?sentinel_username=``
and ``?sentinel_password=``. A host without a port means 26379, a missing db 0.

Which server: every connection a :func:`connect` client opens asks the server's run_id
(``INFO server``); :func:`server_changes` counts how often a new connection reached
another server than the one before (a failover, a restart). What was read from the old
one may be missing on the new one (a promoted replica has only what had replicated), so
a reader that keeps what it read, the informer, reads it all again after a change.

Acknowledged writes: :mod:`distsched.replication` waits for replicas after every write a
caller reports as done. Its policy comes from :attr:`RedisOptions.min_replicas_ack`
(``--min-replicas-ack`` / ``DISTSCHED_MIN_REPLICAS_ACK``): default 1 with a Sentinel URL,
0 (no waiting) otherwise; :func:`connect` attaches it to the client.
"""

from __future__ import annotations

import logging
import os
import random
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import parse_qs, unquote

import hiredis
import redis
from redis.connection import Encoder, HiredisRespSerializer, PythonRespSerializer
from redis.sentinel import Sentinel

from distsched import metrics, replication

log = logging.getLogger(__name__)

T = TypeVar("T")

URL_ENV = "DISTSCHED_REDIS_URL"
ACK_ENV = "DISTSCHED_MIN_REPLICAS_ACK"
SENTINEL_SCHEMES = ("redis+sentinel", "rediss+sentinel")
DEFAULT_SENTINEL_PORT = 26379
DEFAULT_ACK_TIMEOUT_MS = 1000


@dataclass(frozen=True, slots=True)
class RedisOptions:
    url: str
    ca_cert: str | None = None
    cert: str | None = None
    key: str | None = None
    # Replicas that must hold a write before it is acknowledged; None: 1 for a Sentinel
    # URL, 0 otherwise (see distsched.replication).
    min_replicas_ack: int | None = None
    ack_timeout_ms: int = DEFAULT_ACK_TIMEOUT_MS

    @classmethod
    def from_env(
        cls, url: str | None = None, *, min_replicas_ack: int | None = None, **tls: str | None
    ) -> RedisOptions:
        if min_replicas_ack is None and os.environ.get(ACK_ENV, "").strip():
            min_replicas_ack = int(os.environ[ACK_ENV])
        return cls(
            url=url or os.environ.get(URL_ENV, ""),
            ca_cert=tls.get("ca_cert") or os.environ.get("DISTSCHED_REDIS_CA"),
            cert=tls.get("cert") or os.environ.get("DISTSCHED_REDIS_CERT"),
            key=tls.get("key") or os.environ.get("DISTSCHED_REDIS_KEY"),
            min_replicas_ack=min_replicas_ack,
        )

    @property
    def ack_policy(self) -> replication.AckPolicy:
        replicas = self.min_replicas_ack
        if replicas is None:
            replicas = 1 if is_sentinel_url(self.url) else 0
        if replicas < 0:
            raise ValueError(f"min_replicas_ack must be >= 0, got {replicas}")
        return replication.AckPolicy(replicas=replicas, timeout_ms=self.ack_timeout_ms)


@dataclass(frozen=True, slots=True)
class SentinelTarget:
    """What a ``redis+sentinel://`` URL names."""

    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    tls: bool = False
    sentinel_username: str | None = None
    sentinel_password: str | None = None


def is_sentinel_url(url: str) -> bool:
    return url.split("://", 1)[0].lower() in SENTINEL_SCHEMES


def _host_port(item: str, url: str) -> tuple[str, int]:
    if item.startswith("["):  # [ipv6]:port
        host, _, rest = item[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
        if rest and not rest.startswith(":"):
            raise ValueError(f"bad Sentinel address {item!r} in {redact_url(url)}")
    else:
        host, _, port_text = item.rpartition(":") if ":" in item else (item, "", "")
    if not host:
        raise ValueError(f"empty Sentinel host in {redact_url(url)}")
    if not port_text:
        return host, DEFAULT_SENTINEL_PORT
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"bad Sentinel port {port_text!r} in {redact_url(url)}")
    return host, int(port_text)


def parse_sentinel_url(url: str) -> SentinelTarget:
    """``redis+sentinel://[user:password@]h1:p1,h2:p2/<service>[/<db>][?sentinel_password=..]``
    -> :class:`SentinelTarget`; ValueError naming the problem (never the password)."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in SENTINEL_SCHEMES:
        raise ValueError(f"not a Sentinel URL: {redact_url(url)}")
    rest, _, query = rest.partition("?")
    netloc, _, path = rest.partition("/")
    userinfo, at, hosts = netloc.rpartition("@")
    username = password = None
    if at:
        user, colon, secret = userinfo.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if colon else None
    sentinels = tuple(_host_port(item, url) for item in hosts.split(",") if item)
    if not sentinels:
        raise ValueError(f"no Sentinel address in {redact_url(url)}")
    segments = [unquote(p) for p in path.split("/") if p]
    if not segments:
        raise ValueError(f"no service name in {redact_url(url)} (.../<service>/<db>)")
    if len(segments) > 2 or (len(segments) == 2 and not segments[1].isdigit()):
        raise ValueError(f"expected .../<service>/<db> in {redact_url(url)}")
    params = {k: v[-1] for k, v in parse_qs(query).items()}
    unknown = set(params) - {"sentinel_username", "sentinel_password"}
    if unknown:
        raise ValueError(f"unknown Sentinel URL option(s) {sorted(unknown)} in {redact_url(url)}")
    return SentinelTarget(
        sentinels=sentinels,
        service=segments[0],
        db=int(segments[1]) if len(segments) == 2 else 0,
        username=username,
        password=password,
        tls=scheme.lower() == "rediss+sentinel",
        sentinel_username=params.get("sentinel_username"),
        sentinel_password=params.get("sentinel_password"),
    )


def redact_url(url: str) -> str:
    """The URL with its passwords replaced by ``***``, safe for logs and error messages
    (also Sentinel URLs with several hosts and a ``sentinel_password`` option)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    rest, qmark, query = rest.partition("?")
    netloc, slash, path = rest.partition("/")
    userinfo, at, hosts = netloc.rpartition("@")
    if at and ":" in userinfo:
        netloc = f"{userinfo.split(':', 1)[0]}:***@{hosts}"
    if qmark:
        query = "&".join(
            f"{name}=***" if name.endswith("password") else f"{name}{eq}{value}"
            for name, eq, value in (item.partition("=") for item in query.split("&"))
        )
    return f"{scheme}://{netloc}{slash}{path}{qmark}{query}"


def _tls_kwargs(options: RedisOptions) -> dict[str, object]:
    kwargs: dict[str, object] = {}
    if options.ca_cert:
        kwargs["ssl_ca_certs"] = options.ca_cert
    if options.cert:
        kwargs["ssl_certfile"] = options.cert
    if options.key:
        kwargs["ssl_keyfile"] = options.key
    return kwargs


class ServerIdentity:
    """The server a client's connections reach: the run_id its newest connection found,
    and how many times that differed from the one before."""

    def __init__(self) -> None:
        self.run_id = ""
        self.changes = 0

    def on_connect(self, connection: Any) -> None:
        """redis-py's ``redis_connect_func``: the usual handshake, then ``INFO server``."""
        connection.on_connect()
        connection.send_command("INFO", "server")
        try:
            info = connection.read_response()
        except redis.ResponseError:  # an ACL without INFO: no identity, no changes
            return
        text = info.decode() if isinstance(info, bytes) else str(info)
        run_id = next(
            (line[7:].strip() for line in text.splitlines() if line.startswith("run_id:")), ""
        )
        if not run_id:
            return
        if self.run_id and run_id != self.run_id:
            self.changes += 1
            log.warning(
                "Redis: a new connection reached another server (run_id %s, was %s): "
                "a failover or a restart",
                run_id[:8],
                self.run_id[:8],
            )
        self.run_id = run_id


_identities: weakref.WeakKeyDictionary[Any, ServerIdentity] = weakref.WeakKeyDictionary()


class CommandPacker:
    """redis-py's hiredis packer without its Python loop over the arguments: hiredis packs
    str (UTF-8), bytes, int and float itself, into the same bytes redis-py makes of them,
    so a command of only those goes to it whole. A script call of a batch carries
    thousands of arguments (cache_reserve: ~14 a pod), where that loop cost a worker
    ~7 µs a pod. Anything else (a bool, which redis-py refuses; a command name of two
    words, which redis-py splits) takes redis-py's own way."""

    def __init__(self) -> None:
        encode = Encoder("utf-8", "strict", False).encode
        fallback = PythonRespSerializer(6000, encode)
        self._standard = HiredisRespSerializer(fallback.pack, encode)

    def pack(self, *args: Any) -> list[bytes]:
        name = args[0]
        if (type(name) is str and " " not in name) or (type(name) is bytes and b" " not in name):
            try:
                return [hiredis.pack_command(args)]
            except TypeError:
                pass
        return self._standard.pack(*args)


def server_changes(client: redis.Redis) -> int:
    """How many times the client's new connections reached another Redis server than the
    one before (0 for a client not made by :func:`connect`: it cannot tell)."""
    pool = getattr(client, "connection_pool", None)
    identity = None if pool is None else _identities.get(pool)
    return 0 if identity is None else identity.changes


def connect(options: RedisOptions, *, decode_responses: bool = False) -> redis.Redis:
    """A client for the options' URL; TLS files apply to ``rediss://`` and
    ``rediss+sentinel://`` URLs. The options' acknowledgement policy travels with the
    client (:func:`distsched.replication.policy_of`), and it tells when its connections
    reach another server (:func:`server_changes`)."""
    identity = ServerIdentity()
    kwargs: dict[str, object] = {
        "decode_responses": decode_responses,
        "socket_connect_timeout": 5,
        "socket_keepalive": True,
        "health_check_interval": 30,
        "redis_connect_func": identity.on_connect,
        "command_packer": CommandPacker(),
    }
    policy = options.ack_policy
    if is_sentinel_url(options.url):
        client = _sentinel_client(options, parse_sentinel_url(options.url), kwargs)
    else:
        if options.url.startswith("rediss://"):
            kwargs.update(_tls_kwargs(options))
        client = redis.Redis.from_url(options.url, **kwargs)  # type: ignore[arg-type]
    replication.set_policy(client, policy)
    _identities[client.connection_pool] = identity
    return client


def _sentinel_client(
    options: RedisOptions, target: SentinelTarget, kwargs: dict[str, object]
) -> redis.Redis:
    tls: dict[str, object] = {"ssl": True, **_tls_kwargs(options)} if target.tls else {}
    sentinel_kwargs: dict[str, object] = {
        "socket_connect_timeout": 2,
        "socket_timeout": 2,
        "socket_keepalive": True,
        **tls,
    }
    if target.sentinel_username:
        sentinel_kwargs["username"] = target.sentinel_username
    if target.sentinel_password:
        sentinel_kwargs["password"] = target.sentinel_password
    sentinel = Sentinel(list(target.sentinels), sentinel_kwargs=sentinel_kwargs)
    # One dict of connection options: redis-py 8.2 types master_for's keyword arguments
    # (redis_class, connection_pool_class) so that a **dict[str, object] no longer checks.
    connection: dict[str, Any] = {
        "db": target.db,
        "username": target.username,
        "password": target.password,
        **tls,
        **kwargs,
    }
    return sentinel.master_for(target.service, **connection)


RETRYABLE: tuple[type[redis.RedisError], ...] = (
    redis.ConnectionError,  # BusyLoadingError (a restarting server) too
    redis.TimeoutError,  # replication.NotReplicated too
    redis.exceptions.ReadOnlyError,  # a demoted primary, until the reconnect
    redis.exceptions.OutOfMemoryError,
    redis.exceptions.TryAgainError,
    redis.exceptions.ClusterDownError,  # MASTERDOWN: a replica that lost its primary
)
"""Errors of the infrastructure rather than refusals of what was asked: a role waits
them out and goes on, and a pod that met one was not attempted."""
_RETRYABLE_REPLIES = ("NOREPLICAS", "MISCONF")  # replies redis-py has no class for


def infrastructure_error(exc: BaseException) -> bool:
    """Whether ``exc`` says Redis could not do the work (unreachable, loading, out of
    memory, read-only after a failover, writes unacknowledged by replicas, a failing
    disk), not that the work was refused (a script's error, a wrong argument)."""
    if isinstance(exc, RETRYABLE):
        return True
    return isinstance(exc, redis.ResponseError) and str(exc).startswith(_RETRYABLE_REPLIES)


class Backoff:
    """Exponential backoff with jitter for reconnect loops: 0.1 s doubling to 5 s."""

    def __init__(self, initial_s: float = 0.1, max_s: float = 5.0) -> None:
        self.initial_s = initial_s
        self.max_s = max_s
        self.failures = 0

    def next_delay(self) -> float:
        delay = min(self.max_s, self.initial_s * 2**self.failures)
        self.failures += 1
        return delay * random.uniform(0.5, 1.0)

    def reset(self) -> None:
        self.failures = 0


def retry_redis(
    fn: Callable[[], T],
    *,
    what: str,
    stop: Callable[[], bool] = lambda: False,
    on_retry: Callable[[], None] | None = None,
    role: str | None = None,
) -> T | None:
    """Run ``fn`` until it succeeds, waiting out Redis outages (:func:`infrastructure_error`)
    with backoff and saying so; with ``role``, each retry counts in
    ``redis_retries_total{role}``.

    Returns None only when ``stop()`` turned true while Redis was unreachable.
    """
    backoff = Backoff()
    while True:
        try:
            result = fn()
        except redis.RedisError as exc:
            if not infrastructure_error(exc):
                raise
            if stop():
                return None
            delay = backoff.next_delay()
            log.warning("%s: Redis unavailable (%s); retrying in %.1fs", what, exc, delay)
            if role:
                metrics.redis_retries.labels(role).inc()
            if on_retry:
                on_retry()
            time.sleep(delay)
            continue
        if backoff.failures:
            log.warning("%s: Redis is back after %d failed tries", what, backoff.failures)
        return result
