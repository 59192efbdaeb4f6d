"""`distsched controller`: the workload controller role (registered on the cli group)."""

from __future__ import annotations

from typing import Any

import click

from distsched.cli import make_context, redis_options


@click.command()
@click.option(
    "--lease-ms",
    type=click.IntRange(min=100),
    default=15_000,
    show_default=True,
    help="Leader lease: with several instances one reconciles, another takes over this "
    "long after it stops.",
)
@redis_options
def controller(lease_ms: int, **kwargs: Any) -> None:
    """Run the workload controllers (Deployment, ReplicaSet, StatefulSet, DaemonSet, Job)."""
    from distsched.controllers.main import run_controller

    ctx = make_context(kwargs)
    run_controller(ctx.require_url(), ctx.keys, lease_ms=lease_ms)
