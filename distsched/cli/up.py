"""``distsched up``: every role in the foreground (workers, a binder pool, controllers),
on an embedded server when no URL is given, optionally with the demo; Ctrl-C stops all."""

from __future__ import annotations

import logging
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import click
import redis

from distsched.cli.common import (
    EXIT_RUNTIME,
    Context,
    fail,
    interrupt,
    make_context,
    redis_options,
)
from distsched.cli.kube import checked_mode, kubeconfig_options
from distsched.connection import RedisOptions, connect, redact_url, retry_redis
from distsched.launcher import RoleProcess, redis_args, role_env, stop_all
from distsched.output import err_console

log = logging.getLogger("distsched")


def _spawn(
    role: str,
    options: RedisOptions,
    scheduler: str,
    extra: list[str],
    log_path: Path | None = None,
) -> RoleProcess:
    # In our own process group: Ctrl-C in the terminal reaches every role as it reaches us.
    args = [*redis_args(options, scheduler), *extra]
    return RoleProcess(role, args, role_env(options), log_path=log_path, own_session=False).start()


@click.command()
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
@kubeconfig_options
@redis_options
def up(
    workers: int,
    binders: int,
    controllers: int,
    metrics_port: int,
    metrics_addr: str,
    config: str | None,
    demo: bool,
    kubeconfig: str | None,
    kube_context: str | None,
    **kwargs: Any,
) -> None:
    """Run every role in the foreground (with an embedded Redis when no URL is given).

    With --kubeconfig, schedule that cluster: the roles are the kube bridge, the workers
    and the binders, all pointed at its API server (no workload controllers: the
    cluster's own run its Deployments and Jobs).

    Ctrl-C or SIGTERM stops the workers, the binders and the embedded server; exit 0.
    A Redis URL whose server is down is waited for.
    """
    from distsched.embedded import EmbeddedRedis

    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, interrupt)
    ctx = make_context(kwargs)
    kube = checked_mode(kubeconfig, kube_context)
    if kube is not None and demo:
        fail("--demo creates its own cluster in the store; it does not go with --kubeconfig", 2)
    embedded: EmbeddedRedis | None = None
    children: list[RoleProcess] = []
    # The demo prints its summary on stdout: the roles' log lines go to a file meanwhile,
    # so that none lands in the middle of it (kept, and named, if the demo fails).
    role_log = Path(tempfile.gettempdir()) / f"distsched-demo-{os.getpid()}.log" if demo else None
    demo_ok = False
    try:
        if not ctx.options.url:
            try:
                embedded = EmbeddedRedis(require_password=True).start()
            except RuntimeError as exc:
                fail(str(exc))
            ctx.options = RedisOptions(url=embedded.url)
            err_console.print(
                f"embedded Redis at {embedded.url} (data in {embedded.data_dir}, password "
                f"in {embedded.password_file})",
                soft_wrap=True,
                markup=False,
                highlight=False,
            )
        _wait_for_redis(ctx)
        role_args = ["--config", config] if config else []
        if kube is not None:
            role_args += ["--kubeconfig", kube.kubeconfig]
            role_args += ["--context", kube.context] if kube.context else []
            controllers = 0
            children.append(
                _spawn("kube-bridge", ctx.options, ctx.keys.scheduler, role_args, role_log)
            )
        for i in range(workers):
            metrics = ["--metrics-port", str(metrics_port + i)] if metrics_port else []
            metrics += ["--metrics-addr", metrics_addr] if metrics_port else []
            children.append(
                _spawn("worker", ctx.options, ctx.keys.scheduler, role_args + metrics, role_log)
            )
        binder_args = ["--processes", str(binders), *role_args]
        if metrics_port:
            binder_args += ["--metrics-port", str(metrics_port + workers)]
            binder_args += ["--metrics-addr", metrics_addr]
        children.append(_spawn("binder", ctx.options, ctx.keys.scheduler, binder_args, role_log))
        for _ in range(controllers):
            children.append(_spawn("controller", ctx.options, ctx.keys.scheduler, [], role_log))
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
        while all(child.alive() for child in children):
            if demo_result:
                demo_ok = demo_result[0] == 0
                sys.exit(demo_result[0])
            time.sleep(0.2)
        fail("a worker, binder or controller process exited; stopping the others")
    except KeyboardInterrupt:
        err_console.print("stopping")
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut cleanup
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stop_all(children)
        if embedded:
            embedded.stop()
        if role_log is not None and role_log.exists():
            if demo_ok:
                role_log.unlink()
            else:
                err_console.print(f"role logs: {role_log}", markup=False, highlight=False)


def _wait_for_redis(ctx: Context) -> None:
    """Before any child starts: fail fast on refused credentials, wait for a server that
    is down (saying so, as every role does), so that no child starts into an outage."""
    client = ctx.client()
    where = f"Redis at {redact_url(ctx.options.url)}"

    def ping() -> bool:
        try:
            return bool(client.ping())
        except redis.AuthenticationError as exc:
            fail(f"{where} refused the credentials: {exc}")

    retry_redis(ping, what="up")


def _demo_thread(ctx: Context, result: list[int]) -> None:
    try:
        result.append(_run_demo(ctx))
    except Exception:
        log.exception("the demo failed")
        result.append(EXIT_RUNTIME)


def _run_demo(ctx: Context) -> int:
    from distsched.demo import run_demo
    from distsched.store import StoreError
    from distsched.views import explain_pod

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
        print(text, flush=True)
    return 0 if ok else EXIT_RUNTIME
