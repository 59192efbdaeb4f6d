"""Time as a parameter.

Every component that needs "now" takes a Clock. Python passes ``now_ms`` into Lua
through ARGV; no script ever calls Redis ``TIME``. Tests use :class:`FakeClock` and
step it instead of sleeping.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int:
        """Milliseconds since the Unix epoch."""
        ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class FakeClock:
    """A clock that only moves when told to."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        with self._lock:
            return self._now

    def step(self, ms: int) -> int:
        with self._lock:
            self._now += ms
            return self._now

    def set(self, ms: int) -> None:
        with self._lock:
            self._now = ms


SYSTEM_CLOCK = SystemClock()
