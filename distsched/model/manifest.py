"""Reading Kubernetes manifests: YAML or JSON, one or many documents, ``kind: List``.

All or nothing: ``load_manifests`` / ``load_path`` return every object or raise the
first ManifestError, so a caller that applies the result writes nothing on bad input.

Refused input (each a ManifestError naming source, document and, when known, field):
more than ``MAX_MANIFEST_BYTES`` per file, bytes that are not UTF-8, YAML syntax errors,
duplicate mapping keys, alias bombs and deep nesting (see safe_yaml), a document that
is not an object, a missing or unknown apiVersion/kind, any invalid field, and the same
object (kind + namespace/name) twice in one load. Empty documents are skipped but still
counted, so document numbers match the ``---`` separators in the file.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import yaml

from distsched.model.decode import KINDS, check_header, describe, node_from_dict, pod_from_dict
from distsched.model.errors import STDIN_SOURCE, ManifestError
from distsched.model.fields import Fields, quote, type_name
from distsched.model.kinds import ALL_KINDS, OTHER_KINDS
from distsched.model.objects import Node, Pod
from distsched.model.podgroups import PodGroup, podgroup_from_dict
from distsched.model.safe_yaml import describe_yaml_error, load_documents
from distsched.model.workloads import KindObject
from distsched.model.workloads import object_from_dict as kind_from_dict

MAX_MANIFEST_BYTES = 8 * 1024 * 1024
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
LIST_KINDS = ("List", "PodList", "NodeList")

KubeObject = Pod | Node | KindObject | PodGroup


class _BadJson(ValueError):
    """Valid JSON syntax with content we refuse (duplicate keys, NaN)."""


class _NotJson(Exception):
    """Not JSON at all: args[0] is the ManifestError to raise if YAML fails too."""


def load_manifests(source_name: str, text: str | bytes) -> list[KubeObject]:
    """Every object in ``text`` (YAML or JSON), in document order."""
    return _Loader().load(source_name, text)


Location = tuple[str, int, int | None]
"""Where an object was read: (source, document, item inside a List or None)."""


def load_path(
    path: str | os.PathLike[str], *, locations: list[Location] | None = None
) -> list[KubeObject]:
    """Every object in a file, in a directory's ``*.yaml``/``*.yml``/``*.json`` files
    (sorted by name, not recursive), or on stdin when ``path`` is ``"-"``. With
    ``locations``, the location of each object is appended to it, in the same order
    (for errors found after loading, such as priority admission)."""
    loader = _Loader(locations)
    if str(path) == "-":
        data = sys.stdin.buffer.read(MAX_MANIFEST_BYTES + 1)
        return loader.load(STDIN_SOURCE, data)
    target = Path(path)
    if target.is_dir():
        files = sorted(
            p for p in target.iterdir() if p.suffix.lower() in MANIFEST_SUFFIXES and p.is_file()
        )
    else:
        files = [target]
    objects: list[KubeObject] = []
    for file in files:
        objects.extend(loader.load(str(file), _read_file(file)))
    return objects


def _read_file(file: Path) -> bytes:
    try:
        with file.open("rb") as handle:
            return handle.read(MAX_MANIFEST_BYTES + 1)
    except OSError as exc:
        raise ManifestError(str(file), None, "", exc.strerror or str(exc)) from None


class _Loader:
    """One load: remembers where each object was seen to refuse duplicates."""

    def __init__(self, locations: list[Location] | None = None) -> None:
        self._seen: dict[tuple[str, str], str] = {}
        self._locations = locations

    def load(self, source: str, text: str | bytes) -> list[KubeObject]:
        decoded = _decode_text(source, text)
        objects: list[KubeObject] = []
        for index, document in _documents(source, decoded):
            if document is None:
                continue
            try:
                objects.extend(self._document(source, index, document))
            except ManifestError as exc:
                raise exc.located(source=source, document=index) from None
        return objects

    def _document(self, source: str, index: int, document: Any) -> list[KubeObject]:
        if not isinstance(document, dict):
            raise ManifestError(
                source, index, "", f"expected an object (a mapping), got {type_name(document)}"
            )
        root = Fields(document)
        kind = root.get_str("kind", required=True)
        root.check_one_of("kind", kind, (*KINDS, *OTHER_KINDS, *LIST_KINDS[1:]))
        if kind not in LIST_KINDS:
            return [self._object(source, index, None, document)]
        check_header(root, kind, required=True)
        objects = []
        for item_index, (item, _path) in enumerate(root.get_list("items"), start=1):
            try:
                objects.append(self._object(source, index, item_index, item))
            except ManifestError as exc:
                # Fields are named relative to the item, which the location numbers.
                raise exc.located(item=item_index) from None
        return objects

    def _object(self, source: str, index: int, item: int | None, data: Any) -> KubeObject:
        root = Fields(data) if isinstance(data, dict) else None
        if root is None:
            raise ManifestError(source, index, "", f"expected an object, got {type_name(data)}")
        kind = root.get_str("kind", required=True)
        if kind in LIST_KINDS:
            root.fail("kind", "a List may not contain another List")
        root.check_one_of("kind", kind, ALL_KINDS)
        obj: KubeObject
        if kind == "PodGroup":
            obj = podgroup_from_dict(data)
        elif kind in OTHER_KINDS:
            obj = kind_from_dict(data)
        else:
            try:
                check_header(root, kind, required=True)
            except ManifestError as exc:
                raise exc.located(kind=kind, name=describe(data, kind)) from None
            obj = pod_from_dict(data) if kind == "Pod" else node_from_dict(data)
        where = f"document {index}" + (f", item {item}" if item is not None else "")
        first = self._seen.get((kind, obj.key))
        if first is not None:
            raise ManifestError(
                source,
                index,
                "metadata.name",
                f"duplicate {kind} {quote(obj.key)}: already defined in {first}",
                item=item,
                kind=kind,
                name=obj.key,
            )
        self._seen[(kind, obj.key)] = f"{source}: {where}"
        if self._locations is not None:
            self._locations.append((source, index, item))
        return obj


def _decode_text(source: str, text: str | bytes) -> str:
    if len(text) > MAX_MANIFEST_BYTES:
        raise ManifestError(
            source, None, "", f"input is larger than {MAX_MANIFEST_BYTES} bytes; split it"
        )
    if isinstance(text, str):
        return text
    try:
        return text.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ManifestError(
            source,
            None,
            "",
            f"not UTF-8 text (byte 0x{text[exc.start]:02x} at offset {exc.start})",
        ) from None


def _documents(source: str, text: str) -> list[tuple[int, Any]]:
    """(1-based index, data) of every document, parsed up front so that a syntax error
    anywhere fails the whole input."""
    if text.lstrip()[:1] == "{":
        try:
            return [(1, _load_json(source, text))]
        except _NotJson as exc:
            json_error = exc.args[0]
            try:
                return _yaml_documents(source, text)  # a YAML flow mapping starts with "{" too
            except ManifestError:
                raise json_error from None
    return _yaml_documents(source, text)


def _yaml_documents(source: str, text: str) -> list[tuple[int, Any]]:
    documents: list[tuple[int, Any]] = []
    iterator = load_documents(text)
    while True:
        index = len(documents) + 1
        try:
            document = next(iterator)
        except StopIteration:
            return documents
        except yaml.YAMLError as exc:
            raise ManifestError(
                source, index, "", f"invalid YAML: {describe_yaml_error(exc)}"
            ) from None
        except RecursionError:
            raise ManifestError(source, index, "", "invalid YAML: nested too deeply") from None
        documents.append((index, document))


def _load_json(source: str, text: str) -> Any:
    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise _BadJson(f"duplicate key {quote(key)}")
            out[key] = value
        return out

    def no_constants(name: str) -> Any:
        raise _BadJson(f"{name} is not valid JSON")

    try:
        return json.loads(text, object_pairs_hook=pairs, parse_constant=no_constants)
    except json.JSONDecodeError as exc:
        reason = f"invalid JSON: line {exc.lineno}, column {exc.colno}: {exc.msg}"
        raise _NotJson(ManifestError(source, 1, "", reason)) from None
    except _BadJson as exc:
        raise ManifestError(source, 1, "", f"invalid JSON: {exc}") from None
    except RecursionError:
        raise ManifestError(source, 1, "", "invalid JSON: nested too deeply") from None
