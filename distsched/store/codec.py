"""Object, meta and event encoding shared by the store and its readers (informers, handlers).

Objects are plain Kubernetes-shaped dicts (camelCase). A stored value is
``msgpack.packb(obj, use_bin_type=True)`` of the whole object, resourceVersion included,
except after a bind: a bind writes only the meta (:class:`Meta`), and readers apply it to
the blob (:func:`stored_object`, :func:`with_binding`), so a bound pod reads exactly as if
its whole object had been rewritten. The next full write stores the whole object again.

The resourceVersion is only known inside the write script, and Lua cannot re-encode
msgpack faithfully (cmsgpack turns ``{}`` into ``[]``). So Python packs the object with a
random placeholder string in ``metadata.resourceVersion`` and cuts the bytes around it
(:func:`pack_with_rv_slot`); the script splices the msgpack string of the rv in between
(``prefix .. 0xa0+len(rv) .. rv .. suffix``, a fixstr since an rv has < 32 digits). The
result is byte-for-byte what ``packb`` gives for the object with that rv.

Events (:func:`decode_event`) are decoded lazily: the small fields of a stream entry
(type, kind, key, rv, and for pods node and nominated node) at once, the objects on first
use; a binding entry carries no object and is rebuilt from the reader's previous copy.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

import msgpack

from distsched.model.kinds import (
    ALL_KINDS,
    api_version_syntax,
    is_cluster_scoped,
    kind_syntax,
    store_kind,
)
from distsched.model.objects import DEFAULT_NAMESPACE
from distsched.redis_text import as_text
from distsched.store.errors import InvalidObject

Obj = dict[str, Any]

_PLACEHOLDER_ATTEMPTS = 4

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"

STREAM_PAGE = 256
"""Entries a reader of the store's stream takes per read (XREAD / XRANGE COUNT): a batch
entry holds up to 64 pod events (lua/lib/storeevent.lua), so a page of ~1 KB pod objects
stays near 16 MB."""


def pod_key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


def object_key(obj: Mapping[str, Any]) -> tuple[str, str]:
    """``(store kind, key)`` of an object: namespaced objects (pods, workloads, PDBs,
    Services) are ``ns/name`` (namespace defaults to ``default``), cluster-scoped ones
    (nodes, namespaces, priority classes, ClusterRoles) are ``name``. The store kind is
    the kind, or ``Kind.group`` for a custom resource (:func:`~distsched.model.kinds.
    store_kind`), whose scope the store takes from the object: namespaced when it names
    a namespace (the manifest loader fills it in from the kind's definition)."""
    kind = obj.get("kind")
    api_version = obj.get("apiVersion")
    if kind not in ALL_KINDS:
        if not isinstance(kind, str) or kind_syntax(kind) is not None:
            raise InvalidObject(f"kind must be an object kind (Pod, Service, ...), got {kind!r}")
        if not isinstance(api_version, str) or api_version_syntax(api_version) is not None:
            raise InvalidObject(
                f"{kind}: apiVersion must be VERSION or GROUP/VERSION, got {api_version!r}"
            )
    stored = store_kind(kind, api_version) if isinstance(api_version, str) else kind
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        raise InvalidObject(f"{kind}: metadata must be a mapping")
    name = meta.get("name")
    if not isinstance(name, str) or not name or "/" in name:
        raise InvalidObject(f"{kind}: metadata.name must be a non-empty string without '/'")
    if is_cluster_scoped(stored, meta.get("namespace")):
        if meta.get("namespace"):
            raise InvalidObject(f"{kind} {name}: cluster-scoped, namespace must be empty")
        return stored, name
    namespace = meta.get("namespace") or DEFAULT_NAMESPACE
    if not isinstance(namespace, str) or "/" in namespace:
        raise InvalidObject(f"{kind} {name}: metadata.namespace must be a string without '/'")
    return stored, pod_key(namespace, name)


def node_name_of(obj: Mapping[str, Any]) -> str:
    """``spec.nodeName`` of a pod ("" if unbound); "" for every other kind."""
    if obj.get("kind") != "Pod":
        return ""
    spec = obj.get("spec") or {}
    return str(spec.get("nodeName") or "")


def nominated_of(obj: Mapping[str, Any]) -> str:
    """``status.nominatedNodeName`` of a pod ("" if none); "" for every other kind."""
    if obj.get("kind") != "Pod":
        return ""
    return str((obj.get("status") or {}).get("nominatedNodeName") or "")


def uid_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def rv_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def rfc3339(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def with_rv(obj: Obj, rv: int | str) -> Obj:
    """A shallow copy of ``obj`` whose metadata.resourceVersion is ``rv``."""
    return {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(rv)}}


def pack_with_rv_slot(obj: Obj) -> tuple[bytes, bytes]:
    """msgpack of ``obj`` split around its metadata.resourceVersion value.

    The placeholder is random per call, so no value inside the object can be crafted to
    collide with it; on the (2**-64) chance one does, another is drawn."""
    for _ in range(_PLACEHOLDER_ATTEMPTS):
        placeholder = "\x00rv:" + secrets.token_hex(8)
        marker = msgpack.packb(placeholder, use_bin_type=True)
        parts = msgpack.packb(with_rv(obj, placeholder), use_bin_type=True).split(marker)
        if len(parts) == 2:
            return parts[0], parts[1]
    raise InvalidObject("could not place the resourceVersion in the object's encoding")


def decode_object(blob: bytes | str) -> Obj:
    if isinstance(blob, str):
        raise TypeError("store values are msgpack bytes; use a client with decode_responses=False")
    obj: Obj = msgpack.unpackb(blob, raw=False)
    return obj


# --- meta: what the scripts check preconditions against --------------------------------


@dataclass(frozen=True, slots=True)
class Meta:
    """One value of ``T:store:meta:<Kind>``: ``<rv>|<node>|<bound_at>|<uid>``.

    ``node`` is the pod's spec.nodeName ("" unbound, and for every other kind);
    ``bound_at`` is set only while the object's blob predates its binding (a bind writes
    the meta alone): the object is then the blob with :func:`with_binding` applied. uid
    comes last because a user may put anything in it (node names cannot hold ``|``)."""

    rv: str
    node: str
    bound_at: str
    uid: str


def encode_meta(meta: Meta) -> str:
    return f"{meta.rv}|{meta.node}|{meta.bound_at}|{meta.uid}"


def parse_meta(raw: bytes | str) -> Meta:
    """A meta value; the JSON ``{"rv", "uid", "node"}`` that older versions wrote parses
    too (as an object whose blob is whole)."""
    text = as_text(raw)
    if text.startswith("{"):
        legacy = json.loads(text)
        return Meta(str(legacy["rv"]), str(legacy.get("node") or ""), "", str(legacy["uid"]))
    rv, node, bound_at, uid = text.split("|", 3)
    return Meta(rv, node, bound_at, uid)


def check_node_name(node: str, what: str) -> None:
    """Node names go into the meta string, so they cannot hold its separator."""
    if "|" in node:
        raise InvalidObject(f"{what}: node name {node!r} must not contain '|'")


def set_condition(conditions: list[Obj], cond: Mapping[str, Any], now: str) -> list[Obj]:
    """``conditions`` with ``cond`` set (by type); lastTransitionTime moves only when the
    status changes. Returns the same list object when nothing changes."""
    for i, existing in enumerate(conditions):
        if existing.get("type") != cond["type"]:
            continue
        same_status = existing.get("status") == cond["status"]
        if same_status and all(existing.get(f) == cond.get(f) for f in ("reason", "message")):
            return conditions
        merged = {k: v for k, v in cond.items() if v is not None}
        kept = existing.get("lastTransitionTime") if same_status else None
        merged["lastTransitionTime"] = kept or now
        return [*conditions[:i], merged, *conditions[i + 1 :]]
    added = {k: v for k, v in cond.items() if v is not None}
    added["lastTransitionTime"] = now
    return [*conditions, added]


_POD_SCHEDULED = {"type": "PodScheduled", "status": "True"}


def with_binding(pod: Obj, node: str, rv: int | str, bound_at: str) -> Obj:
    """The pod as a bind leaves it: spec.nodeName ``node``, condition PodScheduled=True
    (transition time ``bound_at``), resourceVersion ``rv``. Shallow: shares the rest.
    Keys keep their order (new ones last), so it packs to the bytes a whole write would."""
    status = pod.get("status")
    status = dict(status) if status else {}
    conditions = status.get("conditions")
    status["conditions"] = set_condition(
        list(conditions) if conditions else [], _POD_SCHEDULED, bound_at
    )
    spec = pod.get("spec")
    return {
        **pod,
        "spec": {**spec, "nodeName": node} if spec else {"nodeName": node},
        "status": status,
        "metadata": {**pod["metadata"], "resourceVersion": str(rv)},
    }


def stored_object(blob: bytes, meta: Meta | None) -> Obj:
    """The object a blob and its meta stand for (the binding applied if the blob predates
    it)."""
    obj = decode_object(blob)
    if meta is not None and meta.bound_at:
        return with_binding(obj, meta.node, meta.rv, meta.bound_at)
    return obj


# --- events ------------------------------------------------------------------------------


class Unresolved(LookupError):
    """A binding event carries no object, and neither a previous copy nor the store had
    it (the pod was deleted or re-created since)."""


# How a ref rebuilds a binding from the previous copy it holds: (resourceVersion, the
# binding's time); see :func:`bound_ref`.
_Binding = tuple[int, str]


class ObjectRef:
    """An object as a reader holds it: the key, and for pods the node and nominated node
    at once (from the stream entry's small fields); the object itself is decoded on first
    use and then kept. Never mutate what :meth:`get` returns.

    Until it is decoded a ref also knows the bytes it will be decoded from (``raw``: the
    msgpack blob, or for a binding the ref it is rebuilt from), for :meth:`may_contain`."""

    __slots__ = ("_make", "_obj", "_raw", "key", "node", "nominated")

    # spec.nodeName and status.nominatedNodeName ("" when none, or not a pod): plain
    # attributes when the stream entry said them (an informer reads them for every pod),
    # else read from the object on first use (:meth:`__getattr__`).
    node: str
    nominated: str

    def __init__(
        self,
        key: str,
        obj: Obj | None = None,
        make: Callable[[], Obj] | _Binding | None = None,
        node: str | None = None,
        nominated: str | None = None,
        raw: bytes | ObjectRef | None = None,
    ) -> None:
        # Hot paths (a ref per pod event) pass everything by position: keywords cost a
        # Python-level call about as much again.
        self.key = key
        self._obj = obj
        self._make = make
        if node is not None:
            self.node = node
        if nominated is not None:
            self.nominated = nominated
        self._raw = raw

    if not TYPE_CHECKING:  # to the type checker, only the declared attributes exist

        def __getattr__(self, name: str) -> str:
            """``node`` or ``nominated`` not given: read from the object, then kept."""
            if name == "node":
                self.node = value = node_name_of(self.get())
                return value
            if name == "nominated":
                self.nominated = value = nominated_of(self.get())
                return value
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def get(self) -> Obj:
        obj = self._obj
        if obj is None:
            make = self._make
            if type(make) is tuple:  # a binding (bound_ref): the previous copy, bound
                previous = cast(ObjectRef, self._raw)
                obj = self._obj = with_binding(previous.get(), self.node, *make)
            elif make is not None:
                obj = self._obj = cast(Callable[[], Obj], make)()
            elif isinstance(self._raw, bytes):  # a whole blob, as most entries carry
                obj = self._obj = decode_object(self._raw)
            else:
                raise ValueError(f"ObjectRef {self.key!r} has neither an object nor a maker")
            self._make = None  # drop what it closed over (a previous copy, a blob)
            self._raw = None
        return obj

    @property
    def decoded(self) -> bool:
        return self._obj is not None

    @property
    def decoded_object(self) -> Obj | None:
        """The object if it has been decoded already (None: not yet); never decodes."""
        return self._obj

    def is_binding_of(self, previous: ObjectRef) -> bool:
        """Whether this is ``previous`` with nothing but its binding set (a binding event
        rebuilt from it, :func:`bound_ref`, not decoded yet)."""
        return self._raw is previous

    def source(self) -> Obj:
        """The object, or for a binding not rebuilt yet the object it is rebuilt from
        (the same but spec.nodeName, the PodScheduled condition and the rv): what a
        reader of other fields may look at without building the binding."""
        raw = self._raw
        if self._obj is None and isinstance(raw, ObjectRef):
            return raw.source()
        return self.get()

    def may_contain(self, *needles: bytes) -> bool:
        """False when the object's encoding certainly holds none of ``needles`` (a
        substring test on the undecoded blob: a map key or string value of the object
        appears there as its UTF-8 bytes); True when one may be there, or when there is
        no blob to look at (decoded already: look at :meth:`get`)."""
        raw = self.blob()
        if raw is None:
            return True
        return any(needle in raw for needle in needles)

    def blob(self) -> bytes | None:
        """The msgpack bytes the object will be decoded from (for a binding not rebuilt
        yet, those of the object before it), or None once anything on the way is decoded:
        what a substring test such as :meth:`may_contain` may look at."""
        raw = self._raw
        while isinstance(raw, ObjectRef):
            if raw._obj is not None:
                return None
            raw = raw._raw
        return raw

    def __repr__(self) -> str:
        state = "decoded" if self.decoded else "lazy"
        return f"ObjectRef({self.key!r}, {state})"


Fetch = Callable[[str, int], "tuple[Obj | None, Obj | None]"]
"""(pod key, rv of a binding event) -> (previous object, object after the binding), from
the store; None where it cannot tell (see :meth:`Store.binding_states`)."""


class Event:
    """One entry of the event stream, decoded on demand.

    ``obj`` is the new object (ADDED, MODIFIED) or the last state (DELETED, with its
    metadata.resourceVersion set to the deletion's rv as Kubernetes does); ``old`` is the
    previous object of a MODIFIED event. ``epoch`` identifies the store's history: it
    changes when Redis lost the data, and then rv numbering restarted.

    ``binding``: a bind, whose entry carries no object: ``obj`` is the previous object
    with spec.nodeName, PodScheduled=True and the rv set (:func:`with_binding`), ``old``
    the previous object, from the reader's copy or else from the store (``old`` is None
    when the store moved on since). ``node`` and ``nominated`` (pods) come from the
    entry's small fields without decoding anything. ``obj``/``old`` are decoded on first
    use; ``obj`` raises :class:`Unresolved` for a binding nobody can rebuild.
    """

    __slots__ = ("binding", "epoch", "key", "kind", "new", "previous", "rv", "type")

    def __init__(
        self,
        type: str,
        kind: str,
        key: str,
        rv: int,
        epoch: str,
        obj: Obj | None = None,
        old: Obj | None = None,
        *,
        new: ObjectRef | None = None,
        previous: ObjectRef | None = None,
        binding: bool = False,
    ) -> None:
        self.type, self.kind, self.key, self.rv, self.epoch = type, kind, key, rv, epoch
        if new is None:
            if obj is None:
                raise ValueError("an Event needs its object")
            new = ObjectRef(key, obj)
        self.new = new
        self.previous = previous if previous is not None or old is None else ObjectRef(key, old)
        self.binding = binding

    @classmethod
    def _of(
        cls,
        etype: str,
        kind: str,
        key: str,
        rv: int,
        epoch: str,
        new: ObjectRef,
        previous: ObjectRef | None,
        binding: bool,
    ) -> Event:
        """An event from its parts (what decoding a stream entry gives), no checks."""
        self = cls.__new__(cls)
        self.type, self.kind, self.key, self.rv, self.epoch = etype, kind, key, rv, epoch
        self.new, self.previous, self.binding = new, previous, binding
        return self

    @property
    def obj(self) -> Obj:
        return self.new.get()

    @property
    def old(self) -> Obj | None:
        if self.previous is None:
            return None
        try:
            return self.previous.get()
        except Unresolved:
            return None

    @property
    def node(self) -> str:
        return self.new.node

    @property
    def nominated(self) -> str:
        return self.new.nominated

    def _values(self) -> tuple[Any, ...]:
        return (self.type, self.kind, self.key, self.rv, self.epoch, self.obj, self.old)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Event):
            return NotImplemented
        return self._values() == other._values()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        extra = ", binding" if self.binding else ""
        return f"Event({self.type}, {self.kind}, {self.key!r}, rv={self.rv}{extra})"


