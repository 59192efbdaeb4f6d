"""``distsched bench``: scheduler_perf's workloads against real processes (the load
tests live in :mod:`distsched.bench`)."""

from __future__ import annotations

import sys
from typing import Any

import click

from distsched.cli.common import bad_input, make_context, redis_options
from distsched.cli.kube import kube_client, kubeconfig_options


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
@click.option(
    "--rounds",
    type=int,
    default=1,
    show_default=True,
    help="A scaling run (--workers 1,2,4) measures the list this many times, interleaved; "
    "the report gives each round's worker-CPU ratio and the median.",
)
@kubeconfig_options
@click.option(
    "--scheduler-name",
    default="default-scheduler",
    show_default=True,
    help="With --kubeconfig: the schedulerName of the created pods (the scheduler measured).",
)
@click.option(
    "--bind-only",
    is_flag=True,
    help="With --kubeconfig: no scheduler; the bench binds each pod as it is created "
    "(the API server's own ceiling).",
)
@click.option(
    "--bind-events",
    is_flag=True,
    help="With --bind-only: also write each pod's Scheduled event (a scheduler's writes).",
)
@click.option("--keep", is_flag=True, help="With --kubeconfig: leave the objects in the cluster.")
@redis_options
def bench(**kwargs: Any) -> None:
    """Run a scheduler_perf-style workload and report throughput and latency."""
    from distsched.bench.runner import run_bench_command

    if kwargs.get("kubeconfig") or kwargs.get("bind_only"):
        sys.exit(_kube_bench(kwargs))
    kube_options = ("kube_context", "scheduler_name", "bind_only", "bind_events", "keep")
    for option in (*kube_options, "kubeconfig"):
        kwargs.pop(option, None)
    ctx = make_context(kwargs)
    # No URL is fine: the bench then starts its own embedded server.
    sys.exit(run_bench_command(ctx.options, ctx.keys, **kwargs))


def _kube_bench(kwargs: dict[str, Any]) -> int:
    """``bench --kubeconfig``: the workload through a real API server (bench/kube.py)."""
    import json

    from distsched.bench.kube import KubeBenchConfig, run_kube_bench
    from distsched.bench.workloads import WORKLOADS

    workload = WORKLOADS.get(kwargs["workload"])
    if workload is None:
        bad_input(f"--workload {kwargs['workload']!r}: one of {', '.join(sorted(WORKLOADS))}")
    if not kwargs.get("external") and not kwargs.get("bind_only"):
        bad_input(
            "--kubeconfig measures the scheduler already serving --scheduler-name: "
            "pass --external (or --bind-only for the API server's ceiling)"
        )
    nodes = kwargs["nodes"]
    init = kwargs["init_pods"]
    if init is None:
        init = workload.default_init(nodes, kwargs["pods"])
    kube = kube_client(kwargs.get("kubeconfig"), kwargs.get("kube_context"))
    config = KubeBenchConfig(
        workload=workload,
        nodes=nodes,
        init_pods=init,
        pods=kwargs["pods"],
        scheduler_name=kwargs["scheduler_name"],
        bind_only=kwargs["bind_only"],
        bind_events=kwargs["bind_events"],
        timeout_s=kwargs["timeout"],
        keep=kwargs["keep"],
    )
    try:
        report = run_kube_bench(kube, config)
    finally:
        kube.close()
    if kwargs.get("output") == "json":
        click.echo(json.dumps(report, indent=2))
    else:
        t = report["throughput"]
        click.echo(
            f"{report['workload']} via the API server, {report['scheduler']}: "
            f"{report['bound']}/{report['pods']} bound in {report['seconds']:.1f}s, "
            f"overall {t['overall']:.0f} pods/s (1 s samples: average {t['average']:.0f}, "
            f"p50 {t['p50']:.0f}); invariants "
            f"{'ok' if report['invariants']['ok'] else report['invariants']['violations']}"
        )
    ok = report["outcome"] == "complete" and report["invariants"]["ok"]
    return 0 if ok else 1
