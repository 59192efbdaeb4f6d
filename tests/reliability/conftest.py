"""Fixtures of the reliability suite: a private server whose durability the test picks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from distsched.bench.procs import ProcessGroup
from distsched.embedded import EmbeddedRedis


@pytest.fixture
def always_redis(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    """A private server with ``appendfsync always`` (every acknowledged write on disk)."""
    server = EmbeddedRedis(data_dir=tmp_path / "redis", appendfsync="always").start()
    yield server
    server.stop()


@pytest.fixture
def group_on(tmp_path: Path) -> Iterator[list[ProcessGroup]]:
    """Append ProcessGroups here; every one is stopped at the end of the test."""
    groups: list[ProcessGroup] = []
    yield groups
    for group in groups:
        group.stop()