def field_str(fields: Mapping[bytes, bytes], name: bytes) -> str:
    return fields[name].decode()


def blob_ref(
    key: str,
    blob: bytes,
    meta: bytes | None,
    rv: int | None = None,
    node: str | None = None,
    nominated: str | None = None,
) -> ObjectRef:
    """A ref to an object a stream entry carries: its blob, and the meta of that moment
    when the blob predates the pod's binding; ``rv`` overrides its resourceVersion."""

    if meta is None and rv is None:
        return ObjectRef(key, None, None, node, nominated, blob)

    def make() -> Obj:
        obj = stored_object(blob, parse_meta(meta) if meta else None)
        return with_rv(obj, rv) if rv is not None else obj

    return ObjectRef(key, None, make=make, node=node, nominated=nominated, raw=blob)


def decode_event(
    fields: Mapping[bytes, bytes],
    previous: ObjectRef | None = None,
    fetch: Fetch | None = None,
) -> Event:
    """An :class:`Event` from the raw fields of a stream entry; nothing is decoded yet.

    ``previous``: the reader's copy of the object before this event (informers have it),
    which a binding is rebuilt from; without it a binding asks ``fetch`` (the store) on
    first use. Fields (see :mod:`distsched.keys`): ``obj``, ``old`` (pods and nodes),
    ``objmeta``/``oldmeta`` (the meta of a blob that predates its pod's binding), and for
    pods ``node`` and ``nom``; a binding has ``bound`` (its time) and no blob."""
    get = fields.get
    etype = fields[b"type"].decode()
    kind = fields[b"kind"].decode()
    key = fields[b"key"].decode()
    rv = int(fields[b"rv"])
    epoch = fields[b"epoch"].decode()
    raw_node = get(b"node")
    node = None if raw_node is None else raw_node.decode()
    bound_at = get(b"bound")
    if bound_at is not None:
        return _binding_event(
            etype, kind, key, rv, epoch, node or "", bound_at.decode(), previous, fetch
        )
    # "nom" is written only when set; without "node" (not a pod, or an entry written
    # before these fields existed) both come from the object when asked.
    nominated = None
    if node is not None:
        raw_nom = get(b"nom")
        nominated = "" if raw_nom is None else raw_nom.decode()
    new = blob_ref(
        key, fields[b"obj"], get(b"objmeta"), rv if etype == DELETED else None, node, nominated
    )
    old_blob = get(b"old")
    old = blob_ref(key, old_blob, get(b"oldmeta")) if old_blob else None
    return Event._of(etype, kind, key, rv, epoch, new, old, False)


