"""Fixtures for the store tests."""

from __future__ import annotations

import pytest
import redis

from distsched.clock import FakeClock
from distsched.keys import Keys
from distsched.store import Store


@pytest.fixture
def store(r: redis.Redis, keys: Keys, clock: FakeClock) -> Store:
    return Store(r, keys, clock)
