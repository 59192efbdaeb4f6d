"""Looking inside a deployment: ``queue`` (every sub-queue's count and head) and
``explain`` (why a pod is pending). Both only read."""

from __future__ import annotations

from typing import Any

import click

from distsched.cli.common import fail, make_context, redis_options
from distsched.output import print_json, print_table


@click.command()
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table")
@click.option("--head", "head_size", default=5, show_default=True, help="Pods shown per queue.")
@redis_options
def queue(output: str, head_size: int, **kwargs: Any) -> None:
    """Counts and heads of every sub-queue (active, backoff, unschedulable, ...)."""
    from distsched.views import queue_status

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


@click.command()
@click.argument("kind", type=click.Choice(["pod", "pods"]))
@click.argument("name")
@click.option("-n", "--namespace", default="default", show_default=True)
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text")
@redis_options
def explain(kind: str, name: str, namespace: str, output: str, **kwargs: Any) -> None:
    """Why a pod is pending: kube's "0/N nodes are available: ..." of its last attempt
    and the plugins that rejected it."""
    from distsched.views import format_explanation, pod_explanation

    ctx = make_context(kwargs)
    explanation = pod_explanation(ctx.client(), ctx.keys, f"{namespace}/{name}")
    if explanation is None:
        fail(f"pod {namespace}/{name} not found")
    if output == "json":
        print_json(explanation)
    else:
        print(format_explanation(explanation))
