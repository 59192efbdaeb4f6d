"""What every ``distsched`` subcommand shares: Redis options, the context, exit codes,
one-line errors, and the group that turns Redis failures into exit code 1."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any, NoReturn

import click
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from distsched.connection import (
    ACK_ENV,
    URL_ENV,
    RedisOptions,
    connect,
    is_sentinel_url,
    parse_sentinel_url,
    redact_url,
)
from distsched.keys import DEFAULT_SCHEDULER, Keys
from distsched.output import (
    err_console,
)
from distsched.replication import NotReplicated

log = logging.getLogger("distsched")

EXIT_RUNTIME = 1
EXIT_BAD_INPUT = 2
URL_SCHEMES = ("redis://", "rediss://", "unix://", "redis+sentinel://", "rediss+sentinel://")


class Context:
    """What every subcommand gets: connection options and the scheduler's key space."""

    def __init__(self, options: RedisOptions, scheduler: str) -> None:
        self.options = options
        self.keys = Keys(scheduler)
        self._client: redis.Redis | None = None

    def require_url(self) -> RedisOptions:
        if not self.options.url:
            raise click.UsageError(f"no Redis URL: pass --redis-url or set {URL_ENV}")
        return self.options

    def client(self) -> redis.Redis:
        self.require_url()
        if self._client is None:
            self._client = connect(self.options)
            # One-shot commands fail at once (redis-py would retry a refused password
            # ten times); the roles wait out outages themselves.
            self._client.set_retry(Retry(NoBackoff(), 0))
        return self._client


def redis_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--redis-url and TLS options on every command."""
    decorators = [
        click.option(
            "--redis-url",
            envvar=URL_ENV,
            default="",
            show_envvar=True,
            help="redis://, rediss:// or redis+sentinel://h1:p1,h2:p2/<service>/<db> URL, "
            "may carry an ACL user:password.",
        ),
        click.option(
            "--min-replicas-ack",
            envvar=ACK_ENV,
            type=click.IntRange(min=0),
            default=None,
            help="Replicas that must hold a write before it is acknowledged "
            "(WAIT) [1 with a Sentinel URL, else 0].",
        ),
        click.option("--redis-ca", envvar="DISTSCHED_REDIS_CA", help="CA bundle for rediss://."),
        click.option("--redis-cert", envvar="DISTSCHED_REDIS_CERT", help="Client certificate."),
        click.option("--redis-key", envvar="DISTSCHED_REDIS_KEY", help="Client certificate key."),
        click.option(
            "--scheduler",
            envvar="DISTSCHED_SCHEDULER",
            default=DEFAULT_SCHEDULER,
            show_default=True,
            help="Deployment name: the hash tag of every Redis key.",
        ),
    ]
    for decorator in reversed(decorators):
        fn = decorator(fn)
    return fn


def make_context(kwargs: dict[str, Any]) -> Context:
    options = RedisOptions.from_env(
        kwargs.pop("redis_url"),
        ca_cert=kwargs.pop("redis_ca"),
        cert=kwargs.pop("redis_cert"),
        key=kwargs.pop("redis_key"),
        min_replicas_ack=kwargs.pop("min_replicas_ack"),
    )
    if options.url and not options.url.startswith(URL_SCHEMES):
        raise click.BadParameter(
            f"{redact_url(options.url)!r} must start with one of {', '.join(URL_SCHEMES)}",
            param_hint="--redis-url",
        )
    if is_sentinel_url(options.url):
        try:
            parse_sentinel_url(options.url)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--redis-url") from None
    click.get_current_context().meta[_URL_META] = options.url
    return Context(options, kwargs.pop("scheduler"))


def setup_logging(verbose: int) -> None:
    level = logging.WARNING - 10 * verbose
    logging.basicConfig(
        level=max(level, logging.DEBUG),
        format="%(asctime)s %(levelname)s %(processName)s %(name)s: %(message)s",
    )


_URL_META = "distsched.redis_url"


def fail(message: str, code: int = EXIT_RUNTIME) -> NoReturn:
    err_console.print(f"error: {message}", markup=False, highlight=False, soft_wrap=True)
    sys.exit(code)


def warn(message: str) -> None:
    """One line on stderr; the command goes on."""
    err_console.print(f"warning: {message}", markup=False, highlight=False, soft_wrap=True)


def bad_input(message: str) -> NoReturn:
    fail(message, EXIT_BAD_INPUT)


class DistschedGroup(click.Group):
    """Turns Redis failures of any subcommand into one line and exit code 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except redis.RedisError as exc:
            url = redact_url(ctx.meta.get(_URL_META, "") or "(no URL)")
            if isinstance(exc, NotReplicated):
                what = "did not replicate in time"
            elif isinstance(exc, redis.AuthenticationError):
                what = "refused the credentials"
            elif isinstance(exc, redis.ConnectionError | redis.TimeoutError):
                what = "is unreachable"
            else:
                what = "failed"
            reason = " ".join(str(exc).split()) or type(exc).__name__
            fail(f"Redis at {url} {what}: {reason}")


def interrupt(_signum: int, _frame: object) -> None:
    """SIGTERM (docker stop, systemd) ends a foreground command like Ctrl-C does."""
    raise KeyboardInterrupt
