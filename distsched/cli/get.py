"""``distsched get``: objects as ``kubectl get`` shows them.

``get KIND[,KIND...] [NAME...]``, ``get KIND/NAME...`` and ``get all``; ``-n NS`` (default:
the current namespace, ``$DISTSCHED_NAMESPACE`` or ``default``), ``-A``; ``-l`` and
``--field-selector``; ``-o wide|name|json|yaml``. Tables come from
:mod:`distsched.cli.printers`; several kinds print one block each, names prefixed with
the kind (``pod/web-1``, ``deployment.apps/web``) and a blank line between blocks. A name
that does not exist is kubectl's ``Error from server (NotFound): pods "x" not found`` on
stderr and exit code 1, after what was found.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import click

from distsched import event_log
from distsched.cli import observed, printers
from distsched.cli.common import EXIT_RUNTIME, bad_input, make_context, redis_options, warn
from distsched.cli.kindnames import KindNames
from distsched.cli.selectors import (
    FieldSelector,
    LabelSelector,
    SelectorError,
    parse_field_selector,
    parse_label_selector,
)
from distsched.model.errors import ManifestError
from distsched.model.podgroups import PodGroup, group_of_object, podgroup_status
from distsched.output import format_table, print_json, print_yaml

Obj = dict[str, Any]
Events = list[Obj]

NAMESPACE_ENV = "DISTSCHED_NAMESPACE"
DEFAULT_NAMESPACE = "default"
ALL_KINDS = (
    "Pod",
    "Service",
    "DaemonSet",
    "Deployment",
    "ReplicaSet",
    "StatefulSet",
    "CronJob",
    "Job",
)
"""What ``get all`` lists: kubectl's ``all`` category, in its order."""
OUTPUTS = ("table", "wide", "name", "json", "yaml")


def current_namespace(namespace: str | None) -> str:
    """``-n``'s namespace, else ``$DISTSCHED_NAMESPACE``, else ``default`` (kubectl's
    current namespace)."""
    return namespace or os.environ.get(NAMESPACE_ENV) or DEFAULT_NAMESPACE


def namespace_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "-n",
        "--namespace",
        default=None,
        help=f"Namespace [default: ${NAMESPACE_ENV}, else {DEFAULT_NAMESPACE}].",
    )(fn)


@dataclass
class Query:
    """One kind to read, and the names asked for (empty: every object in scope)."""

    kind: str
    names: list[str] = field(default_factory=list)


def parse_targets(args: tuple[str, ...], names: KindNames) -> tuple[list[Query], bool, bool]:
    """kubectl's argument forms: ``KIND[,KIND] [NAME...]``, ``KIND/NAME...``, ``all``.
    Returns the queries, whether several kinds are asked for (kind-prefixed names), and
    whether exactly one object is named (``-o yaml`` prints it without a List)."""
    if all("/" in a for a in args):
        queries: list[Query] = []
        for arg in args:
            word, _, name = arg.partition("/")
            if not name:
                raise ValueError(
                    f"arguments in resource/name form must have a single resource and name: {arg!r}"
                )
            kind = names.resolve(word)
            query = next((q for q in queries if q.kind == kind), None)
            if query is None:
                queries.append(query := Query(kind))
            query.names.append(name)
        return queries, len(queries) > 1, len(args) == 1
    if any("/" in a for a in args):
        raise ValueError(
            "there is no need to specify a resource type as a separate argument when "
            "passing arguments in resource/name form"
        )
    words = [w for w in args[0].split(",") if w]
    kinds: list[str] = []
    for word in words:
        for kind in ALL_KINDS if word.lower() == "all" else (names.resolve(word),):
            if kind not in kinds:
                kinds.append(kind)
    object_names = list(args[1:])
    if object_names and len(kinds) > 1:
        raise ValueError("a name can be given with one kind only (or use KIND/NAME)")
    multi = len(kinds) > 1 or any(w.lower() == "all" for w in words)
    return [Query(k, list(object_names)) for k in kinds], multi, len(object_names) == 1


