"""The store's exceptions. Every one is a :class:`StoreError`."""

from __future__ import annotations


class StoreError(Exception):
    """Base of every error the store raises."""


class InvalidObject(StoreError, ValueError):
    """The object cannot be stored (unknown kind, missing name, ...)."""


class NotFound(StoreError):
    def __init__(self, kind: str, key: str) -> None:
        super().__init__(f"{kind} {key!r} not found")
        self.kind = kind
        self.key = key


class AlreadyExists(StoreError):
    def __init__(self, kind: str, key: str) -> None:
        super().__init__(f"{kind} {key!r} already exists")
        self.kind = kind
        self.key = key


class Conflict(StoreError):
    """The object changed since the resourceVersion the caller (or a retry loop) read."""

    def __init__(self, kind: str, key: str, expected_rv: str, current_rv: str) -> None:
        super().__init__(
            f"{kind} {key!r}: resourceVersion {expected_rv!r} is stale (now {current_rv!r})"
        )
        self.kind = kind
        self.key = key
        self.expected_rv = expected_rv
        self.current_rv = current_rv


class BindConflict(StoreError):
    """The pod is already bound to another node (spec.nodeName never changes once set)."""

    def __init__(self, key: str, node: str, wanted: str) -> None:
        super().__init__(f"pod {key!r} is bound to {node!r}, cannot bind it to {wanted!r}")
        self.key = key
        self.node = node
        self.wanted = wanted


class UidMismatch(StoreError):
    """The object under this key is another incarnation (deleted and re-created)."""

    def __init__(self, kind: str, key: str, expected_uid: str, current_uid: str) -> None:
        super().__init__(f"{kind} {key!r}: uid is {current_uid!r}, not {expected_uid!r}")
        self.kind = kind
        self.key = key
        self.expected_uid = expected_uid
        self.current_uid = current_uid


class InvalidUpdate(InvalidObject):
    """The update changes a field that may not change (kube's ValidatePodUpdate:
    "field is immutable"); ``field`` is its path, e.g. ``spec.containers[0].resources``."""

    def __init__(self, kind: str, key: str, field: str, reason: str) -> None:
        super().__init__(f"{kind} {key!r}: {field}: {reason}")
        self.kind = kind
        self.key = key
        self.field = field
        self.reason = reason


class Undecodable(StoreError):
    """A stored record that cannot be decoded (written by hand, or damaged)."""

    def __init__(self, kind: str, key: str, reason: str) -> None:
        super().__init__(f"{kind} {key!r}: the stored record cannot be decoded: {reason}")
        self.kind = kind
        self.key = key
        self.reason = reason
