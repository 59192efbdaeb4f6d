"""Reading Kubernetes manifests: YAML or JSON, one or many documents, lists.

All or nothing: ``load_manifests`` / ``load_path`` / ``load_paths`` return every object
or raise the first ManifestError, so a caller that applies the result writes nothing on
bad input.

Every well-formed Kubernetes object is taken: the kinds distsched acts on
(``kinds.ALL_KINDS``) decoded and validated in full, every other kind validated as the
API server validates any object (header and metadata) and kept as given
(model/generic.py) — or refused with ``strict``. Lists: ``kind: List`` (items carry
their kind) and the API server's ``<Kind>List`` (``PodList``, ``NodeList``,
``DeploymentList``...), whose items may leave out ``kind`` and ``apiVersion``: the
list's say them.

Refused input (each a ManifestError naming source, document and, when known, field):
more than ``MAX_MANIFEST_BYTES`` per file, bytes that are not UTF-8, YAML syntax errors,
duplicate mapping keys, alias bombs and deep nesting (see safe_yaml), a document that
is not an object, a missing or malformed apiVersion/kind, a kind a built-in API group
does not serve at that version ("no matches for kind ... in version ...", as for
``policy/v1beta1`` or ``extensions/v1beta1``), any invalid field, and the same object
(kind + namespace/name) twice in one load. Empty documents are skipped but still
counted, so document numbers match the ``---`` separators in the file.

A custom resource is namespaced or cluster-scoped as its CustomResourceDefinition says
(one in the same input, or given in ``crds``: those the store holds); without one it is
taken as namespaced, as most are.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from distsched.model import decode, workloads
from distsched.model.decode import check_header, node_from_dict, pod_from_dict
from distsched.model.errors import STDIN_SOURCE, ManifestError
from distsched.model.fields import Fields, quote, type_name
from distsched.model.generic import StoredObject, crd_scopes, stored_from_dict
from distsched.model.generic import describe as describe_stored
from distsched.model.kinds import (
    ALL_KINDS,
    CLUSTER_SCOPED,
    OTHER_KINDS,
    api_version_syntax,
    kind_syntax,
    store_kind,
    unserved,
)
from distsched.model.objects import Node, Pod
from distsched.model.podgroups import PodGroup, podgroup_from_dict
from distsched.model.safe_yaml import describe_yaml_error, load_documents
from distsched.model.volumes import DECODERS as VOLUME_DECODERS
from distsched.model.workloads import KindObject
from distsched.model.workloads import object_from_dict as kind_from_dict

MAX_MANIFEST_BYTES = 8 * 1024 * 1024
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
LIST_KIND = "List"

KubeObject = Pod | Node | KindObject | PodGroup | StoredObject

Document = tuple[int, Any]
"""(1-based document index, parsed data) of one document of a source."""


class _BadJson(ValueError):
    """Valid JSON syntax with content we refuse (duplicate keys, NaN)."""


class _NotJson(Exception):
    """Not JSON at all: args[0] is the ManifestError to raise if YAML fails too."""


def list_item_kind(kind: str, document: Mapping[str, Any]) -> str | None:
    """None when a document of ``kind`` is not a list; else the kind of its items: ""
    for ``List`` (each item says its own), ``Pod`` for ``PodList``..."""
    if kind == LIST_KIND:
        return ""
    if len(kind) > len(LIST_KIND) and kind.endswith(LIST_KIND):
        return kind[: -len(LIST_KIND)] if isinstance(document.get("items"), list) else None
    return None


def list_items(document: Mapping[str, Any], item_kind: str) -> Iterator[Any]:
    """The items of a list document; a ``<Kind>List``'s items that leave out ``kind``
    (the API server's list shape) get the list's kind and apiVersion."""
    items = document.get("items")
    if not isinstance(items, list):
        return
    for item in items:
        if item_kind and isinstance(item, dict) and "kind" not in item:
            version = item.get("apiVersion", document.get("apiVersion"))
            rest = {k: v for k, v in item.items() if k != "apiVersion"}
            item = {"apiVersion": version, "kind": item_kind, **rest}
        yield item


def load_manifests(
    source_name: str,
    text: str | bytes,
    *,
    strict: bool = False,
    crds: StoredCrds | None = None,
) -> list[KubeObject]:
    """Every object in ``text`` (YAML or JSON), in document order (``strict``: refuse
    the kinds distsched does not act on; ``crds``: see :func:`load_paths`)."""
    loader = _Loader(strict=strict, crds=crds)
    return loader.load([(source_name, parse_documents(source_name, text))])


Location = tuple[str, int, int | None]
"""Where an object was read: (source, document, item inside a List or None)."""

StoredCrds = Callable[[], Iterable[Any]]
"""The CustomResourceDefinitions a store holds (raw dicts), read when first needed."""

Skip = Callable[[str, dict[str, Any]], bool]


@dataclass(frozen=True, slots=True)
class Namespacing:
    """kubectl's namespace for the objects of a file: ``name`` for those that give none;
    ``enforced`` (-n was given): one that gives another is refused."""

    name: str
    enforced: bool = False


"""Whether to leave out an object (its store kind, its data): see :func:`load_sources`.
It may also remove from the data what the caller knows the API server owns."""


def load_path(
    path: str | os.PathLike[str],
    *,
    locations: list[Location] | None = None,
    strict: bool = False,
    crds: StoredCrds | None = None,
) -> list[KubeObject]:
    """:func:`load_paths` of one path."""
    return load_paths([path], locations=locations, strict=strict, crds=crds)


def load_paths(
    paths: Sequence[str | os.PathLike[str]],
    *,
    locations: list[Location] | None = None,
    strict: bool = False,
    crds: StoredCrds | None = None,
    namespace: Namespacing | None = None,
) -> list[KubeObject]:
    """Every object in each path, in order: a file, a directory's ``*.yaml``/``*.yml``/
    ``*.json`` files (sorted by name, not recursive), or stdin for ``"-"``. Everything is
    read and parsed before the first object is decoded, so a custom resource finds its
    CustomResourceDefinition in any of them; ``crds`` returns the stored ones, and is
    called (once) only for a custom resource whose definition the input does not hold.
    With ``locations``, the location of each object is appended to it, in the same order
    (for errors found after loading, such as priority admission)."""
    sources: list[tuple[str, list[Document]]] = []
    for path in paths:
        if str(path) == "-":
            data = sys.stdin.buffer.read(MAX_MANIFEST_BYTES + 1)
            sources.append((STDIN_SOURCE, parse_documents(STDIN_SOURCE, data)))
            continue
        target = Path(path)
        if target.is_dir():
            files = sorted(
                p for p in target.iterdir() if p.suffix.lower() in MANIFEST_SUFFIXES and p.is_file()
            )
        else:
            files = [target]
        for file in files:
            sources.append((str(file), parse_documents(str(file), _read_file(file))))
    return load_sources(sources, locations=locations, strict=strict, crds=crds, namespace=namespace)


def load_sources(
    sources: Sequence[tuple[str, Sequence[Document]]],
    *,
    locations: list[Location] | None = None,
    strict: bool = False,
    crds: StoredCrds | None = None,
    skip: Skip | None = None,
    namespace: Namespacing | None = None,
) -> list[KubeObject]:
    """:func:`load_paths` of documents already parsed (:func:`parse_documents`), by
    source. ``skip(store_kind, data)``, when given, is asked about every object whose
    header is valid; one it answers True for is left out (not decoded, not located).
    ``namespace``: where namespaced objects that name none go (else ``default``), and
    whether one that names another is refused (kubectl's ``-n``)."""
    loader = _Loader(locations, strict=strict, crds=crds, skip=skip, namespace=namespace)
    return loader.load(sources)


def parse_documents(
    source: str, text: str | bytes, *, max_bytes: int = MAX_MANIFEST_BYTES
) -> list[Document]:
    """(index, data) of every document of ``text``, parsed up front so that a syntax
    error anywhere fails the whole input (ManifestError naming the document; also for
    more than ``max_bytes``)."""
    return _documents(source, _decode_text(source, text, max_bytes))


def _read_file(file: Path) -> bytes:
    try:
        with file.open("rb") as handle:
            return handle.read(MAX_MANIFEST_BYTES + 1)
    except OSError as exc:
        raise ManifestError(str(file), None, "", exc.strerror or str(exc)) from None


class _Loader:
    """One load: remembers where each object was seen to refuse duplicates, and the
    scope of the custom kinds whose CustomResourceDefinitions it has seen."""

    def __init__(
        self,
        locations: list[Location] | None = None,
        *,
        strict: bool = False,
        crds: StoredCrds | None = None,
        skip: Skip | None = None,
        namespace: Namespacing | None = None,
    ) -> None:
        self._namespace = namespace
        self._skip = skip
        self._seen: dict[tuple[str, str], str] = {}
        self._locations = locations
        self._strict = strict
        self._scopes: dict[str, bool] = {}
        self._stored_crds = crds

    def load(self, sources: Sequence[tuple[str, Sequence[Document]]]) -> list[KubeObject]:
        self._scopes = crd_scopes(_all_objects(sources))
        objects: list[KubeObject] = []
        for source, documents in sources:
            for index, document in documents:
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
        item_kind = list_item_kind(kind, document)
        if item_kind is None:
            obj = self._object(source, index, None, document)
            return [] if obj is None else [obj]
        if kind == LIST_KIND:
            check_header(root, kind, required=True)
        else:
            self._check_api_version(root)
        root.get_list("items")  # a list, or the error naming the field
        objects = []
        for item_index, item in enumerate(list_items(document, item_kind), start=1):
            try:
                obj = self._object(source, index, item_index, item)
            except ManifestError as exc:
                # Fields are named relative to the item, which the location numbers.
                raise exc.located(item=item_index) from None
            if obj is not None:
                objects.append(obj)
        return objects

    def _object(self, source: str, index: int, item: int | None, data: Any) -> KubeObject | None:
        root = Fields(data) if isinstance(data, dict) else None
        if root is None:
            raise ManifestError(source, index, "", f"expected an object, got {type_name(data)}")
        kind = root.get_str("kind", required=True)
        if list_item_kind(kind, data) is not None:
            root.fail("kind", "a List may not contain another List")
        reason = kind_syntax(kind)
        if reason is not None:
            root.fail("kind", f"invalid value {quote(kind)}: {reason}")
        try:
            api_version = self._check_api_version(root)
            reason = unserved(kind, api_version)
            if reason is not None:
                root.fail("apiVersion", reason)
        except ManifestError as exc:
            raise exc.located(kind=kind, name=_describe(kind, data)) from None
        stored = store_kind(kind, api_version)
        if self._namespace is not None:
            data = self._namespaced(root, kind, stored, data, self._namespace)
            root = Fields(data)
        if self._skip is not None and self._skip(stored, data):
            return None
        obj: KubeObject
        if stored == "PodGroup":
            obj = podgroup_from_dict(data)
        elif stored in OTHER_KINDS:
            obj = kind_from_dict(data)
        elif stored in ALL_KINDS:
            try:
                check_header(root, kind, required=True)
            except ManifestError as exc:
                raise exc.located(kind=kind, name=_describe(kind, data)) from None
            obj = pod_from_dict(data) if kind == "Pod" else node_from_dict(data)
        else:
            obj = self._stored(root, kind, stored, data)
        where = f"document {index}" + (f", item {item}" if item is not None else "")
        first = self._seen.get((obj.kind, obj.key))
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
        self._seen[(obj.kind, obj.key)] = f"{source}: {where}"
        if self._locations is not None:
            self._locations.append((source, index, item))
        return obj

    @staticmethod
    def _check_api_version(root: Fields) -> str:
        api_version = root.get_str("apiVersion", required=True)
        reason = api_version_syntax(api_version)
        if reason is not None:
            root.fail("apiVersion", f"invalid value {quote(api_version)}: {reason}")
        return api_version

    def _stored(self, root: Fields, kind: str, stored: str, data: Any) -> StoredObject:
        """An object of a kind distsched does not act on (refused when strict)."""
        cluster = stored in CLUSTER_SCOPED if "." not in stored else self._custom_scope(stored)
        name = describe_stored(data, cluster_scoped=cluster)
        try:
            if self._strict:
                root.fail(
                    "kind",
                    f"{quote(kind)} ({root.get_str('apiVersion')}) is a kind distsched does "
                    "not act on: --strict refuses it (without --strict it is stored as given)",
                )
            stored_object = stored_from_dict(data, stored, cluster_scoped=cluster)
            decode = VOLUME_DECODERS.get(stored)
            if decode is not None:  # what the volume plugins read must decode
                decode(stored_object.raw)
            return stored_object
        except ManifestError as exc:
            raise exc.located(kind=kind, name=name) from None

    def _namespaced(
        self, root: Fields, kind: str, stored: str, data: dict[str, Any], ns: Namespacing
    ) -> dict[str, Any]:
        """``data`` in ``ns``'s namespace when it is namespaced and names none; refused
        when it names another and ``ns`` was asked for (kubectl's -n)."""
        cluster = stored in CLUSTER_SCOPED if "." not in stored else self._custom_scope(stored)
        meta = data.get("metadata")
        if cluster or not isinstance(meta, dict):
            return data
        given = meta.get("namespace")
        if not given:
            return {**data, "metadata": {**meta, "namespace": ns.name}}
        if ns.enforced and given != ns.name:
            try:
                root.fail(
                    "metadata.namespace",
                    f"the namespace from the provided object {quote(str(given))} does not "
                    f"match the namespace {quote(ns.name)}. You must pass "
                    f"'--namespace={given}' to perform this operation.",
                )
            except ManifestError as exc:
                raise exc.located(kind=kind, name=_describe(kind, data)) from None
        return data

    def _custom_scope(self, stored: str) -> bool:
        """Whether custom kind ``stored`` is cluster-scoped: its definition's scope (in
        the input, else in the store), namespaced without one."""
        if stored not in self._scopes and self._stored_crds is not None:
            for kind, cluster in crd_scopes(self._stored_crds()).items():
                self._scopes.setdefault(kind, cluster)
            self._stored_crds = None
        return self._scopes.get(stored, False)


def _describe(kind: str, data: Any) -> str:
    """Best-effort name of a raw object of ``kind`` for an error's location."""
    if kind in ("Pod", "Node"):
        return decode.describe(data, kind)
    if kind in ALL_KINDS:
        return workloads.describe(data, kind)
    return describe_stored(data, cluster_scoped=kind in CLUSTER_SCOPED)


def _all_objects(sources: Sequence[tuple[str, Sequence[Document]]]) -> Iterator[Any]:
    """Every object of the sources, list items included (for the CRD pre-scan)."""
    for _source, documents in sources:
        for _index, document in documents:
            if not isinstance(document, dict) or not isinstance(document.get("kind"), str):
                continue
            item_kind = list_item_kind(document["kind"], document)
            if item_kind is None:
                yield document
            else:
                yield from list_items(document, item_kind)


def _decode_text(source: str, text: str | bytes, max_bytes: int = MAX_MANIFEST_BYTES) -> str:
    if len(text) > max_bytes:
        raise ManifestError(source, None, "", f"input is larger than {max_bytes} bytes; split it")
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
        out = dict(items)
        if len(out) != len(items):  # rare: find the first repeated key
            seen: set[str] = set()
            for key, _value in items:
                if key in seen:
                    raise _BadJson(f"duplicate key {quote(key)}")
                seen.add(key)
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
