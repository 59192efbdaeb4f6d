"""Redis connections for every role: URL, ACL credentials, TLS, and waiting out outages.

A URL may carry an ACL user and password (``redis://user:pass@host:6379/0``) and TLS
(``rediss://``). Certificate options come from the CLI or the environment
(``DISTSCHED_REDIS_CA``, ``DISTSCHED_REDIS_CERT``, ``DISTSCHED_REDIS_KEY``).
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import urlsplit, urlunsplit

import redis

log = logging.getLogger(__name__)

T = TypeVar("T")

URL_ENV = "DISTSCHED_REDIS_URL"


@dataclass(frozen=True, slots=True)
class RedisOptions:
    url: str
    ca_cert: str | None = None
    cert: str | None = None
    key: str | None = None

    @classmethod
    def from_env(cls, url: str | None = None, **tls: str | None) -> RedisOptions:
        return cls(
            url=url or os.environ.get(URL_ENV, ""),
            ca_cert=tls.get("ca_cert") or os.environ.get("DISTSCHED_REDIS_CA"),
            cert=tls.get("cert") or os.environ.get("DISTSCHED_REDIS_CERT"),
            key=tls.get("key") or os.environ.get("DISTSCHED_REDIS_KEY"),
        )


def redact_url(url: str) -> str:
    """The URL with its password replaced by ``***``, safe for logs and error messages."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "<unparsable Redis URL>"
    netloc = f"{parts.username or ''}:***@{host}{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def connect(options: RedisOptions, *, decode_responses: bool = False) -> redis.Redis:
    """A client for the options' URL; TLS files apply to ``rediss://`` URLs."""
    kwargs: dict[str, object] = {
        "decode_responses": decode_responses,
        "socket_connect_timeout": 5,
        "socket_keepalive": True,
        "health_check_interval": 30,
    }
    if options.url.startswith("rediss://"):
        if options.ca_cert:
            kwargs["ssl_ca_certs"] = options.ca_cert
        if options.cert:
            kwargs["ssl_certfile"] = options.cert
        if options.key:
            kwargs["ssl_keyfile"] = options.key
    return redis.Redis.from_url(options.url, **kwargs)  # type: ignore[arg-type]


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
) -> T | None:
    """Run ``fn`` until it succeeds, waiting out Redis outages with backoff and saying so.

    Returns None only when ``stop()`` turned true while Redis was unreachable.
    """
    backoff = Backoff()
    while True:
        try:
            result = fn()
        except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError) as exc:
            if stop():
                return None
            delay = backoff.next_delay()
            log.warning("%s: Redis unavailable (%s); retrying in %.1fs", what, exc, delay)
            if on_retry:
                on_retry()
            time.sleep(delay)
            continue
        if backoff.failures:
            log.warning("%s: Redis is back after %d failed tries", what, backoff.failures)
        return result
