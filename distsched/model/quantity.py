"""Kubernetes resource quantities (``resource.Quantity``) as integers in canonical units.

Accepted syntax (the grammar of Kubernetes' quantity type)::

    quantity  ::= sign? number suffix?
    sign      ::= "+" | "-"
    number    ::= digits ("." digits?)? | "." digits
    suffix    ::= "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei"        (powers of 1024)
               |  "n" | "u" | "m" | "k" | "M" | "G" | "T" | "P" | "E"   (powers of 1000)
               |  ("e" | "E") sign? digits                            (powers of 10)

No spaces, no other suffix (``K`` is not kilo; ``1E`` is one exa, ``1E3`` is 1000).
Unlike Kubernetes we also reject a bare sign or dot (Kubernetes parses ``"-"`` as 0).

Canonical units: cpu in millicores, every other resource in whole units (bytes for
memory, ephemeral-storage and hugepages). Fractions round up, away from zero, like
``Quantity.MilliValue()`` / ``Quantity.Value()``: ``0.1m`` cpu is 1 millicore and
``0.5`` bytes is 1 byte.

Amounts are bounded by :data:`MAX_AMOUNT` (2^53-1 in canonical units), not by int64 as in
Kubernetes: the ledger adds and compares amounts in Lua, whose numbers are doubles, exact
only up to 2^53. A larger amount is rejected here, when a manifest is read, rather than
accepted and then refused by the ledger at runtime. The limit is far beyond real hardware
(2^53-1 millicores is 9 * 10^12 cores; 2^53-1 bytes is 8 PiB).
"""

from __future__ import annotations

import math
import re

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"
HUGEPAGES_PREFIX = "hugepages-"

MAX_AMOUNT = 2**53 - 1
"""The largest amount distsched can account, in canonical units (see the module docstring);
the ledger's checks (``cache.ledger_types.check_count``, ``lua/lib/numbers.lua``) and the
snapshot use the same bound."""
MAX_QUANTITY_CHARS = 100  # bounds the work of parsing; real quantities are short

_QUANTITY_RE = re.compile(
    r"(?P<sign>[+-]?)"
    r"(?:(?P<int>[0-9]+)(?:\.(?P<frac>[0-9]*))?|\.(?P<frac_only>[0-9]+))"
    r"(?:(?P<bin>[KMGTPE]i)|(?P<dec>[numkMGTPE])|[eE](?P<exp>[+-]?[0-9]+))?"
)

_DECIMAL_SUFFIX = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIX = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_BINARY_FORMAT = (("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10))


def is_milli_resource(resource: str) -> bool:
    """Whether ``resource`` is counted in thousandths (only cpu)."""
    return resource == CPU


def is_byte_resource(resource: str) -> bool:
    return resource in (MEMORY, EPHEMERAL_STORAGE) or resource.startswith(HUGEPAGES_PREFIX)


def amount_limit(resource: str) -> str:
    """:data:`MAX_AMOUNT` with the canonical unit of ``resource``, for messages."""
    unit = " millicores" if is_milli_resource(resource) else ""
    if is_byte_resource(resource):
        unit = " bytes"
    return f"2^53-1{unit}"


def over_limit(shown: str, resource: str) -> str:
    """The reason given for an amount above :data:`MAX_AMOUNT` (``shown`` as written)."""
    return f"{shown} exceeds the largest amount distsched can account ({amount_limit(resource)})"


def parse_quantity(value: str | int | float, resource: str) -> int:
    """``value`` in the canonical unit of ``resource``; ValueError when malformed or when
    its magnitude exceeds :data:`MAX_AMOUNT`.

    YAML/JSON numbers are accepted too (``cpu: 2``, ``cpu: 0.5``); booleans are not.
    """
    if isinstance(value, bool):
        raise ValueError(f"invalid quantity {value!r}: expected a string or a number")
    if isinstance(value, int):
        text = str(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"invalid quantity {value!r}: not a finite number")
        text = repr(value)  # shortest round-tripping form, e.g. "0.1" or "1e-05"
    elif isinstance(value, str):
        text = value
    else:
        raise ValueError(f"invalid quantity of type {type(value).__name__}")
    if len(text) > MAX_QUANTITY_CHARS:
        raise ValueError(f"invalid quantity {text[:20]!r}...: longer than {MAX_QUANTITY_CHARS}")
    match = _QUANTITY_RE.fullmatch(text)
    if match is None:
        raise ValueError(f"invalid quantity {_quote(text)}")
    return _scale(match, resource=resource, text=text)


def _scale(match: re.Match[str], *, resource: str, text: str) -> int:
    milli = is_milli_resource(resource)
    int_digits = match["int"] or ""
    frac_digits = match["frac"] if match["frac"] is not None else (match["frac_only"] or "")
    mantissa = int((int_digits + frac_digits) or "0")
    exp10 = -len(frac_digits) + (3 if milli else 0)
    exp2 = 0
    if match["bin"]:
        exp2 = _BINARY_SUFFIX[match["bin"]]
    elif match["dec"]:
        exp10 += _DECIMAL_SUFFIX[match["dec"]]
    elif match["exp"] is not None:
        exp10 += int(match["exp"])
    if mantissa == 0:
        return 0
    if exp10 > 40:  # bounds the work below; far beyond MAX_AMOUNT whatever the mantissa
        raise ValueError(over_limit(text, resource))
    if exp10 < -200:
        # mantissa < 10**100 and 2**exp2 <= 2**60, so the value is a positive fraction < 1.
        magnitude = 1
    else:
        numerator = mantissa << exp2
        # Fractions round up (away from zero; the sign is applied last).
        magnitude = numerator * 10**exp10 if exp10 >= 0 else -(-numerator // 10**-exp10)
    if magnitude > MAX_AMOUNT:
        raise ValueError(over_limit(text, resource))
    return -magnitude if match["sign"] == "-" else magnitude


def format_quantity(amount: int, resource: str) -> str:
    """The canonical string for ``amount`` (in the canonical unit of ``resource``).

    cpu: ``"250m"`` or whole cores ``"2"``; byte resources: the largest exact binary
    suffix (``"1Gi"``), else plain bytes; everything else: the plain integer.
    ``parse_quantity(format_quantity(n, r), r) == n`` for every ``|n| <= MAX_AMOUNT``.
    """
    if is_milli_resource(resource):
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if amount and is_byte_resource(resource):
        for suffix, shift in _BINARY_FORMAT:
            if amount % (1 << shift) == 0:
                return f"{amount >> shift}{suffix}"
    return str(amount)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
