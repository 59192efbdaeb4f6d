"""Looking inside a deployment: ``queue`` (every sub-queue's count and head),
``explain`` (why a pod is pending) and ``top nodes`` (requested against allocatable).
All only read."""

from __future__ import annotations

import sys
from typing import Any

import click

from distsched.cli.common import bad_input, fail, make_context, redis_options
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


@click.command()
@click.argument("kind", type=click.Choice(["node", "nodes", "no"]))
@click.argument("names", nargs=-1)
@click.option("-l", "--selector", default="", help="Only the nodes this label selector selects.")
@redis_options
def top(kind: str, names: tuple[str, ...], selector: str, **kwargs: Any) -> None:
    """Requested resources against allocatable, per node, as the scheduler sees them:
    kubectl top's columns with requests where kubectl shows usage (distsched runs no
    containers). Read from the ledger (the requests of assumed and bound pods, what
    every worker places against); a node no worker has seen yet from the pods the store
    has bound to it."""
    from distsched.cli import observed
    from distsched.cli.describe import pod_requests_and_limits
    from distsched.cli.get import not_found
    from distsched.cli.selectors import SelectorError, parse_label_selector
    from distsched.model.quantity import parse_quantity
    from distsched.store import Store
    from distsched.views import ledger_nodes

    ctx = make_context(kwargs)
    try:
        labels = parse_label_selector(selector)
    except SelectorError as exc:
        bad_input(str(exc))
    store = Store(ctx.client(), ctx.keys)
    nodes = [n for n in store.list("Node")[0] if labels.matches(n["metadata"].get("labels"))]
    if names:
        by_name = {n["metadata"]["name"]: n for n in nodes}
        for name in names:
            if name not in by_name:
                print(not_found("Node", name), file=sys.stderr)
                sys.exit(1)
        nodes = [by_name[name] for name in names]
    if not nodes:
        print("No resources found", file=sys.stderr)
        return
    node_names = [n["metadata"]["name"] for n in nodes]
    ledger = ledger_nodes(ctx.client(), ctx.keys, node_names)
    from_store: dict[str, dict[str, int]] = {}
    if len(ledger) < len(node_names):
        for pod in store.list("Pod")[0]:
            bound_to = observed.pod_node(pod)
            if bound_to and bound_to not in ledger and not observed.pod_finished(pod):
                held = from_store.setdefault(bound_to, {"pods": 0})
                held["pods"] += 1
                for resource, amount in pod_requests_and_limits(pod)[0].items():
                    held[resource] = held.get(resource, 0) + amount
    rows = []
    for node in nodes:
        name = node["metadata"]["name"]
        if name in ledger:
            allocatable, requested = ledger[name]["allocatable"], ledger[name]["requested"]
        else:
            status = node.get("status") or {}
            allocatable = {}
            for resource, value in (
                status.get("allocatable") or status.get("capacity") or {}
            ).items():
                try:
                    allocatable[resource] = parse_quantity(value, resource)
                except ValueError:
                    continue
            requested = from_store.get(name, {})
        cpu, memory, pods = (requested.get(r, 0) for r in ("cpu", "memory", "pods"))
        rows.append(
            (
                name,
                f"{cpu}m",
                _percent(cpu, allocatable.get("cpu", 0)),
                f"{memory // (1024 * 1024)}Mi",
                _percent(memory, allocatable.get("memory", 0)),
                f"{pods}/{allocatable.get('pods', 0)}",
            )
        )
    print_table(
        None, ["NAME", "CPU(requests)", "CPU(%)", "MEMORY(requests)", "MEMORY(%)", "PODS"], rows
    )


def _percent(amount: int, of: int) -> str:
    return f"{int(amount / of * 100)}%" if of else "<unknown>"
