"""Fixtures of the crash tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from distsched.bench.checker import BindHistory, held_history
from tests.crash.harness import KEYS


@pytest.fixture
def bind_history(private_client: redis.Redis) -> Iterator[BindHistory]:
    """Every binding of the test, read from the store's stream held since its start. The
    workers trim that stream to about 1,000 rvs behind its live readers, and a reader
    that stops reporting (a worker the test killed) lets go after a minute: a test that
    runs longer than that on a slow machine would otherwise count its first bindings as
    never made."""
    with held_history(private_client, KEYS, "crash-test-history") as history:
        yield history
