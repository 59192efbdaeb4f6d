"""``distsched acl``: the least-privilege ACL users of the roles, for a given server."""

from __future__ import annotations

from typing import Any

import click

from distsched.acl import ROLES, parse_version, server_version, setuser_line
from distsched.cli.common import bad_input, make_context, redis_options


@click.command()
@click.option(
    "--role",
    "roles",
    type=click.Choice(ROLES),
    multiple=True,
    help="The role(s) to print (repeatable; default: all three).",
)
@click.option(
    "--server-version",
    "version_text",
    help="The server's Redis version (e.g. 7.0); default: read from --redis-url (INFO).",
)
@click.option(
    "--password",
    default="<password>",
    show_default=True,
    help="The password to put in the lines (else replace the placeholder).",
)
@redis_options
def acl(roles: tuple[str, ...], version_text: str | None, password: str, **kwargs: Any) -> None:
    """Print one ACL SETUSER line per role, for this server and deployment.

    Each user gets only the commands its role runs on this server's version and only
    the deployment's keys (the operator's read-only). Feed the lines to redis-cli as an
    admin: distsched acl --redis-url ADMIN_URL | redis-cli -u ADMIN_URL
    """
    ctx = make_context(kwargs)
    if version_text is not None:
        try:
            version = parse_version(version_text)
        except ValueError as exc:
            bad_input(f"--server-version: {exc}")
    elif ctx.options.url:
        version = server_version(ctx.client())
    else:
        bad_input("give --redis-url (or DISTSCHED_REDIS_URL) or --server-version")
    for role in roles or ROLES:
        try:
            line = setuser_line(role, password, scheduler=ctx.keys.scheduler, version=version)
        except ValueError as exc:
            bad_input(str(exc))
        print(line)
