"""The queue benchmark runs end to end and leaves no key behind."""

from __future__ import annotations

import json

import redis
from click.testing import CliRunner

from distsched.bench.queue import BENCH_KEYS, main


def test_queue_benchmark_reports_both_modes_and_cleans_up(redis_url: str, r: redis.Redis) -> None:
    result = CliRunner().invoke(
        main, ["--pods", "120", "--batch", "50", "--redis-url", redis_url, "-o", "json"]
    )
    assert result.exit_code == 0, result.output
    runs = json.loads(result.output)["runs"]
    assert [(run["mode"], run["pods"], run["batch"]) for run in runs] == [
        ("batched", 120, 50),
        ("unbatched", 120, 1),
    ]
    assert all(run["pods_per_second"] > 0 for run in runs)
    assert r.keys(BENCH_KEYS.pattern) == []


def test_queue_benchmark_table_output(redis_url: str, r: redis.Redis) -> None:
    result = CliRunner().invoke(main, ["--pods", "10", "--batch", "3", "--redis-url", redis_url])
    assert result.exit_code == 0, result.output
    assert "batched" in result.output and "pods/s" in result.output
    bad = CliRunner().invoke(main, ["--pods", "0", "--redis-url", redis_url])
    assert bad.exit_code == 2
