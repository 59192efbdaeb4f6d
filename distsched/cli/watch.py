"""``distsched get --watch``: after the table, one more row each time an object's row
changes, as ``kubectl get -w`` prints them, followed from the store's event stream
(``T:store:events``, read with XRANGE: the operator's ACL user may run it).

The watched objects and the objects their rows count (a Deployment's ReplicaSets and
pods...) are kept up to date from the events; a row is printed again when its cells
(ages aside) change, and once more, as it last was, when its object is deleted. A reader
that fell behind the stream's trimming lists everything again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from distsched.cli import observed
from distsched.output import GET_MINWIDTH, GET_PADDING
from distsched.store import DELETED, ObjectRef, Unresolved, decode_stream
from distsched.store.codec import STREAM_PAGE

Obj = dict[str, Any]
POLL_S = 0.25
_AGELESS = 0.0  # rows are compared as of this time, so that ages alone never count


def widths_of(lines: Sequence[Sequence[str]]) -> list[int]:
    """The column widths ``kubectl get``'s tabwriter gave a table."""
    widths: list[int] = []
    for cells in lines:
        for i, cell in enumerate(cells[:-1]):
            width = max(GET_MINWIDTH, len(cell) + GET_PADDING)
            if i < len(widths):
                widths[i] = max(widths[i], width)
            else:
                widths.append(width)
    return widths


def aligned(cells: Sequence[str], widths: Sequence[int]) -> str:
    """A row padded to the table's widths (a wider cell pushes the rest right)."""
    out = []
    for i, cell in enumerate(cells):
        if i < len(cells) - 1:
            out.append(cell.ljust(widths[i] if i < len(widths) else len(cell) + GET_PADDING))
        else:
            out.append(cell)
    return "".join(out)


class Watch:
    """The state a watch keeps: objects by (kind, key), the stream position, the rows last
    printed."""

    def __init__(
        self,
        store: Any,
        kind: str,
        related_kinds: Sequence[str],
        namespace: str | None,
        start_rv: int,
    ) -> None:
        self.store = store
        self.kind = kind
        self.kinds = {kind, *related_kinds}
        self.namespace = namespace
        self.rv = start_rv
        self.objects: dict[tuple[str, str], Obj] = {}
        self.copies: dict[tuple[str, str], ObjectRef] = {}
        self.shown: dict[str, list[str]] = {}

    def in_scope(self, kind: str, key: str) -> bool:
        if kind not in self.kinds:
            return False
        return self.namespace is None or "/" not in key or key.startswith(self.namespace + "/")

    def load(self, kind: str, objects: Sequence[Obj]) -> None:
        for obj in objects:
            meta = obj["metadata"]
            key = f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]
            self.objects[(kind, key)] = obj
            self.copies[(kind, key)] = ObjectRef(key, obj)

    def poll(self) -> tuple[list[Obj], list[Obj]] | None:
        """Apply the events after the position: (watched objects changed, deleted), or
        None when there was no event."""
        entries = self.store.client.xrange(
            self.store.keys.events, min=f"{self.rv + 1}-0", max="+", count=STREAM_PAGE
        )
        if not entries:
            return None
        head_id, head = entries[0]
        first = int(head.get(b"first") or head_id.decode().partition("-")[0])
        if first > self.rv + 1 and self.store.client.xlen(self.store.keys.events):
            return self.relist()
        changed: dict[str, Obj] = {}
        deleted: dict[str, Obj] = {}
        for event in decode_stream(entries, self.copies):
            self.rv = max(self.rv, event.rv)
            if not self.in_scope(event.kind, event.key):
                continue
            at = (event.kind, event.key)
            try:
                obj = event.obj
            except Unresolved:
                obj = self.store.get(event.kind, event.key)
                if obj is None:
                    continue
            if event.type == DELETED:
                self.objects.pop(at, None)
                if event.kind == self.kind:
                    deleted[event.key] = obj
                    changed.pop(event.key, None)
            else:
                self.objects[at] = obj
                if event.kind == self.kind:
                    changed[event.key] = obj
                    deleted.pop(event.key, None)
        return list(changed.values()), list(deleted.values())

    def relist(self) -> tuple[list[Obj], list[Obj]]:
        listing = self.store.snapshot(sorted(self.kinds))
        before = {k: o for (kind, k), o in self.objects.items() if kind == self.kind}
        self.objects.clear()
        self.copies.clear()
        for kind, items in listing.objects.items():
            self.load(kind, [o for key, o in items.items() if self.in_scope(kind, key)])
        self.rv = listing.rv
        now = {k: o for (kind, k), o in self.objects.items() if kind == self.kind}
        return list(now.values()), [o for k, o in before.items() if k not in now]

    def related(self, at: float) -> observed.Related:
        others = (o for (kind, _), o in self.objects.items() if kind != self.kind)
        return observed.Related.of(others, now=at)


def follow(
    watch: Watch,
    row: Callable[[Obj, observed.Related], list[str]],
    selected: Callable[[Obj], bool],
    emit: Callable[[Obj, observed.Related], None],
    *,
    timeout_s: float = 0.0,
) -> None:
    """``emit`` each selected watched object whose ``row`` changed (and each deleted
    one), with the Related its row is printed with, until ``timeout_s`` (0: for ever)."""
    deadline = time.monotonic() + timeout_s if timeout_s > 0 else None
    while deadline is None or time.monotonic() < deadline:
        result = watch.poll()
        if result is None:
            time.sleep(POLL_S)
            continue
        changed, deleted = result
        ageless = watch.related(_AGELESS)
        current = watch.related(observed.wall_clock())
        # A workload's row also changes with its pods: look at every watched object.
        candidates = {_key(o): o for (kind, _), o in watch.objects.items() if kind == watch.kind}
        candidates.update({_key(o): o for o in changed})
        for key, obj in sorted(candidates.items()):
            if not selected(obj):
                continue
            cells = row(obj, ageless)
            if watch.shown.get(key) != cells:
                watch.shown[key] = cells
                emit(obj, current)
        for obj in deleted:
            if selected(obj):
                watch.shown.pop(_key(obj), None)
                emit(obj, current)


def _key(obj: Obj) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"
