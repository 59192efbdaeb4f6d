"""`distsched bench` end to end: a small SchedulingBasic run with real worker and binder
processes, JSON out, invariants checked; once on the bench's own embedded server and once
on a fresh server of the machine's ``redis-server`` (Redis 7.0 on Debian 12), whose
consumer-group behaviour differs (7.0 lists an XREADGROUP consumer only once it read an
entry: the bench used to wait for idle workers forever there)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from distsched.embedded import EmbeddedRedis

NUMBER = (int, float)


@pytest.fixture(params=["embedded", "redis-server"])
def server_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str | None]:
    """None: the bench starts its own embedded server; else a fresh machine redis-server."""
    if request.param == "embedded":
        yield None
        return
    binary = shutil.which("redis-server")
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("CI machines have redis-server (Redis 7.0); it is missing")
        pytest.skip("no redis-server on PATH")
    with EmbeddedRedis(binary=Path(binary), data_dir=tmp_path, appendfsync="no") as server:
        yield server.url


def test_scheduling_basic_smoke(server_url: str | None) -> None:
    cmd = [sys.executable, "-m", "distsched", "bench", "--workload", "SchedulingBasic"]
    cmd += ["--nodes", "100", "--pods", "500", "--workers", "2", "--binders", "1", "-o", "json"]
    if server_url:
        cmd += ["--redis-url", server_url]
    env = {k: v for k, v in os.environ.items() if k != "DISTSCHED_REDIS_URL"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)

    assert result["workload"] == "SchedulingBasic"
    assert (result["nodes"], result["pods"], result["workers"], result["binders"]) == (
        100,
        500,
        2,
        1,
    )
    assert result["outcome"] == "complete" and result["bound"] == 500
    assert result["invariants"] == {"ok": True, "violations": []}
    for name in ("average", "p50", "p90", "p99"):
        assert isinstance(result["throughput"][name], NUMBER)
        assert result["throughput"][name] > 0
    latency = result["latency"]
    assert 0 <= latency["p50"] <= latency["p90"] <= latency["p99"] <= latency["max"]
    assert latency["max"] < 60
    assert isinstance(result["conflicts"], int) and result["conflicts"] >= 0
    assert 0 <= result["conflict_rate"] <= 1
    assert result["attempts_per_pod"] >= 1
    cpu = result["cpu_seconds_per_1000_pods"]
    assert {"workers", "binders", "redis"} <= set(cpu)
    assert cpu["workers"] > 0 and cpu["redis"] > 0
    assert result["redis_commands_per_pod"] > 0
    assert result["redis_cpu_us_per_pod"] > 0
    ceiling = result["redis_ceiling_pods_per_s"]
    assert abs(ceiling - 1e6 / result["redis_cpu_us_per_pod"]) <= 0.01 * ceiling
