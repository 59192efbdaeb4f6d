"""Issue 24, item 1: the churn soak (distsched.bench.soak). Pods are created at a steady
rate and each deleted a few seconds later, against real worker and binder processes;
after a delete-all, nothing is left per pod, the ledger holds no reservation, and Redis
memory has not grown with the run's length.

The short version runs in CI; the long one (10 minutes at 250 pods/s, 150,000 pods, 50
nodes, 2 workers, 1 binder) is marked ``slow``:
``python -m pytest -m slow tests/reliability/test_soak.py -s``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from distsched.bench.soak import SoakConfig, run_soak
from distsched.embedded import EmbeddedRedis
from tests.reliability.harness import report


def run_and_check(url: str, config: SoakConfig, log_dir: Path, *, highest_mb: float) -> None:
    result = run_soak(url, config, log_dir)
    report(result.line())
    expected = int(config.minutes * 60 * config.rate)
    assert result.created >= 0.95 * expected, result.line()
    assert result.deleted == result.created and result.bound == result.created, result.line()
    assert result.ledger_reservations == 0, result.line()
    assert result.per_pod_keys == {}, result.line()
    assert result.violations == []
    # The consistency sweep had nothing to repair: no race left a record behind.
    assert result.sweep_repairs.get("reservation", 0) == 0, result.sweep_repairs
    memory = result.memory_mb
    assert memory["highest"] <= highest_mb, result.line()
    assert memory["last_third"] <= 1.25 * memory["second_third"] + 2, result.line()
    assert result.stream_entries["store:events"] <= 1_200, result.line()
    assert result.stream_entries["q:events"] <= 200, result.line()


def test_soak_short(private_redis: EmbeddedRedis, tmp_path: Path) -> None:
    config = SoakConfig(minutes=0.75, rate=100, lifetime_s=5, nodes=20, drain_timeout_s=60)
    run_and_check(private_redis.url, config, tmp_path, highest_mb=32)


@pytest.mark.slow
def test_soak_long(private_redis: EmbeddedRedis, tmp_path: Path) -> None:
    config = SoakConfig(minutes=10, rate=250, lifetime_s=10, nodes=50)
    run_and_check(private_redis.url, config, tmp_path, highest_mb=64)