def bound_ref(previous: ObjectRef, node: str, rv: int, bound_at: str) -> ObjectRef:
    """The ref of a pod after its binding, rebuilt from ``previous`` when first asked."""
    return ObjectRef(previous.key, None, (rv, bound_at), node, None, previous)


def _binding_event(
    etype: str,
    kind: str,
    key: str,
    rv: int,
    epoch: str,
    node: str,
    bound_at: str,
    previous: ObjectRef | None,
    fetch: Fetch | None,
) -> Event:
    if previous is not None:
        new = bound_ref(previous, node, rv, bound_at)
        return Event._of(etype, kind, key, rv, epoch, new, previous, True)
    pair: list[tuple[Obj | None, Obj | None]] = []

    def resolved() -> tuple[Obj | None, Obj | None]:
        if not pair:
            pair.append(fetch(key, rv) if fetch is not None else (None, None))
        return pair[0]

    def new_obj() -> Obj:
        obj = resolved()[1]
        if obj is None:
            raise Unresolved(f"binding of {kind} {key} at rv {rv}: the pod is gone")
        return obj

    def old_obj() -> Obj:
        obj = resolved()[0]
        if obj is None:
            raise Unresolved(f"{kind} {key} before its binding at rv {rv}: unknown")
        return obj

    return Event(
        etype,
        kind,
        key,
        rv,
        epoch,
        new=ObjectRef(key, make=new_obj, node=node),
        previous=ObjectRef(key, make=old_obj),
        binding=True,
    )


