"""Shared fixtures: a real Redis, flushed before and after each test.

Set ``DISTSCHED_TEST_REDIS_URL`` to point the suite elsewhere (default: database 15 of
the local Redis). When Redis cannot be reached the tests fail (they never skip in CI).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import redis

from distsched.clock import FakeClock
from distsched.keys import Keys

pytest_plugins = ["tests.e2e_fixtures"]

TEST_REDIS_URL = os.environ.get("DISTSCHED_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


@pytest.fixture(scope="session")
def redis_url() -> str:
    client = redis.Redis.from_url(TEST_REDIS_URL)
    try:
        client.ping()
    except redis.ConnectionError as exc:  # pragma: no cover - environment problem
        pytest.fail(f"the tests need Redis at {TEST_REDIS_URL}, which is not reachable: {exc}")
    finally:
        client.close()
    return TEST_REDIS_URL


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    yield client
    client.flushdb()
    client.close()


@pytest.fixture
def keys() -> Keys:
    return Keys("test")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
