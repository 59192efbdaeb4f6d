"""Fixtures for tests that run real distsched processes against a private server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from distsched.bench.procs import ProcessGroup
from distsched.embedded import EmbeddedRedis


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    """A Redis-compatible server of the test's own (crash tests kill it), everysec AOF."""
    server = EmbeddedRedis(data_dir=tmp_path / "redis", appendfsync="everysec").start()
    yield server
    server.stop()


@pytest.fixture
def private_client(private_redis: EmbeddedRedis) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(private_redis.url)
    yield client
    client.close()


@pytest.fixture
def processes(private_redis: EmbeddedRedis, tmp_path: Path) -> Iterator[ProcessGroup]:
    """Spawn workers/binders with ``processes.spawn("worker")``; all stopped at the end.
    Their logs are in the test's tmp_path (printed by pytest on failure via -rA)."""
    group = ProcessGroup(private_redis.url, log_dir=tmp_path)
    yield group
    group.stop()
