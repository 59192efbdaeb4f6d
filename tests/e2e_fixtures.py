"""Fixtures for tests that run real distsched processes against a private server."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from distsched.bench.procs import ProcessGroup
from distsched.embedded import EmbeddedRedis, server_binaries

SERVER_KINDS = ("valkey-server", "redis-server")
"""The servers version-sensitive tests run on: the bundled valkey (the embedded server)
and the machine's redis-server (Redis 7.0 on Debian 12, the oldest distsched supports)."""


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    """A Redis-compatible server of the test's own (crash tests kill it), everysec AOF."""
    server = EmbeddedRedis(data_dir=tmp_path / "redis", appendfsync="everysec").start()
    yield server
    server.stop()


@pytest.fixture(params=SERVER_KINDS)
def server_binary(request: pytest.FixtureRequest) -> Path:
    """Each server binary in turn, for a private server of the test's own
    (``EmbeddedRedis(binary=...)``); one missing here is skipped, except under CI."""
    found = {path.name: path for path in server_binaries()}
    if request.param not in found:
        if os.environ.get("CI"):  # pragma: no cover - environment problem
            pytest.fail(f"no {request.param} on PATH: CI runs these tests on both servers")
        pytest.skip(f"no {request.param} on this machine")
    return found[request.param]


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
