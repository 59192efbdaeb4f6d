"""Objects: ``apply``, ``get`` and ``delete``, with kubectl's kind names and table rows."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from distsched.cli.common import bad_input, fail, make_context, redis_options, warn
from distsched.cli.kindnames import KindNames, crd_reader
from distsched.model.errors import ManifestError
from distsched.model.kinds import ALL_KINDS
from distsched.model.podgroups import PodGroup, group_of_object, podgroup_status
from distsched.output import print_json, print_table, print_yaml, progress_bar


def headers(kind: str, *, cluster_scoped: bool = False) -> list[str]:
    if kind not in ALL_KINDS:  # kept as given: what every object has
        return ["NAME", "KIND", "APIVERSION"] if cluster_scoped else STORED_HEADERS
    if kind == "Pod":
        return ["NAMESPACE", "NAME", "NODE", "PRIORITY"]
    if kind == "Node":
        return ["NAME", "STATUS", "CPU", "MEMORY"]
    if kind == "Namespace":
        return ["NAME", "LABELS"]
    if kind == "PriorityClass":
        return ["NAME", "VALUE", "GLOBAL-DEFAULT", "PREEMPTION"]
    if kind == "PodDisruptionBudget":
        return ["NAMESPACE", "NAME", "MIN AVAILABLE", "MAX UNAVAILABLE"]
    if kind == "PodGroup":  # scheduler-plugins' printer columns (MIN: minMember), SCHEDULED
        return ["NAMESPACE", "NAME", "PHASE", "MIN", "SCHEDULED", "RUNNING", "SUCCEEDED", "FAILED"]
    return ["NAMESPACE", "NAME", "DESIRED"]


STORED_HEADERS = ["NAMESPACE", "NAME", "KIND", "APIVERSION"]


def row(kind: str, o: dict[str, Any], *, cluster_scoped: bool = False) -> tuple[Any, ...]:
    meta, spec = o["metadata"], o.get("spec") or {}
    if kind not in ALL_KINDS:
        cells = (meta["name"], o.get("kind", ""), o.get("apiVersion", ""))
        return cells if cluster_scoped else (meta.get("namespace", ""), *cells)
    if kind == "Pod":
        return (
            meta.get("namespace", ""),
            meta["name"],
            spec.get("nodeName", "") or "<pending>",
            spec.get("priority", 0) or 0,
        )
    if kind == "Node":
        return (
            meta["name"],
            "SchedulingDisabled" if spec.get("unschedulable") else "Ready",
            o.get("status", {}).get("allocatable", {}).get("cpu", ""),
            o.get("status", {}).get("allocatable", {}).get("memory", ""),
        )
    if kind == "Namespace":
        labels = meta.get("labels") or {}
        return (meta["name"], ",".join(f"{k}={v}" for k, v in sorted(labels.items())))
    if kind == "PriorityClass":
        return (
            meta["name"],
            o.get("value", 0),
            bool(o.get("globalDefault")),
            o.get("preemptionPolicy") or "PreemptLowerPriority",
        )
    if kind == "PodDisruptionBudget":
        return (
            meta.get("namespace", ""),
            meta["name"],
            spec.get("minAvailable", "N/A"),
            spec.get("maxUnavailable", "N/A"),
        )
    if kind == "PodGroup":
        status = o.get("status") or {}
        try:
            min_member: Any = PodGroup.from_dict(o).min_member
        except ManifestError:
            min_member = "?"
        return (
            meta.get("namespace", ""),
            meta["name"],
            status.get("phase", ""),
            min_member,
            *(status.get(n, 0) for n in ("scheduled", "running", "succeeded", "failed")),
        )
    if kind == "Job":
        desired: Any = spec.get("parallelism", 1)
    elif kind == "DaemonSet":
        desired = "per node"
    else:
        desired = spec.get("replicas", 1)
    return (meta.get("namespace", ""), meta["name"], desired)


def add_podgroup_status(groups: list[dict[str, Any]], pods: list[dict[str, Any]]) -> None:
    """Set each stored PodGroup's ``status`` to the one :func:`podgroup_status` computes
    from ``pods`` (keys of a stored status it does not compute, such as v1alpha2's
    conditions, stay). A group that does not decode keeps its status, with a warning."""
    members: dict[str, list[dict[str, Any]]] = {}
    for pod in pods:
        group_key = group_of_object(pod)
        if group_key:
            members.setdefault(group_key, []).append(pod)
    for i, obj in enumerate(groups):
        try:
            group = PodGroup.from_dict(obj)
        except ManifestError as exc:
            warn(f"podgroup {exc.name or i}: status not computed: {exc.field}: {exc.reason}")
            continue
        status = podgroup_status(group, members.get(group.key, ()))
        groups[i] = {**obj, "status": {**(obj.get("status") or {}), **status}}


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
@redis_options
def apply(paths: tuple[str, ...], strict: bool, **kwargs: Any) -> None:
    """Create or update objects from Kubernetes YAML/JSON manifests. distsched acts on
    Pod, Node, Namespace, PriorityClass, PodDisruptionBudget, Deployment, ReplicaSet,
    StatefulSet, DaemonSet, Job (the controller role makes the workloads' pods) and
    PodGroup (scheduling.x-k8s.io/v1alpha1 or scheduling.k8s.io/v1alpha2); every other
    kind (Service, ConfigMap, RBAC, PersistentVolumeClaim, CRDs, custom resources...) is
    stored as given and reported "stored (not scheduled)", or refused with --strict.

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
        objects = load_paths(paths, locations=locations, strict=strict, crds=crd_reader(store))
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
@click.argument("kind")
@click.argument("name")
@click.option("-n", "--namespace", default="default", show_default=True)
@redis_options
def delete(kind: str, name: str, namespace: str, **kwargs: Any) -> None:
    """Delete an object (pod, node, deployment, service, ...: kubectl's kind names; a
    custom resource by the names its stored CustomResourceDefinition gives, or
    Kind.group)."""
    from distsched.store import NotFound, Store

    ctx = make_context(kwargs)
    names = KindNames(lambda: Store(ctx.client(), ctx.keys))
    try:
        store_kind = names.resolve(kind)
    except ValueError as exc:
        bad_input(str(exc))
    store = Store(ctx.client(), ctx.keys)
    cluster = names.cluster_scoped(store_kind)
    keys = [f"{namespace}/{name}", name]  # a custom kind of unknown scope: either
    if cluster is not None:
        keys = [name] if cluster else keys[:1]
    for key in keys:
        try:
            store.delete(store_kind, key)
        except NotFound:
            continue
        print(f"{store_kind.lower()}/{name} deleted")
        return
    fail(f"{store_kind.lower()} {keys[0]!r} not found")


@click.command()
@click.argument("kind")
@click.option("-n", "--namespace", default=None, help="Only this namespace (default: all).")
@click.option("-A", "--all-namespaces", is_flag=True, help="Objects of every namespace.")
@click.option("-o", "--output", type=click.Choice(["table", "json", "yaml"]), default="table")
@redis_options
def get(kind: str, namespace: str | None, all_namespaces: bool, output: str, **kwargs: Any) -> None:
    """List objects of one or more kinds (``pods``, ``nodes,pods``, ``deploy``, ``svc``,
    ``clusterroles``, a custom resource's plural, ...). A stored record that cannot be
    decoded is left out with a warning naming it. A PodGroup's status (phase and pod
    counts) is computed from its pods as read."""
    from distsched.store import Store, Undecodable

    def skip(error: Undecodable) -> None:
        warn(f"skipping {error}")

    ctx = make_context(kwargs)
    names = KindNames(lambda: Store(ctx.client(), ctx.keys))
    try:
        kinds = names.parse(kind)
    except ValueError as exc:
        bad_input(str(exc))
    store = Store(ctx.client(), ctx.keys)
    listed: list[tuple[str, list[dict[str, Any]]]] = []
    for store_kind in kinds:
        cluster = names.cluster_scoped(store_kind)
        ns = None if all_namespaces or cluster else namespace
        items, _ = store.list(store_kind, namespace=ns, on_undecodable=skip)
        items.sort(key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
        if store_kind == "PodGroup" and items:
            add_podgroup_status(items, store.list("Pod", namespace=ns, on_undecodable=skip)[0])
        listed.append((store_kind, items))
    if output in ("json", "yaml"):
        items = [o for _, group in listed for o in group]
        everything = {"apiVersion": "v1", "kind": "List", "items": items}
        (print_json if output == "json" else print_yaml)(everything)
        return
    for store_kind, items in listed:
        cluster = bool(names.cluster_scoped(store_kind))
        rows = [row(store_kind, o, cluster_scoped=cluster) for o in items]
        print_table(None, headers(store_kind, cluster_scoped=cluster), rows)
