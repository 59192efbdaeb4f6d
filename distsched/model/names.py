"""Kubernetes name and label syntax checks.

Each check returns ``None`` when the value is valid, else the reason (a sentence
fragment without the value, which the caller quotes).
"""

from __future__ import annotations

import ipaddress
import re

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
QUALIFIED_NAME_MAX = 63
LABEL_VALUE_MAX = 63

_DNS1123_LABEL_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN_RE = re.compile(
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
)
_QUALIFIED_NAME_RE = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")


def dns1123_label(value: str) -> str | None:
    if len(value) > DNS1123_LABEL_MAX:
        return f"must be no more than {DNS1123_LABEL_MAX} characters"
    if not _DNS1123_LABEL_RE.fullmatch(value):
        return (
            "must be a lowercase RFC 1123 label: lowercase alphanumeric characters or '-',"
            " starting and ending with an alphanumeric character"
        )
    return None


def dns1123_subdomain(value: str) -> str | None:
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        return f"must be no more than {DNS1123_SUBDOMAIN_MAX} characters"
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        return (
            "must be a lowercase RFC 1123 subdomain: lowercase alphanumeric characters,"
            " '-' or '.', starting and ending with an alphanumeric character"
        )
    return None


def dns1035_label(value: str) -> str | None:
    """A Service's name: a DNS-1123 label that starts with a letter."""
    reason = dns1123_label(value)
    if reason is None and not value[:1].isalpha():
        return "must be a lowercase RFC 1035 label: it must start with a letter"
    return reason


def path_segment(value: str) -> str | None:
    """An RBAC object's name (``system:aggregate-to-admin``): anything that can be one
    segment of a URL path."""
    if value in (".", ".."):
        return "may not be '.' or '..'"
    for bad in ("/", "%"):
        if bad in value:
            return f"may not contain {bad!r}"
    return None


def qualified_name(value: str) -> str | None:
    """A label key / annotation key / resource name: ``[prefix/]name``."""
    prefix, slash, name = value.rpartition("/")
    if slash:
        if not prefix:
            return "prefix part must be non-empty"
        if "/" in prefix:
            return "must have at most one '/'"
        reason = dns1123_subdomain(prefix)
        if reason is not None:
            return f"prefix part {reason}"
    if not name:
        return "name part must be non-empty"
    if len(name) > QUALIFIED_NAME_MAX:
        return f"name part must be no more than {QUALIFIED_NAME_MAX} characters"
    if not _QUALIFIED_NAME_RE.fullmatch(name):
        return (
            "name part must consist of alphanumeric characters, '-', '_' or '.',"
            " starting and ending with an alphanumeric character"
        )
    return None


def label_value(value: str) -> str | None:
    if value == "":
        return None
    if len(value) > LABEL_VALUE_MAX:
        return f"must be no more than {LABEL_VALUE_MAX} characters"
    if not _QUALIFIED_NAME_RE.fullmatch(value):
        return (
            "must be empty or consist of alphanumeric characters, '-', '_' or '.',"
            " starting and ending with an alphanumeric character"
        )
    return None


def ip_address(value: str) -> str | None:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return "must be a valid IP address"
    return None
