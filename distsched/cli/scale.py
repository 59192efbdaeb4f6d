"""``distsched scale``: a workload's replicas, as ``kubectl scale`` sets them (a Job's
parallelism, as kubectl scaled Jobs before 1.26). The controller role then adds or
deletes pods."""

from __future__ import annotations

import sys
from typing import Any

import click

from distsched.cli import printers
from distsched.cli.common import EXIT_RUNTIME, bad_input, fail, make_context, redis_options
from distsched.cli.get import current_namespace, namespace_option, not_found
from distsched.cli.kindnames import KindNames

SCALE_FIELD = {
    "Deployment": "replicas",
    "ReplicaSet": "replicas",
    "StatefulSet": "replicas",
    "Job": "parallelism",
}
ATTEMPTS = 5


@click.command()
@click.argument("args", nargs=-1, required=True, metavar="KIND NAME... | KIND/NAME...")
@click.option("--replicas", type=click.IntRange(min=0), required=True, help="The new size.")
@click.option(
    "--current-replicas",
    type=int,
    default=None,
    help="Scale only if the current size is this (a precondition).",
)
@namespace_option
@redis_options
def scale(
    args: tuple[str, ...],
    replicas: int,
    current_replicas: int | None,
    namespace: str | None,
    **kwargs: Any,
) -> None:
    """Set the size of a Deployment, ReplicaSet or StatefulSet (spec.replicas) or of a
    Job (spec.parallelism): `scale deploy/web --replicas 5`, `scale sts db --replicas 3`."""
    from distsched.store import Conflict, Store

    ctx = make_context(kwargs)
    store = Store(ctx.client(), ctx.keys)
    kinds = KindNames(lambda: store)
    targets: list[tuple[str, str]] = []
    try:
        if all("/" in a for a in args):
            for arg in args:
                word, _, name = arg.partition("/")
                targets.append((kinds.resolve(word), name))
        elif len(args) >= 2 and not any("/" in a for a in args):
            kind = kinds.resolve(args[0])
            targets += [(kind, name) for name in args[1:]]
        else:
            bad_input("give KIND NAME... or KIND/NAME...")
    except ValueError as exc:
        bad_input(str(exc))
    for kind, _ in targets:
        if kind not in SCALE_FIELD:
            bad_input(
                f"{printers.resource_name(kind)} cannot be scaled "
                "(deployments, replicasets, statefulsets and jobs can)"
            )
    ns = current_namespace(namespace)
    failed = False
    for kind, name in targets:
        field = SCALE_FIELD[kind]
        for _ in range(ATTEMPTS):
            obj = store.get(kind, f"{ns}/{name}")
            if obj is None:
                print(not_found(kind, name), file=sys.stderr)
                failed = True
                break
            spec = obj.get("spec") or {}
            size = int(spec.get(field, 1))
            if current_replicas is not None and size != current_replicas:
                print(
                    f"error: Expected replicas to be {current_replicas}, was {size}",
                    file=sys.stderr,
                )
                failed = True
                break
            try:
                store.update({**obj, "spec": {**spec, field: replicas}})
            except Conflict:
                continue
            print(f"{printers.kind_prefix(kind, obj)}/{name} scaled")
            break
        else:
            fail(f"{kind} {ns}/{name} changed on every attempt; try again")
    if failed:
        sys.exit(EXIT_RUNTIME)
