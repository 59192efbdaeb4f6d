"""The one error type for bad input: a manifest or object that cannot be accepted.

Its ``str`` is a single line that names where the problem is, from the outside in::

    pods.yaml: document 3 (Pod default/web-1): spec.containers[0].resources.requests.cpu:
        invalid quantity "12x"

(printed on one line). Parts that are unknown are left out: objects given through the
Python API have the source ``<api>`` and no document; whole-document problems (a YAML
syntax error) have no field. Document and item numbers count from 1; inside a
``kind: List`` the location reads ``document 2, item 3`` and the field path is relative
to that item.
"""

from __future__ import annotations

from typing import Any

API_SOURCE = "<api>"
STDIN_SOURCE = "<stdin>"


class ManifestError(ValueError):
    """A manifest (or an object given to ``from_dict``) is invalid."""

    def __init__(
        self,
        source: str,
        document: int | None,
        field: str,
        reason: str,
        *,
        item: int | None = None,
        kind: str = "",
        name: str = "",
    ) -> None:
        self.source = source
        self.document = document
        self.item = item
        self.kind = kind
        self.name = name  # "namespace/name" for pods, the name for nodes
        self.field = field
        self.reason = reason
        super().__init__(self._message())

    def _message(self) -> str:
        where = self.source
        if self.document is not None:
            where += f": document {self.document}"
            if self.item is not None:
                where += f", item {self.item}"
        if self.kind and self.name:
            where += f" ({self.kind} {self.name})"
        elif self.kind:
            where += f" ({self.kind})"
        parts = [where]
        if self.field:
            parts.append(self.field)
        parts.append(self.reason)
        return ": ".join(parts)

    def located(
        self,
        *,
        source: str | None = None,
        document: int | None = None,
        item: int | None = None,
        kind: str | None = None,
        name: str | None = None,
    ) -> ManifestError:
        """A copy with the given location parts filled in (others kept)."""
        return ManifestError(
            self.source if source is None else source,
            self.document if document is None else document,
            self.field,
            self.reason,
            item=self.item if item is None else item,
            kind=self.kind if kind is None else kind,
            name=self.name if name is None else name,
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only arguments survive pickling (rq serializes exceptions).
        return (
            _rebuild,
            (
                self.source,
                self.document,
                self.field,
                self.reason,
                self.item,
                self.kind,
                self.name,
            ),
        )


def _rebuild(
    source: str,
    document: int | None,
    field: str,
    reason: str,
    item: int | None,
    kind: str,
    name: str,
) -> ManifestError:
    return ManifestError(source, document, field, reason, item=item, kind=kind, name=name)
