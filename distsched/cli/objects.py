"""Objects: ``apply`` and ``delete`` (``get`` is :mod:`distsched.cli.get`), with
kubectl's kind names."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from distsched.cli import printers
from distsched.cli.common import EXIT_RUNTIME, bad_input, fail, make_context, redis_options
from distsched.cli.get import (
    Reader,
    current_namespace,
    namespace_option,
    not_found,
    parse_targets,
)
from distsched.cli.kindnames import KindNames, crd_reader
from distsched.cli.selectors import SelectorError, parse_label_selector
from distsched.model.manifest import Namespacing
from distsched.output import progress_bar

APPLY_CHUNK = 500
"""Objects per store call; more than this many objects get a progress bar."""


@click.command()
@click.option(
    "-f",
    "--filename",
    "paths",
    multiple=True,
    required=True,
    help="File, directory or - for stdin (repeatable, as kubectl's).",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Refuse kinds distsched does not act on instead of storing them.",
)
@namespace_option
@redis_options
def apply(paths: tuple[str, ...], strict: bool, namespace: str | None, **kwargs: Any) -> None:
    """Create or update objects from Kubernetes YAML/JSON manifests. distsched acts on
    Pod, Node, Namespace, PriorityClass, PodDisruptionBudget, Deployment, ReplicaSet,
    StatefulSet, DaemonSet, Job (the controller role makes the workloads' pods) and
    PodGroup (scheduling.x-k8s.io/v1alpha1 or scheduling.k8s.io/v1alpha2); every other
    kind (Service, ConfigMap, RBAC, PersistentVolumeClaim, CRDs, custom resources...) is
    stored as given and reported "stored (not scheduled)", or refused with --strict.
    Namespaced objects that name no namespace go to -n's, else the current namespace
    ($DISTSCHED_NAMESPACE, else default); with -n, one that names another is refused.

    Everything is read, validated and admitted (priority classes) before the first
    write: on bad input nothing is written and the exit code is 2. That includes an
    API version kube no longer serves (policy/v1beta1, extensions/v1beta1...) and an
    update kube would refuse: a pod's spec is immutable but for container images,
    activeDeadlineSeconds, added tolerations and removed scheduling gates.
    """
    from pathlib import Path

    import redis

    from distsched.apply import (
        located,
        prepare,
        stored_objects,
        stored_priority_classes,
        update_error,
    )
    from distsched.model import ManifestError
    from distsched.model.generic import StoredObject
    from distsched.model.manifest import Location, load_paths
    from distsched.store import Store, StoreError

    ctx = make_context(kwargs)
    store = Store(ctx.client(), ctx.keys)
    locations: list[Location] = []
    try:
        objects = load_paths(
            paths,
            locations=locations,
            strict=strict,
            crds=crd_reader(store),
            namespace=namespacing(namespace),
        )
    except ManifestError as exc:
        bad_input(str(exc))
    except OSError as exc:
        bad_input(f"{exc.filename or ', '.join(paths)}: {exc.strerror or exc}")
    if not objects:
        where = ", ".join(paths)
        if all(p != "-" and Path(p).is_dir() for p in paths):
            bad_input(f"{where}: no manifests: the directory has no .yaml, .yml or .json file")
        bad_input(f"{where}: no object in the input")
    try:
        stored = stored_objects(store, objects)
        dicts = prepare(objects, locations, stored_priority_classes(store), stored)
    except ManifestError as exc:
        bad_input(str(exc))
    done: dict[int, str] = {}

    def record(offset: int) -> Callable[[int, str], None]:
        return lambda i, action: done.__setitem__(offset + i, action)

    def report_written() -> None:
        """One line per object written, in file order (also before an error)."""
        for i in sorted(done):
            obj = objects[i]
            action = done[i]
            if isinstance(obj, StoredObject):
                action = "stored" if action == "created" else action
                action += " (not scheduled)"
            print(f"{obj.kind.lower()}/{obj.metadata.name} {action}")

    try:
        if len(dicts) <= APPLY_CHUNK:
            store.apply_many(dicts, applied=record(0))
        else:
            with progress_bar("applying") as progress:
                task = progress.add_task("apply", total=len(dicts))
                for start in range(0, len(dicts), APPLY_CHUNK):
                    store.apply_many(dicts[start : start + APPLY_CHUNK], applied=record(start))
                    progress.update(task, completed=len(done))
    except StoreError as exc:
        report_written()
        summary = f"({len(done)} of {len(dicts)} objects were applied before it)"
        refused = update_error(exc)
        if refused is None:
            fail(f"{exc} {summary}")
        # Refused at write time: someone changed the object since it was checked.
        kind = getattr(exc, "kind", "Pod")
        key = getattr(exc, "key", "")
        i = next(i for i, o in enumerate(objects) if (o.kind, o.key) == (kind, key))
        bad_input(f"{located(refused, locations[i], kind, key)} {summary}")
    except redis.RedisError:
        report_written()  # then the group's one line for the Redis error (exit 1)
        raise
    report_written()


@click.command()
@click.argument("args", nargs=-1, metavar="[KIND[,KIND...] [NAME...] | KIND/NAME...]")
@click.option(
    "-f",
    "--filename",
    "paths",
    multiple=True,
    help="Delete the objects a file, directory or - (stdin) names (repeatable).",
)
@namespace_option
@click.option("-l", "--selector", default="", help="Delete the objects of KIND it selects.")
@click.option("--ignore-not-found", is_flag=True, help="An object that does not exist is no error.")
@redis_options
def delete(
    args: tuple[str, ...],
    paths: tuple[str, ...],
    namespace: str | None,
    selector: str,
    ignore_not_found: bool,
    **kwargs: Any,
) -> None:
    """Delete objects, as kubectl delete does: `delete pod web-1 web-2`, `delete
    deploy/web`, `delete -f shop.yaml`, `delete pods -l app=web` (kubectl's kind names;
    a custom resource by the names its stored CustomResourceDefinition gives, or
    Kind.group). An owner's pods go with it when a controller runs. A missing object is
    kubectl's `Error from server (NotFound)` line and exit code 1, unless
    --ignore-not-found."""
    from distsched.model import ManifestError
    from distsched.model.manifest import load_paths
    from distsched.store import NotFound, Store

    ctx = make_context(kwargs)
    store = Store(ctx.client(), ctx.keys)
    names = KindNames(lambda: store)
    ns = current_namespace(namespace)
    reader = Reader(store, names, ns)
    targets: list[tuple[str, str, str]] = []  # (store kind, key, name)
    if paths:
        if args or selector:
            bad_input("give either -f or KIND [NAME...], not both")
        try:
            for loaded in load_paths(
                paths, crds=crd_reader(store), namespace=namespacing(namespace)
            ):
                targets.append((loaded.kind, loaded.key, loaded.metadata.name))
        except ManifestError as exc:
            bad_input(str(exc))
        except OSError as exc:
            bad_input(f"{exc.filename or ', '.join(paths)}: {exc.strerror or exc}")
    elif not args:
        bad_input("give KIND NAME, KIND/NAME, KIND -l SELECTOR or -f FILE")
    else:
        try:
            queries, _, _ = parse_targets(args, names)
            labels = parse_label_selector(selector)
        except (ValueError, SelectorError) as exc:
            bad_input(str(exc))
        for query in queries:
            if not query.names and not selector:
                bad_input(
                    f"resource(s) were provided, but no name was specified: give "
                    f"{printers.resource_name(query.kind)} NAME or -l SELECTOR"
                )
            cluster = names.cluster_scoped(query.kind)
            for name in query.names:
                obj = reader.get(query.kind, name, ns)
                key = name if cluster else f"{ns}/{name}"
                if obj is not None:
                    meta = obj["metadata"]
                    key = f"{meta['namespace']}/{name}" if meta.get("namespace") else name
                targets.append((query.kind, key, name))
            if selector:
                for obj in reader.list(query.kind):
                    meta = obj["metadata"]
                    if labels.matches(meta.get("labels")) and meta["name"] not in query.names:
                        key = (
                            f"{meta['namespace']}/{meta['name']}"
                            if meta.get("namespace")
                            else meta["name"]
                        )
                        targets.append((query.kind, key, meta["name"]))
    missing = False
    for kind, key, name in targets:
        try:
            gone = store.delete(kind, key)
        except NotFound:
            if not ignore_not_found:
                print(not_found(kind, name), file=sys.stderr)
                missing = True
            continue
        print(f'{printers.kind_prefix(kind, gone)} "{name}" deleted')
    if missing:
        sys.exit(EXIT_RUNTIME)


def namespacing(namespace: str | None) -> Namespacing:
    """-n's namespace (enforced) or the current one, for the objects of a file."""
    return Namespacing(current_namespace(namespace), enforced=namespace is not None)


def _key(obj: dict[str, Any]) -> str:
    """The store key of an object as read: ``ns/name``, or ``name`` when cluster-scoped."""
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else str(meta["name"])