def batch_items(fields: Mapping[bytes, bytes]) -> list[list[bytes]] | None:
    """The items of a batch entry (one per rv from its ``first``: ``[key, field, value,
    ...]``, see lua/lib/storeevent.lua), or None for an entry of one event. Raises
    ValueError when the batch does not cover its rvs exactly."""
    raw = fields.get(b"batch")
    if raw is None:
        return None
    items = msgpack.unpackb(raw, raw=True, use_list=True)
    if not isinstance(items, list) or int(fields[b"first"]) + len(items) - 1 != int(fields[b"rv"]):
        raise ValueError("a batch entry that does not cover its rvs")
    return items


def entry_events(fields: Mapping[bytes, bytes]) -> Iterator[tuple[int, Mapping[bytes, bytes]]]:
    """(rv, fields) of each event of a stream entry: the entry itself, or each event of
    a batch entry with the fields its own entry would have had."""
    items = batch_items(fields)
    if items is None:
        yield int(fields[b"rv"]), fields
        return
    first = int(fields[b"first"])
    for offset, item in enumerate(items):
        yield first + offset, event_fields(fields, first + offset, item)


def event_fields(batch: Mapping[bytes, bytes], rv: int, item: list[bytes]) -> dict[bytes, bytes]:
    """The fields of the event ``rv`` of a batch entry (its ``item``), as its own entry
    would have had them."""
    event = {
        b"type": batch[b"type"],
        b"kind": batch[b"kind"],
        b"key": item[0],
        b"rv": b"%d" % rv,
        b"epoch": batch[b"epoch"],
    }
    if len(item) % 2 != 1:
        raise ValueError("a batch item with a field and no value")
    for at in range(1, len(item), 2):
        event[item[at]] = item[at + 1]
    return event


def decode_stream(
    entries: Iterable[tuple[bytes, Mapping[bytes, bytes]]],
    copies: dict[tuple[str, str], ObjectRef] | None = None,
) -> Iterator[Event]:
    """The events of consecutive stream entries (a batch entry gives each of its
    events), each binding rebuilt from the copy the
    earlier entries left in ``copies`` ((kind, key) -> ref; what an informer does,
    without handlers). A binding whose pod has no copy (its earlier entries were
    trimmed) has ``obj`` raising :class:`Unresolved` and ``old`` None."""
    known: dict[tuple[str, str], ObjectRef] = {} if copies is None else copies
    for _entry_id, entry in entries:
        if not entry:  # a trimmed entry that a consumer group still lists
            continue
        for _rv, fields in entry_events(entry):
            at = (field_str(fields, b"kind"), field_str(fields, b"key"))
            event = decode_event(fields, known.get(at))
            if event.type == DELETED:
                known.pop(at, None)
            else:
                known[at] = event.new
            yield event
