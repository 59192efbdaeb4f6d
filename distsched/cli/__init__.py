"""The ``distsched`` command: one click group, one module per group of verbs.

Exit codes: 0 ok, 1 runtime failure (Redis unreachable, refused credentials, a store
conflict), 2 bad input (one line naming file, document, field). Errors are one line on
stderr, never a traceback, and never show a password from the URL.

| module | verbs |
| --- | --- |
| :mod:`~distsched.cli.objects` | apply, delete |
| :mod:`~distsched.cli.get` | get (with :mod:`~.printers`, :mod:`~.selectors`, :mod:`~.watch`) |
| :mod:`~distsched.cli.describe` | describe (pods, nodes) |
| :mod:`~distsched.cli.scale` | scale |
| :mod:`~distsched.cli.inspect` | queue, explain, top |
| :mod:`~distsched.cli.roles` | worker, binder, controller, server |
| :mod:`~distsched.cli.kube` | kube-bridge |
| :mod:`~distsched.cli.up` | up (all roles, the demo) |
| :mod:`~distsched.cli.replay` | replay |
| :mod:`~distsched.cli.bench` | bench |
| :mod:`~distsched.cli.acl` | acl (least-privilege ACL users per role) |
"""

from __future__ import annotations

import click

from distsched.cli import (
    acl,
    bench,
    describe,
    get,
    inspect,
    kube,
    objects,
    replay,
    roles,
    scale,
    up,
)
from distsched.cli.common import DistschedGroup, setup_logging


@click.group(cls=DistschedGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", count=True, help="More logging (-v info, -vv debug).")
@click.version_option(package_name="distsched")
def main(verbose: int) -> None:
    """kube-scheduler's queue and framework, distributed over Redis."""
    setup_logging(verbose if verbose else 1)


for command in (
    objects.apply,
    get.get,
    objects.delete,
    describe.describe,
    scale.scale,
    inspect.queue,
    inspect.explain,
    inspect.top,
    roles.worker,
    roles.binder,
    roles.controller,
    roles.server,
    kube.kube_bridge,
    up.up,
    replay.replay,
    bench.bench,
    acl.acl,
):
    main.add_command(command)
