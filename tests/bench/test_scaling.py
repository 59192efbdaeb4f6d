"""The scaling projection: fits over measured worker counts, and the comma-list option."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from distsched.bench.scaling import fit_line, parse_worker_counts, projection, worker_cpu_ratios


def result(workers: int, worker_ms: float, redis_us: float) -> dict[str, Any]:
    return {
        "workers": workers,
        "throughput": {"overall": 1000.0, "average": 1000.0},
        "cpu_seconds_per_1000_pods": {"workers": worker_ms, "binders": 0.1, "redis": 0.2},
        "redis_cpu_us_per_pod": redis_us,
        "conflict_rate": 0.0,
        "invariants": {"ok": True, "violations": []},
    }


def test_fit_line_recovers_an_exact_line() -> None:
    line = fit_line([1, 2, 4], [0.3 + 0.1 * w for w in (1, 2, 4)])
    assert line.intercept == pytest.approx(0.3) and line.slope == pytest.approx(0.1)
    with pytest.raises(ValueError):
        fit_line([2, 2], [1.0, 2.0])


def test_projection_is_the_smaller_of_the_worker_and_redis_limits() -> None:
    # worker CPU per pod 0.2 ms once + 0.1 ms per worker; Redis 40 us + 10 us per worker
    runs = [result(w, 0.2 + 0.1 * w, 40 + 10 * w) for w in (1, 2, 4)]
    report = projection(runs)
    assert report["kind"] == "projection"
    rows = {row["worker_machines"]: row for row in report["projection"]}
    # N=1: workers 1/(0.3 ms) = 3,333/s; Redis 1/(50 us) = 20,000/s
    assert rows[1]["projected_pods_per_s"] == 3333 and rows[1]["bound_by"] == "workers"
    # N=16: workers 16/(1.8 ms) = 8,889/s; Redis 1/(200 us) = 5,000/s
    assert rows[16]["projected_pods_per_s"] == 5000 and rows[16]["bound_by"] == "redis"
    assert [m["workers"] for m in report["measured"]] == [1, 2, 4]


def test_rounds_give_each_rounds_worker_cpu_ratio_and_the_median() -> None:
    # three interleaved rounds of 1, 2, 4 workers; W=4 / W=1 = 1.2, 1.6, 1.3
    runs = []
    for at_one, at_four in ((0.40, 0.48), (0.35, 0.56), (0.40, 0.52)):
        runs += [result(1, at_one, 150), result(2, (at_one + at_four) / 2, 150)]
        runs.append(result(4, at_four, 150))
    report = projection(runs, rounds=3)
    assert report["worker_cpu_ratio"] == {
        "workers": [1, 4],
        "per_round": [1.2, 1.6, 1.3],
        "median": 1.3,
        "speed_adjusted": None,  # no phase figures in these results
    }
    assert [m["round"] for m in report["measured"]] == [1, 1, 1, 2, 2, 2, 3, 3, 3]
    # the fit goes through every run, not one per count
    every = fit_line(
        [r["workers"] for r in runs], [r["cpu_seconds_per_1000_pods"]["workers"] for r in runs]
    )
    assert report["model"]["worker_ms_per_pod_per_worker"] == round(every.slope, 4)
    assert worker_cpu_ratios(runs[:6], rounds=2)["median"] == pytest.approx(1.4)


def test_the_speed_adjusted_ratio_takes_out_the_per_pod_phases_drift() -> None:
    """Round 2's W=4 run met a machine 20 % slower: its per-pod phases (pop, prepare,
    reserve, bind) cost 1.2x what they cost at W=1; the adjusted ratio divides that out,
    and keeps what grows with the workers (follow, feed)."""

    def with_phases(workers: int, cpu: float, per_pod: float, follow: float) -> dict[str, Any]:
        run = result(workers, cpu, 150)
        run["worker_cpu_us_per_pod_by_phase"] = {
            "decide": 60.0,
            "follow": follow,
            "pop": per_pod / 4,
            "prepare": per_pod / 4,
            "reserve": per_pod / 4,
            "bind": per_pod / 4,
        }
        return run

    runs = [
        with_phases(1, 0.20, 80.0, 10.0),
        with_phases(4, 0.26, 80.0, 40.0),
        with_phases(1, 0.20, 80.0, 10.0),
        with_phases(4, 0.312, 96.0, 40.0),
    ]
    ratio = worker_cpu_ratios(runs, rounds=2)
    assert ratio["per_round"] == [1.3, 1.56]
    assert ratio["speed_adjusted"] == {"per_round": [1.3, 1.3], "median": 1.3}
    runs[3]["worker_cpu_us_per_pod_by_phase"] = None  # a run without them: no adjustment
    assert worker_cpu_ratios(runs, rounds=2)["speed_adjusted"] is None


def test_rounds_need_a_scaling_run_exit_2() -> None:
    cmd = [sys.executable, "-m", "distsched", "bench", "--workers", "2", "--rounds", "3"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--rounds 3" in proc.stderr


def test_a_negative_slope_is_treated_as_noise() -> None:
    report = projection([result(1, 0.5, 50), result(2, 0.4, 45)])
    assert report["model"]["worker_ms_per_pod_per_worker"] == 0.0
    assert report["model"]["redis_us_per_pod_per_worker"] == 0.0


@pytest.mark.parametrize("text", ["", "1,,x", "2,2"])
def test_bad_worker_lists(text: str) -> None:
    with pytest.raises(ValueError):
        parse_worker_counts(text)


def test_scaling_run_refuses_rate_with_exit_2() -> None:
    cmd = [sys.executable, "-m", "distsched", "bench", "--workers", "1,2", "--rate", "10"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "scaling run" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
