"""Typed access to one JSON object being decoded, with its path for error messages.

Absent keys and explicit nulls mean the same (the zero value), as in Kubernetes' JSON
decoding. Unknown keys are never looked at. A value of the wrong JSON type is an error.
Paths look like ``spec.containers[0].resources.requests.cpu``; map keys that are not
plain identifiers are bracketed: ``metadata.labels[app.kubernetes.io/name]``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from distsched.model.errors import API_SOURCE, ManifestError

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

_PLAIN_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "list"
    return type(value).__name__


def child_path(path: str, key: str) -> str:
    if _PLAIN_KEY_RE.fullmatch(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{_escape_controls(key)}]"


def _escape_controls(text: str) -> str:
    """Control characters written as escapes, so an error message stays one line."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def quote(value: object) -> str:
    text = str(value)
    return '"' + _escape_controls(text.replace("\\", "\\\\").replace('"', '\\"')) + '"'


def fail(path: str, reason: str) -> NoReturn:
    raise ManifestError(API_SOURCE, None, path, reason)


def expect_object(value: Any, path: str) -> Fields:
    if not isinstance(value, Mapping):
        fail(path, f"expected an object, got {type_name(value)}")
    return Fields(value, path)


class Fields:
    """One JSON object (a mapping) at ``path``."""

    __slots__ = ("data", "path")

    def __init__(self, data: Mapping[str, Any], path: str = "") -> None:
        self.data = data
        self.path = path

    def at(self, key: str) -> str:
        """The path of a field (or of a relative path such as ``taints[1].key``)."""
        return f"{self.path}.{key}" if self.path else key

    def fail(self, key: str | None, reason: str) -> NoReturn:
        fail(self.at(key) if key is not None else self.path, reason)

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def _required(self, key: str) -> NoReturn:
        self.fail(key, "required value is missing")

    def get_str(self, key: str, default: str = "", *, required: bool = False) -> str:
        value = self.data.get(key)
        if value is None or (required and value == ""):
            if required:
                self._required(key)
            return default
        if not isinstance(value, str):
            self.fail(key, f"expected a string, got {type_name(value)}")
        return value

    def get_int(
        self,
        key: str,
        *,
        low: int = INT32_MIN,
        high: int = INT32_MAX,
        required: bool = False,
    ) -> int | None:
        value = self.data.get(key)
        if value is None:
            if required:
                self._required(key)
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(key, f"expected an integer, got {type_name(value)}")
        if not low <= value <= high:
            self.fail(key, f"must be between {low} and {high}, got {value}")
        return value

    def get_bool(self, key: str) -> bool:
        value = self.data.get(key)
        if value is None:
            return False
        if not isinstance(value, bool):
            self.fail(key, f"expected a boolean, got {type_name(value)}")
        return value

    def get_obj(self, key: str, *, required: bool = False) -> Fields | None:
        value = self.data.get(key)
        if value is None:
            if required:
                self._required(key)
            return None
        return expect_object(value, self.at(key))

    def get_list(self, key: str) -> list[tuple[Any, str]]:
        """The items of a list field with their paths (``[]`` when absent)."""
        value = self.data.get(key)
        if value is None:
            return []
        if not isinstance(value, list | tuple):
            self.fail(key, f"expected a list, got {type_name(value)}")
        base = self.at(key)
        return [(item, f"{base}[{i}]") for i, item in enumerate(value)]

    def get_objs(self, key: str) -> list[Fields]:
        return [expect_object(item, path) for item, path in self.get_list(key)]

    def get_strs(self, key: str, check: Callable[[str], str | None] | None = None) -> list[str]:
        out = []
        for item, path in self.get_list(key):
            if not isinstance(item, str):
                fail(path, f"expected a string, got {type_name(item)}")
            if check is not None:
                reason = check(item)
                if reason is not None:
                    fail(path, f"invalid value {quote(item)}: {reason}")
            out.append(item)
        return out

    def get_map(self, key: str) -> list[tuple[str, Any, str]]:
        """(key, value, path) of an object-valued field used as a map."""
        value = self.data.get(key)
        if value is None:
            return []
        if not isinstance(value, Mapping):
            self.fail(key, f"expected an object, got {type_name(value)}")
        base = self.at(key)
        out = []
        for k, v in value.items():
            if not isinstance(k, str):
                fail(base, f"keys must be strings, got {type_name(k)} {k!r}")
            out.append((k, v, child_path(base, k)))
        return out

    def get_str_map(
        self,
        key: str,
        check_key: Callable[[str], str | None] | None = None,
        check_value: Callable[[str], str | None] | None = None,
    ) -> dict[str, str]:
        out: dict[str, str] = {}
        for k, v, path in self.get_map(key):
            if check_key is not None:
                reason = check_key(k)
                if reason is not None:
                    fail(path, f"invalid key {quote(k)}: {reason}")
            if not isinstance(v, str):
                hint = " (quote it)" if isinstance(v, int | float) else ""
                fail(path, f"expected a string, got {type_name(v)}{hint}")
            if check_value is not None:
                reason = check_value(v)
                if reason is not None:
                    fail(path, f"invalid value {quote(v)}: {reason}")
            out[k] = v
        return out

    def check_str(self, key: str, value: str, check: Callable[[str], str | None]) -> None:
        reason = check(value)
        if reason is not None:
            self.fail(key, f"invalid value {quote(value)}: {reason}")

    def check_one_of(self, key: str, value: str, allowed: tuple[str, ...]) -> None:
        if value not in allowed:
            supported = ", ".join(quote(a) for a in allowed)
            self.fail(key, f"unsupported value {quote(value)}: supported values: {supported}")
