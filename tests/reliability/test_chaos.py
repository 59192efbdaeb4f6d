"""The chaos run (distsched.bench.chaos): random SIGKILL + restart of a worker or binder every
2 s and another one SIGSTOPped past its lease, with a ledger sampler every 100 ms.

The short version runs in CI; the long one (10,000 pods, 500 nodes, 4 workers, 2 binders)
is marked ``slow``: ``python -m pytest -m slow tests/reliability/test_chaos.py -s``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from distsched.bench.chaos import ChaosConfig, LedgerSampler, count_violations, run_chaos
from distsched.embedded import EmbeddedRedis
from distsched.keys import Keys
from tests.reliability.harness import report


def run_and_check(url: str, config: ChaosConfig, log_dir: Path) -> None:
    result = run_chaos(url, config, log_dir)
    report(result.line())
    assert result.kills >= 3 and result.stops >= 1, result.line()
    assert result.pods_lost == 0, result.violations
    assert result.overcommitted_samples == 0, result.violations
    assert result.duplicate_binds == 0
    assert result.leaked_reservations == 0
    assert result.violations == []
    assert result.samples > 50, "the sampler barely ran"


def test_chaos_short(private_redis: EmbeddedRedis, tmp_path: Path) -> None:
    config = ChaosConfig(
        pods=1_500, nodes=100, workers=3, binders=2, create_per_s=100.0, timeout_s=90
    )
    run_and_check(private_redis.url, config, tmp_path)


@pytest.mark.slow
def test_chaos_long(private_redis: EmbeddedRedis, tmp_path: Path) -> None:
    # 150 pods/s keeps the load (and the faults, ~35 kills) going for about 70 s.
    config = ChaosConfig(
        pods=10_000, nodes=500, workers=4, binders=2, create_per_s=150.0, timeout_s=900
    )
    run_and_check(private_redis.url, config, tmp_path)


def test_sampler_sees_an_overcommitted_node(r: redis.Redis, redis_url: str) -> None:
    """The sampler can fail: a node whose usage record requests more than its hash allows
    is counted (scoring's "+cpu" extra is no request), ghosts are not."""
    keys = Keys("test")
    r.sadd(keys.ledger_nodes, "a", "b", "ghost")
    r.hset(keys.ledger_node("a"), mapping={"alloc:cpu": 1000, "live": 1})
    r.hset(keys.ledger_node("b"), mapping={"alloc:pods": 2, "live": 1})
    r.hset(keys.ledger_node("ghost"), mapping={"alloc:cpu": 0, "live": 0})
    r.hset(
        keys.ledger_usage,
        mapping={"a": "3|0|+cpu=100,cpu=1000", "b": "5|0|pods=3", "ghost": "2|0|cpu=500"},
    )
    sampler = LedgerSampler(redis_url, keys)
    try:
        assert sampler.sample() == ["b pods 3 > 2"]
    finally:
        sampler.stop()


def test_checker_messages_are_counted_past_the_cap() -> None:
    messages = ["unbound: a is pending", "unbound: ... and 7 more", "double-bind: x bound 2 times"]
    assert count_violations(messages) == {"unbound": 8, "double-bind": 1}