class Reader:
    """The store's objects of each kind in the namespace scope, read once per kind."""

    def __init__(self, store: Any, names: KindNames, namespace: str | None) -> None:
        from distsched.store import Undecodable

        self.store = store
        self.names = names
        self.namespace = namespace  # None: every namespace
        self.rv: int | None = None  # the oldest resourceVersion a list was read at
        self.events_seen: Any = None  # the event log's last id at its last read
        self._lists: dict[str, list[Obj]] = {}

        def skip(error: Undecodable) -> None:
            warn(f"skipping {error}")

        self._skip = skip

    def cluster_scoped(self, kind: str) -> bool:
        return bool(self.names.cluster_scoped(kind))

    def list(self, kind: str) -> list[Obj]:
        if kind not in self._lists:
            ns = None if self.cluster_scoped(kind) else self.namespace
            items, rv = self.store.list(kind, namespace=ns, on_undecodable=self._skip)
            self.rv = rv if self.rv is None else min(self.rv, rv)
            items.sort(key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
            if kind == "Event":  # the stored ones (applied), then the scheduler's own
                items = merge_events(items, self.recorded_events(ns))
            self._lists[kind] = items
        return self._lists[kind]

    def recorded_events(self, namespace: str | None) -> Events:
        """The event log's events; ``events_seen`` becomes its last entry's id as of
        before the read (a watch goes on from there)."""
        self.events_seen = self.last_event_id()
        return event_log.read(self.store.client, self.store.keys, namespace=namespace)

    def last_event_id(self) -> Any:
        return event_log.newest_ids(self.store.client, self.store.keys)

    def get(self, kind: str, name: str, namespace: str) -> Obj | None:
        if kind == "Event":
            for event in self.recorded_events(namespace):
                if event["metadata"]["name"] == name:
                    return event
        scope = self.names.cluster_scoped(kind)
        keys = [name] if scope else [f"{namespace}/{name}"]
        if scope is None:  # a custom kind of unknown scope: either
            keys.append(name)
        for key in keys:
            obj = self.store.get(kind, key)
            if obj is not None:
                return obj  # type: ignore[no-any-return]
        return None


def merge_events(stored: list[Obj], recorded: list[Obj]) -> list[Obj]:
    """Events in the order of their last occurrence (``kubectl events``' order; names
    would put a pod's events apart from the others of the moment)."""
    every = [*stored, *recorded]
    every.sort(key=lambda e: observed.parse_timestamp(observed.event_last_seen(e)) or 0.0)
    return every


def add_podgroup_status(groups: list[Obj], pods: list[Obj]) -> None:
    """Set each PodGroup's ``status`` to the one :func:`podgroup_status` computes from
    ``pods`` (keys of a stored status it does not compute, such as v1alpha2's conditions,
    stay). A group that does not decode keeps its status, with a warning."""
    members: dict[str, list[Obj]] = {}
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


def not_found(kind: str, name: str) -> str:
    return f'Error from server (NotFound): {printers.resource_name(kind)} "{name}" not found'


def select(kind: str, items: list[Obj], labels: LabelSelector, fields: FieldSelector) -> list[Obj]:
    return [
        o
        for o in items
        if labels.matches((o.get("metadata") or {}).get("labels")) and fields.matches(kind, o)
    ]


@dataclass
class Layout:
    """How rows are laid out: ``-o wide``, kind-prefixed names, a NAMESPACE column."""

    wide: bool
    with_kind: bool
    with_namespace: Callable[[str], bool]

    def header(self, kind: str) -> list[str]:
        header = printers.columns(kind, wide=self.wide)
        return ["NAMESPACE", *header] if self.with_namespace(kind) else header

    def row(self, kind: str, obj: Obj, related: observed.Related) -> list[str]:
        row = printers.cells(kind, obj, related, wide=self.wide)
        if self.with_kind:
            row[0] = f"{printers.kind_prefix(kind, obj)}/{row[0]}"
        if self.with_namespace(kind):
            row.insert(0, str(obj["metadata"].get("namespace", "")))
        return row


def render_blocks(
    blocks: list[tuple[str, list[Obj]]], related: observed.Related, layout: Layout
) -> str:
    """The tables of ``blocks`` (kind, objects), a blank line between two."""
    out = []
    for kind, items in blocks:
        rows = [layout.row(kind, obj, related) for obj in items]
        out.append(format_table(layout.header(kind), rows))
    return "\n\n".join(out)


@click.command()
@click.argument("args", nargs=-1, required=True, metavar="KIND[,KIND...] [NAME...] | KIND/NAME...")
@namespace_option
@click.option("-A", "--all-namespaces", is_flag=True, help="Objects of every namespace.")
@click.option(
    "-o",
    "--output",
    type=click.Choice(OUTPUTS),
    default="table",
    help="wide: more columns; name: KIND/NAME lines; json/yaml: the objects (one named "
    "object alone, else a List).",
)
@click.option(
    "-l",
    "--selector",
    default="",
    help="Label selector: app=web, app!=web, 'app in (a,b)', '!app'.",
)
@click.option(
    "--field-selector",
    default="",
    help="spec.nodeName=NODE, status.phase=Pending, metadata.name=NAME, metadata.namespace=NS.",
)
@click.option(
    "-w", "--watch", is_flag=True, help="After the table, a row each time an object changes."
)
@click.option(
    "--request-timeout",
    default="0",
    help="How long --watch watches (5s, 2m, or seconds; 0: until Ctrl-C).",
)
@redis_options
def get(
    args: tuple[str, ...],
    namespace: str | None,
    all_namespaces: bool,
    output: str,
    selector: str,
    field_selector: str,
    watch: bool,
    request_timeout: str,
    **kwargs: Any,
) -> None:
    """Show objects, as kubectl get does: `get pods`, `get pod web-1`, `get deploy,sts`,
    `get pod/web-1 node/n1`, `get all`, and every kind apply stores (`svc`, `clusterroles`,
    a custom resource's plural...). Without -n or -A, the current namespace
    ($DISTSCHED_NAMESPACE, else default).

    A Deployment's, ReplicaSet's, StatefulSet's, DaemonSet's and Job's READY, CURRENT,
    UP-TO-DATE and AVAILABLE count its pods in the store (no kubelet runs them: a bound
    pod counts as ready); a PodGroup's status is computed from its pods as read. A stored
    record that cannot be decoded is left out with a warning naming it."""
    from distsched.store import Store

    ctx = make_context(kwargs)
    names = KindNames(lambda: Store(ctx.client(), ctx.keys))
    try:
        queries, with_kind, single = parse_targets(args, names)
        labels = parse_label_selector(selector)
        fields = parse_field_selector(field_selector)
        for query in queries:
            fields.check(query.kind, printers.resource_name(query.kind))
        timeout_s = parse_duration(request_timeout)
    except (ValueError, SelectorError) as exc:
        bad_input(str(exc))
    if watch and (len(queries) != 1 or output not in ("table", "wide", "name")):
        bad_input("--watch takes one kind, and -o table, wide or name")
    ns = current_namespace(namespace)
    store = Store(ctx.client(), ctx.keys)
    reader = Reader(store, names, None if all_namespaces else ns)
    blocks: list[tuple[str, list[Obj]]] = []
    missing: list[str] = []
    for query in queries:
        if query.names:
            items = []
            for name in query.names:
                obj = reader.get(query.kind, name, ns)
                if obj is None:
                    missing.append(not_found(query.kind, name))
                else:
                    items.append(obj)
        else:
            items = reader.list(query.kind)
        items = select(query.kind, items, labels, fields)
        if query.kind == "PodGroup" and items:
            add_podgroup_status(items, reader.list("Pod"))
        blocks.append((query.kind, items))
    found = [o for _, items in blocks for o in items]
    layout = Layout(
        wide=output == "wide",
        with_kind=with_kind,
        with_namespace=lambda k: all_namespaces and not reader.cluster_scoped(k),
    )
    if output in ("json", "yaml"):
        if single and len(found) == 1 and not missing:
            document: Any = found[0]
        else:
            document = {"apiVersion": "v1", "kind": "List", "items": found}
        if found or not missing:
            (print_json if output == "json" else print_yaml)(document)
    elif output == "name":
        for kind, items in blocks:
            for obj in items:
                print(f"{printers.kind_prefix(kind, obj)}/{obj['metadata']['name']}")
    else:
        related_kinds = {
            r
            for kind, items in blocks
            if items or watch
            for r in printers.RELATED_KINDS.get(kind, ())
        }
        related = observed.Related.of(
            o for kind in sorted(related_kinds) for o in reader.list(kind)
        )
        shown = [(kind, items) for kind, items in blocks if items]
        if shown:
            print(render_blocks(shown, related, layout), flush=True)
        elif not missing and not watch:
            scoped = any(not reader.cluster_scoped(q.kind) for q in queries)
            where = f" in {ns} namespace" if scoped and not all_namespaces else ""
            print(f"No resources found{where}.", file=sys.stderr)
    for line in missing:
        print(line, file=sys.stderr)
    if watch and queries[0].kind == "Event":
        sys.stdout.flush()
        follow_events(reader, queries[0], blocks[0][1], (labels, fields), output, layout, timeout_s)
    elif watch:
        sys.stdout.flush()
        follow_changes(
            store, reader, queries[0], blocks[0][1], (labels, fields), output, layout, timeout_s
        )
    if missing:
        sys.exit(EXIT_RUNTIME)


def parse_duration(text: str) -> float:
    """``5s``, ``2m``, ``1h`` or plain seconds."""
    text = text.strip()
    scale = {"s": 1, "m": 60, "h": 3600}.get(text[-1:], 0)
    number = text[:-1] if scale else text
    try:
        value = float(number) * (scale or 1)
    except ValueError:
        raise ValueError(f"--request-timeout: not a duration: {text!r} (5s, 2m, 1h)") from None
    if value < 0:
        raise ValueError(f"--request-timeout: must not be negative: {text!r}")
    return value


@dataclass
class WatchPrinter:
    """The rows a watch prints after its table: aligned with the table's columns (a
    wider cell pushes the rest right), the header first when the table was empty."""

    kind: str
    output: str
    layout: Layout
    listed: list[Obj]
    now: observed.Related
    widths: list[int] = field(init=False)
    printed_header: bool = field(init=False)

    def __post_init__(self) -> None:
        from distsched.cli.watch import widths_of

        rows = [self.layout.row(self.kind, o, self.now) for o in self.listed]
        self.widths = widths_of([self.layout.header(self.kind), *rows])
        self.printed_header = bool(self.listed)

    def emit(self, obj: Obj, related: observed.Related) -> None:
        from distsched.cli.watch import aligned, widths_of

        if self.output == "name":
            print(f"{printers.kind_prefix(self.kind, obj)}/{obj['metadata']['name']}", flush=True)
            return
        cells = self.layout.row(self.kind, obj, related)
        if not self.printed_header:
            header = self.layout.header(self.kind)
            self.widths = widths_of([header, cells])
            print(aligned(header, self.widths), flush=True)
            self.printed_header = True
        print(aligned(cells, self.widths), flush=True)


def watch_selector(
    query: Query, selectors: tuple[LabelSelector, FieldSelector]
) -> Callable[[Obj], bool]:
    """Whether a watched object is one the query asks for (its names, -l, --field-selector)."""
    labels, fields = selectors

    def selected(obj: Obj) -> bool:
        meta = obj["metadata"]
        wanted = not query.names or meta["name"] in query.names
        return wanted and labels.matches(meta.get("labels")) and fields.matches(query.kind, obj)

    return selected


def follow_events(
    reader: Reader,
    query: Query,
    listed: list[Obj],
    selectors: tuple[LabelSelector, FieldSelector],
    output: str,
    layout: Layout,
    timeout_s: float,
) -> None:
    """``get events --watch``: a row each time an event is recorded again or anew (the
    scheduler's event log is read again whenever its last entry changed)."""
    from distsched.cli.watch import POLL_S

    selected = watch_selector(query, selectors)
    out = WatchPrinter("Event", output, layout, listed, observed.Related())
    ageless = observed.Related(now=0.0)

    def key(event: Obj) -> str:
        return f"{event['metadata'].get('namespace', '')}/{event['metadata']['name']}"

    shown = {key(e): layout.row("Event", e, ageless) for e in listed}
    seen = reader.events_seen
    deadline = time.monotonic() + timeout_s if timeout_s > 0 else None
    with contextlib.suppress(KeyboardInterrupt):
        while deadline is None or time.monotonic() < deadline:
            if reader.last_event_id() == seen:
                time.sleep(POLL_S)
                continue
            now = observed.Related()
            for event in reader.recorded_events(reader.namespace):
                cells = layout.row("Event", event, ageless)
                if selected(event) and shown.get(key(event)) != cells:
                    shown[key(event)] = cells
                    out.emit(event, now)
            seen = reader.events_seen


def follow_changes(
    store: Any,
    reader: Reader,
    query: Query,
    listed: list[Obj],
    selectors: tuple[LabelSelector, FieldSelector],
    output: str,
    layout: Layout,
    timeout_s: float,
) -> None:
    """``--watch``: the rows :mod:`distsched.cli.watch` finds changed, aligned with the
    table above them (the header comes with the first row if the table was empty)."""
    from distsched.cli.watch import Watch, follow

    kind = query.kind
    related_kinds = printers.RELATED_KINDS.get(kind, ())
    lists = {k: reader.list(k) for k in (kind, *related_kinds)}
    start = reader.rv if reader.rv is not None else store.resource_version()
    namespace = None if reader.cluster_scoped(kind) else reader.namespace
    state = Watch(store, kind, related_kinds, namespace, start)  # replays from the oldest list
    for listed_kind, objects in lists.items():
        state.load(listed_kind, objects)
    ageless = state.related(0.0)
    out = WatchPrinter(kind, output, layout, listed, state.related(observed.wall_clock()))
    for obj in listed:
        meta = obj["metadata"]
        state.shown[f"{meta.get('namespace', '')}/{meta['name']}"] = layout.row(kind, obj, ageless)
    selected = watch_selector(query, selectors)

    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C ends a watch, as kubectl's
        follow(state, lambda o, r: layout.row(kind, o, r), selected, out.emit, timeout_s=timeout_s)
