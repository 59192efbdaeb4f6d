"""The "API server": objects in Redis, resourceVersion, an event stream, and an informer.

``Store`` writes and reads Kubernetes-shaped Pod/Node dicts (layout and trade-offs in
:mod:`distsched.store.redis_store`). ``Informer`` (:mod:`distsched.store.informer`) tails
the event stream into a local indexer and calls event handlers.
"""

from distsched.store.codec import (
    ADDED,
    DELETED,
    MODIFIED,
    Event,
    Meta,
    ObjectRef,
    Unresolved,
    decode_event,
    decode_object,
    decode_stream,
    object_key,
    parse_meta,
    pod_key,
)
from distsched.store.errors import (
    AlreadyExists,
    BindConflict,
    Conflict,
    InvalidObject,
    InvalidUpdate,
    NotFound,
    StoreError,
    UidMismatch,
    Undecodable,
)
from distsched.store.informer import EventHandler, FuncHandler, Informer
from distsched.store.redis_store import (
    ApplyAction,
    BindRequest,
    BindResult,
    BindStatus,
    Store,
    StoreListing,
)

__all__ = [
    "ADDED",
    "DELETED",
    "MODIFIED",
    "AlreadyExists",
    "ApplyAction",
    "BindConflict",
    "BindRequest",
    "BindResult",
    "BindStatus",
    "Conflict",
    "Event",
    "EventHandler",
    "FuncHandler",
    "Informer",
    "InvalidObject",
    "InvalidUpdate",
    "Meta",
    "NotFound",
    "ObjectRef",
    "Store",
    "StoreError",
    "StoreListing",
    "UidMismatch",
    "Undecodable",
    "Unresolved",
    "decode_event",
    "decode_object",
    "decode_stream",
    "object_key",
    "parse_meta",
    "pod_key",
]
