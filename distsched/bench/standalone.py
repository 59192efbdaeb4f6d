"""What the standalone reliability runs (``python -m distsched.bench.chaos`` and
``...soak``) share as commands: a private embedded server unless ``--redis-url`` is
given, the roles' logs in ``--log-dir``, a one-line text or a JSON report, and exit code
1 when the report is not ok."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, ClassVar, NoReturn, Protocol, TypeVar

import click

from distsched.embedded import EmbeddedRedis


class RunReport(Protocol):
    """A dataclass with ``ok``, ``line()`` and its violations."""

    __dataclass_fields__: ClassVar[dict[str, Any]]
    violations: list[str]

    @property
    def ok(self) -> bool: ...

    def line(self) -> str: ...


R = TypeVar("R", bound=RunReport)


def standalone_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--redis-url, --log-dir and -o."""
    decorators = [
        click.option("--redis-url", default=None, help="Server to use (default: a private one)."),
        click.option("--log-dir", type=click.Path(file_okay=False, path_type=Path), default=None),
        click.option("-o", "output", type=click.Choice(["text", "json"]), default="text"),
    ]
    for decorator in reversed(decorators):
        fn = decorator(fn)
    return fn


def run_standalone(redis_url: str | None, run: Callable[[str], R], *, appendfsync: str) -> R:
    """``run(url)`` on ``redis_url``, or on a private server started and stopped around it;
    a ValueError (the deployment already holds objects) is a usage error."""
    server = None
    if redis_url is None:
        server = EmbeddedRedis(appendfsync=appendfsync).start()
        redis_url = server.url
    try:
        return run(redis_url)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    finally:
        if server is not None:
            server.stop()


def print_report(report: RunReport, output: str, *, most: int | None = None) -> NoReturn:
    """The report as one line (and the first ``most`` violations) or as JSON; exits."""
    if output == "json":
        click.echo(json.dumps({**asdict(report), "ok": report.ok}))
    else:
        click.echo(report.line())
        for message in report.violations[:most]:
            click.echo(f"  {message}")
    sys.exit(0 if report.ok else 1)
