"""Fixtures of the CLI tests. The kubectl-table and kubectl-verb tests share a store on a
fake clock (``store``) and the wall clock the printers read, frozen 3m2s after it
(``frozen_clock``; kubectl's HumanDuration "3m2s"), and the constants below."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import redis

from distsched.cli import observed
from distsched.clock import FakeClock
from distsched.keys import Keys
from distsched.store import Store

DATA = Path(__file__).parent / "data" / "kubectl"
T0_MS = 1_700_000_000_000
NOW = T0_MS / 1000 + 182  # kubectl's HumanDuration: "3m2s"
KEYS = Keys("test")
Obj = dict[str, Any]


@pytest.fixture
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(observed, "wall_clock", lambda: NOW)
    monkeypatch.delenv("DISTSCHED_NAMESPACE", raising=False)


@pytest.fixture
def store(r: redis.Redis) -> Store:
    return Store(r, KEYS, FakeClock(T0_MS))
