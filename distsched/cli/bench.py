"""``distsched bench``: scheduler_perf's workloads against real processes (the load
tests live in :mod:`distsched.bench`)."""

from __future__ import annotations

import sys
from typing import Any

import click

from distsched.cli.common import make_context, redis_options


@click.command()
@click.option("--workload", default="SchedulingBasic", show_default=True)
@click.option("--nodes", default=500, show_default=True)
@click.option(
    "--init-pods", type=int, default=None, help="Pods placed before measuring [workload's default]."
)
@click.option("--pods", default=2000, show_default=True)
@click.option(
    "--workers",
    default="2",
    show_default=True,
    help="Worker processes; a comma list (1,2,4) runs each and projects scale-out.",
)
@click.option("--binders", default=1, show_default=True)
@click.option("--rate", type=float, default=0.0, help="Arrival rate in pods/s (latency mode).")
@click.option("--external", is_flag=True, help="Measure an already-running deployment.")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table")
@click.option("--plot", type=click.Path(dir_okay=False), help="Write a PNG of throughput.")
@click.option("--timeout", type=float, default=600.0, show_default=True, help="Seconds per phase.")
@click.option("--metrics-url", multiple=True, help="Worker /metrics URL to scrape (--external).")
@click.option("--redis-profile", is_flag=True, help="Time each Lua script (Redis slow log).")
@redis_options
def bench(**kwargs: Any) -> None:
    """Run a scheduler_perf-style workload and report throughput and latency."""
    from distsched.bench.runner import run_bench_command

    ctx = make_context(kwargs)
    # No URL is fine: the bench then starts its own embedded server.
    sys.exit(run_bench_command(ctx.options, ctx.keys, **kwargs))
