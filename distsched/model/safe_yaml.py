"""A YAML loader for untrusted manifests.

PyYAML's safe loader builds only plain data, but it still accepts three things we
refuse here:

* duplicate mapping keys (PyYAML keeps the last one silently; a duplicated ``name`` or
  ``cpu`` is almost always a mistake, and Kubernetes' strict decoding rejects it);
* alias bombs ("billion laughs"): aliases are cheap to load because PyYAML shares the
  node, but anything that walks the data pays for every expansion. We keep aliases (and
  ``<<`` merge keys), but refuse a document whose aliases would add more than
  ``MAX_ALIAS_EXPANSION`` nodes when expanded, and any recursive alias;
* deep nesting: libyaml's composer recurses in C and crashes the interpreter on ~100k
  nested brackets, so nodes are composed here, in Python, from libyaml's events, and
  nesting beyond ``MAX_DEPTH`` is refused.

Unquoted timestamps stay strings (``creationTimestamp: 2024-01-01T00:00:00Z``), as in
Kubernetes' YAML-to-JSON conversion.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.events import (
    AliasEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
    StreamStartEvent,
)
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.reader import ReaderError

MAX_ALIAS_EXPANSION = 10_000  # nodes that alias expansion may add to one document
MAX_DEPTH = 100  # nesting of collections; Kubernetes objects need about 15

_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"
_MERGE_TAG = "tag:yaml.org,2002:merge"

_BaseLoader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class ManifestLoader(_BaseLoader):  # type: ignore[misc,valid-type]
    """Safe loader with the composer replaced (see the module docstring)."""

    yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != _TIMESTAMP_TAG]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._anchors: dict[str, tuple[Node, int]] = {}
        self._composing: set[str] = set()
        self._expansion = 0

    # Composer interface used by BaseConstructor.get_data / our load_documents.
    def check_node(self) -> bool:
        if self.check_event(StreamStartEvent):
            self.get_event()
        return not self.check_event(StreamEndEvent)

    def get_node(self) -> Node | None:
        if self.check_event(StreamEndEvent):
            return None
        self.get_event()  # the document start
        node, _ = self._compose(0)
        self.get_event()  # the document end
        self._anchors = {}
        self._composing = set()
        self._expansion = 0
        return node

    def get_single_node(self) -> Node | None:
        """For ``yaml.load(..., Loader=ManifestLoader)``: libyaml's version would bypass
        the checks above."""
        if not self.check_node():
            return None
        node = self.get_node()
        if not self.check_event(StreamEndEvent):
            event: Any = self.get_event()
            raise ComposerError(
                None, None, "expected a single document in the stream", event.start_mark
            )
        return node

    def _compose(self, depth: int) -> tuple[Node, int]:
        """The next node and its size (number of nodes once aliases are expanded)."""
        event: Any = self.get_event()  # libyaml's events carry its own Mark type
        if isinstance(event, AliasEvent):
            return self._alias(event)
        if depth > MAX_DEPTH:
            raise ComposerError(
                None, None, f"nested more than {MAX_DEPTH} levels deep", event.start_mark
            )
        anchor = event.anchor
        if anchor is not None:
            self._composing.add(anchor)
        node: Node
        if isinstance(event, ScalarEvent):
            node, size = self._compose_scalar(event), 1
        elif isinstance(event, SequenceStartEvent):
            node, size = self._compose_sequence(event, depth)
        elif isinstance(event, MappingStartEvent):
            node, size = self._compose_mapping(event, depth)
        else:  # pragma: no cover - the parser only yields the events above here
            raise ComposerError(None, None, f"unexpected {type(event).__name__}", event.start_mark)
        if anchor is not None:
            self._composing.discard(anchor)
            self._anchors[anchor] = (node, size)
        return node, size

    def _alias(self, event: Any) -> tuple[Node, int]:
        anchor = event.anchor
        if anchor in self._composing:
            raise ComposerError(
                None, None, f"recursive alias *{anchor} is not allowed", event.start_mark
            )
        if anchor not in self._anchors:
            raise ComposerError(None, None, f"undefined alias *{anchor}", event.start_mark)
        node, size = self._anchors[anchor]
        self._expansion += size
        if self._expansion > MAX_ALIAS_EXPANSION:
            raise ComposerError(
                None,
                None,
                f"aliases expand the document by more than {MAX_ALIAS_EXPANSION} nodes",
                event.start_mark,
            )
        return node, size

    def _compose_scalar(self, event: Any) -> Node:
        tag = event.tag
        if tag is None or tag == "!":
            tag = self.resolve(ScalarNode, event.value, event.implicit)
        return ScalarNode(tag, event.value, event.start_mark, event.end_mark, style=event.style)

    def _compose_sequence(self, start: Any, depth: int) -> tuple[Node, int]:
        tag = start.tag
        if tag is None or tag == "!":
            tag = self.resolve(SequenceNode, None, start.implicit)
        node = SequenceNode(tag, [], start.start_mark, None, flow_style=start.flow_style)
        size = 1
        while not self.check_event(SequenceEndEvent):
            item, item_size = self._compose(depth + 1)
            node.value.append(item)
            size += item_size
        node.end_mark = self.get_event().end_mark
        return node, size

    def _compose_mapping(self, start: Any, depth: int) -> tuple[Node, int]:
        tag = start.tag
        if tag is None or tag == "!":
            tag = self.resolve(MappingNode, None, start.implicit)
        node = MappingNode(tag, [], start.start_mark, None, flow_style=start.flow_style)
        size = 1
        seen: set[tuple[str, str]] = set()
        while not self.check_event(MappingEndEvent):
            key, key_size = self._compose(depth + 1)
            if isinstance(key, ScalarNode) and key.tag != _MERGE_TAG:
                ident = (key.tag, key.value)
                if ident in seen:
                    raise ComposerError(
                        "while reading a mapping",
                        start.start_mark,
                        f'duplicate key "{key.value}"',
                        key.start_mark,
                    )
                seen.add(ident)
            value, value_size = self._compose(depth + 1)
            node.value.append((key, value))
            size += key_size + value_size
        node.end_mark = self.get_event().end_mark
        return node, size


def load_documents(text: str) -> Iterator[Any]:
    """The documents of a YAML stream, one at a time (None for an empty document).

    Raises yaml.YAMLError (with a mark) for syntax errors and refused input."""
    loader = ManifestLoader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            yield None if node is None else loader.construct_document(node)
    finally:
        loader.dispose()


def describe_yaml_error(exc: yaml.YAMLError) -> str:
    """``line L, column C: problem`` from a PyYAML error."""
    if isinstance(exc, ReaderError):
        return f"character #x{exc.character:04x} at position {exc.position}: {exc.reason}"
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        if mark is not None:
            return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
        return str(problem)
    return " ".join(str(exc).split())
