"""kubectl's ``-l`` label selectors and ``--field-selector`` field selectors, parsed and
matched as the API server does (k8s.io/apimachinery labels.Parse and fields.ParseSelector).

Label selectors: comma-separated requirements, all of which must hold: ``key=value``,
``key==value``, ``key!=value`` (also true when the key is absent), ``key in (a,b)``,
``key notin (a,b)`` (also true when absent), ``key`` (exists), ``!key`` (does not
exist), ``key>N`` and ``key<N`` (the value read as an integer).

Field selectors: comma-separated ``field=value``, ``field==value`` or ``field!=value``
over the fields the API server indexes for the kind: every kind ``metadata.name`` and
``metadata.namespace``; pods also ``spec.nodeName`` (empty: unbound), ``spec.schedulerName``,
``spec.serviceAccountName``, ``spec.restartPolicy``, ``spec.hostNetwork``, ``status.phase``,
``status.nominatedNodeName``, ``status.podIP``; nodes ``spec.unschedulable``; events
``involvedObject.{kind,namespace,name,uid,apiVersion,fieldPath}``, ``reason``, ``type``,
``source``, ``reportingComponent``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]

_KEY_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


class SelectorError(ValueError):
    """A selector the API server would refuse (the message says why)."""


@dataclass(frozen=True, slots=True)
class LabelRequirement:
    key: str
    operator: str  # "=", "!=", "in", "notin", "exists", "!", ">", "<"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        op = self.operator
        if op in ("=", "in"):
            return value is not None and value in self.values
        if op in ("!=", "notin"):
            return value is None or value not in self.values
        if op == "exists":
            return value is not None
        if op == "!":
            return value is None
        if value is None:
            return False
        try:
            have, bound = int(value), int(self.values[0])
        except ValueError:
            return False
        return have > bound if op == ">" else have < bound


@dataclass(frozen=True, slots=True)
class LabelSelector:
    requirements: tuple[LabelRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)


def _split_top_level(text: str) -> list[str]:
    """``text`` split at the commas outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _check_key(key: str, text: str) -> str:
    if not _KEY_RE.match(key) or len(key.rpartition("/")[2]) > 63:
        raise SelectorError(f"unable to parse requirement: invalid label key {key!r} in {text!r}")
    return key


def _check_value(value: str, text: str) -> str:
    if len(value) > 63 or not _VALUE_RE.match(value):
        raise SelectorError(
            f"unable to parse requirement: invalid label value {value!r} in {text!r}"
        )
    return value


_SET_RE = re.compile(r"^\s*(\S+)\s+(in|notin)\s*\((.*)\)\s*$")
_OP_RE = re.compile(r"^\s*([^=!<>\s]+)\s*(==|=|!=|<|>)\s*(.*?)\s*$")


def parse_label_selector(text: str) -> LabelSelector:
    """``-l``'s selector; SelectorError naming what is wrong."""
    if not text.strip():
        return LabelSelector()
    requirements = []
    for part in _split_top_level(text):
        if not part.strip():
            raise SelectorError(f"found '', expected: identifier in {text!r}")
        set_match = _SET_RE.match(part)
        if set_match:
            key, op, inner = set_match.groups()
            values = tuple(v.strip() for v in inner.split(",")) if inner.strip() else ()
            if not values:
                raise SelectorError(
                    f"for 'in', 'notin' operators, values set can't be empty: {part!r}"
                )
            requirements.append(
                LabelRequirement(
                    _check_key(key, text), op, tuple(_check_value(v, text) for v in values)
                )
            )
            continue
        op_match = _OP_RE.match(part)
        if op_match:
            key, op, value = op_match.groups()
            op = "=" if op == "==" else op
            if op in ("<", ">") and not re.fullmatch(r"-?[0-9]+", value):
                raise SelectorError(
                    f"for 'Gt', 'Lt' operators, the value must be an integer: {part!r}"
                )
            requirements.append(
                LabelRequirement(_check_key(key, text), op, (_check_value(value, text),))
            )
            continue
        bare = part.strip()
        if bare.startswith("!"):
            requirements.append(LabelRequirement(_check_key(bare[1:].strip(), text), "!"))
        else:
            requirements.append(LabelRequirement(_check_key(bare, text), "exists"))
    return LabelSelector(tuple(requirements))


# --- field selectors -----------------------------------------------------------------------


def _path(*keys: str) -> Callable[[Obj], str]:
    def get(obj: Obj) -> str:
        value: Any = obj
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, bool):
            return "true" if value else "false"
        return "" if value is None else str(value)

    return get


def _pod_phase(obj: Obj) -> str:
    return str((obj.get("status") or {}).get("phase") or "Pending")


_COMMON_FIELDS: dict[str, Callable[[Obj], str]] = {
    "metadata.name": _path("metadata", "name"),
    "metadata.namespace": _path("metadata", "namespace"),
}
FIELDS: dict[str, dict[str, Callable[[Obj], str]]] = {
    "Pod": {
        **_COMMON_FIELDS,
        "spec.nodeName": _path("spec", "nodeName"),
        "spec.schedulerName": _path("spec", "schedulerName"),
        "spec.serviceAccountName": _path("spec", "serviceAccountName"),
        "spec.restartPolicy": _path("spec", "restartPolicy"),
        "spec.hostNetwork": lambda o: (
            "true" if (o.get("spec") or {}).get("hostNetwork") else "false"
        ),
        "status.phase": _pod_phase,
        "status.nominatedNodeName": _path("status", "nominatedNodeName"),
        "status.podIP": _path("status", "podIP"),
    },
    # the API server's field labels of core/v1 Events
    "Event": {
        **_COMMON_FIELDS,
        **{
            f"involvedObject.{f}": _path("involvedObject", f)
            for f in ("kind", "namespace", "name", "uid", "apiVersion", "fieldPath")
        },
        "reason": _path("reason"),
        "type": _path("type"),
        "source": _path("source", "component"),
        "reportingComponent": _path("reportingComponent"),
    },
    "Node": {
        **_COMMON_FIELDS,
        "spec.unschedulable": lambda o: (
            "true" if (o.get("spec") or {}).get("unschedulable") else "false"
        ),
    },
}


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    field: str
    equal: bool
    value: str


@dataclass(frozen=True, slots=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...] = ()

    def check(self, kind: str, resource: str) -> None:
        """SelectorError when ``kind`` has no such field (as the API server refuses it)."""
        known = FIELDS.get(kind, _COMMON_FIELDS)
        for req in self.requirements:
            if req.field not in known:
                raise SelectorError(
                    f'Unable to find "{resource}" that match label selector "", field '
                    f'selector "{req.field}{"=" if req.equal else "!="}{req.value}": field '
                    f"label not supported: {req.field}"
                )

    def matches(self, kind: str, obj: Obj) -> bool:
        known = FIELDS.get(kind, _COMMON_FIELDS)
        return all((known[r.field](obj) == r.value) == r.equal for r in self.requirements)


_FIELD_RE = re.compile(r"^\s*([^=!\s]+)\s*(==|=|!=)\s*(.*?)\s*$")


def parse_field_selector(text: str) -> FieldSelector:
    """``--field-selector``'s selector; SelectorError naming what is wrong."""
    if not text.strip():
        return FieldSelector()
    requirements = []
    for part in text.split(","):
        match = _FIELD_RE.match(part)
        if match is None:
            raise SelectorError(f"invalid selector: {text!r}; can't understand {part!r}")
        field, op, value = match.groups()
        requirements.append(FieldRequirement(field, op != "!=", value))
    return FieldSelector(tuple(requirements))
