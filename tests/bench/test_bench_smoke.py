"""`distsched bench` end to end: a small SchedulingBasic run on its own embedded server,
real worker and binder processes, JSON out, invariants checked."""

from __future__ import annotations

import json
import os
import subprocess
import sys

NUMBER = (int, float)


def test_scheduling_basic_smoke() -> None:
    cmd = [sys.executable, "-m", "distsched", "bench", "--workload", "SchedulingBasic"]
    cmd += ["--nodes", "100", "--pods", "500", "--workers", "2", "--binders", "1", "-o", "json"]
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
