"""``distsched replay``: what-if scheduling of a cluster dump (``kubectl get -o json``)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import click

from distsched.cli.common import bad_input, fail, make_context, redis_options
from distsched.connection import RedisOptions
from distsched.output import err_console, print_json, print_table


@click.command()
@click.option(
    "-f", "--filename", "paths", multiple=True, required=True,
    help="`kubectl get nodes,pods -A -o json` (or -o yaml, a PodList/NodeList, `get all`) "
    "output (repeatable; - for stdin).",
)  # fmt: skip
@click.option(
    "--pending-only",
    type=bool,
    default=True,
    show_default=True,
    help="Keep bound pods where they are; false: unbind everything and schedule from scratch.",
)
@click.option("--workers", default=1, show_default=True, help="Scheduling worker processes.")
@click.option("--binders", default=1, show_default=True, help="Binder processes.")
@click.option("--timeout", type=float, default=300.0, show_default=True, help="Seconds.")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table")
@redis_options
def replay(
    paths: tuple[str, ...],
    pending_only: bool,
    workers: int,
    binders: int,
    timeout: float,
    output: str,
    **kwargs: Any,
) -> None:
    """What-if: would a cluster's pending pods fit, and where? Runs on an embedded server
    unless --redis-url is given (then in a throwaway deployment there)."""
    from distsched import gc_tuning
    from distsched.embedded import EmbeddedRedis
    from distsched.model import ManifestError
    from distsched.replay import ReplayError, load_dump
    from distsched.replay import replay as run_replay

    ctx = make_context(kwargs)
    gc_tuning.tune()  # a dump's millions of objects: young collections, few full ones
    skipped: Counter[str] = Counter()
    try:
        objects = load_dump(paths, pending_only=pending_only, skipped=skipped)
    except ManifestError as exc:
        bad_input(str(exc))
    except OSError as exc:
        bad_input(f"{exc.filename}: {exc.strerror or exc}")
    if not any(o["kind"] == "Node" for o in objects):
        bad_input(f"{', '.join(paths)}: no Node in the input")
    embedded: EmbeddedRedis | None = None
    try:
        options = ctx.options
        if not options.url:
            embedded = EmbeddedRedis(appendfsync="everysec", require_password=True).start()
            options = RedisOptions(url=embedded.url)
        report = run_replay(
            objects,
            options,
            workers=workers,
            binders=binders,
            timeout_s=timeout,
            skipped=skipped,
        )
    except (ReplayError, RuntimeError) as exc:
        fail(str(exc))
    finally:
        if embedded is not None:
            embedded.stop()
    if output == "json":
        print_json(report.to_json())
        return
    summary = report.to_json()["pods"]
    err_console.print(
        f"{report.nodes} nodes; {summary['kept']} pods kept where they are, "
        f"{summary['pending']} pending: {summary['scheduled']} fit, "
        f"{summary['unschedulable']} do not, {summary['preempted']} preempted "
        f"({report.seconds:.1f}s)",
        soft_wrap=True,
    )
    if report.skipped:
        err_console.print(
            f"{report.skipped_line()} (kinds replay does not use)", soft_wrap=True, markup=False
        )
    print_table("placements", ["POD", "NODE"], sorted(report.placements.items()))
    if report.unschedulable:
        print_table("do not fit", ["POD", "WHY"], sorted(report.unschedulable.items()))
    rows = []
    for name, before in report.before.items():
        after = report.after.get(name, {})
        rows.append(
            (
                name,
                *(f"{before[r]:.0%} -> {after.get(r, 0):.0%}" for r in ("cpu", "memory", "pods")),
            )
        )
    print_table("utilisation (requested / allocatable)", ["NODE", "CPU", "MEMORY", "PODS"], rows)
