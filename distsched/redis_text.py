"""Text from a Redis reply, whatever the client's ``decode_responses``.

Callers pass in their own clients (STYLE: never change a client the caller passed in), so
a reply may be bytes or str; a number from a script comes back as an int.
"""

from __future__ import annotations


def as_text(value: bytes | str | int | float) -> str:
    """``value`` as str: bytes decoded as UTF-8, anything else through ``str``."""
    return value.decode() if isinstance(value, bytes) else str(value)
