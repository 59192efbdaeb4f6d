"""The bench's arithmetic: throughput samples, percentiles, the rv clock, CPU of process
trees, and the parsing of worker metrics."""

from __future__ import annotations

import os

import numpy as np
import pytest

from distsched.bench.measure import (
    RvClock,
    _parse_stat,
    histogram_quantile,
    nearest_rank,
    parse_worker_metrics,
    process_table,
    throughput_samples,
    tree_cpu_seconds,
)


def test_nearest_rank_matches_scheduler_perf() -> None:
    values = [float(v) for v in range(1, 11)]
    assert nearest_rank(values, 50) == 5.0
    assert nearest_rank(values, 90) == 9.0
    assert nearest_rank(values, 99) == 10.0
    assert nearest_rank([7.0], 99) == 7.0


def test_throughput_skips_first_sample_and_merges_empty_intervals() -> None:
    start = 100.0
    # 0-1 s: nothing; 1-2 s: 5 pods (the first sample, skipped); 2-3 s: 10 pods;
    # 3-4 s: nothing; 4-5 s: 20 pods; 5-5.5 s: 3 pods in a partial interval (dropped).
    bound = np.array(
        [101.5] * 5 + [102.5] * 10 + [104.5] * 20 + [105.2, 105.3, 105.4], dtype=np.float64
    )
    assert throughput_samples(bound, start) == [10.0, 10.0, 10.0]


def test_throughput_of_a_run_shorter_than_two_ticks_has_no_sample() -> None:
    assert throughput_samples(np.array([100.2, 100.9, 101.5]), 100.0) == []
    assert throughput_samples(np.array([]), 100.0) == []


def test_rv_clock_interpolates_between_the_last_and_first_sightings() -> None:
    # rv 10 seen from t=0 to t=1; rv 20 first seen at t=2, still at t=3; rv 30 at t=4.
    clock = RvClock([0.0, 1.0, 2.0, 3.0, 4.0], [10, 10, 20, 20, 30])
    times = clock.times_of([15, 20, 25, 10, 5, 99])
    assert times[0] == pytest.approx(1.5)  # halfway between last seen 10 (t=1) and 20 (t=2)
    assert times[1] == pytest.approx(2.0)
    assert times[2] == pytest.approx(3.5)  # between last seen 20 (t=3) and 30 (t=4)
    assert times[3] == pytest.approx(0.0)  # at or before the first sample
    assert times[4] == pytest.approx(0.0)
    assert times[5] == pytest.approx(4.0)  # after the last sample: clamped


def test_histogram_quantile_interpolates_within_a_bucket() -> None:
    buckets = {0.1: 50.0, 0.2: 100.0, float("inf"): 100.0}
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.1)
    assert histogram_quantile(0.75, buckets) == pytest.approx(0.15)
    assert histogram_quantile(0.5, {float("inf"): 0.0}) is None


def test_parse_worker_metrics_sums_workers() -> None:
    text = """\
# TYPE distsched_reserve_conflicts_total counter
distsched_reserve_conflicts_total{reason="resources"} 3.0
distsched_reserve_conflicts_total{reason="ports"} 1.0
# TYPE distsched_schedule_attempts_total counter
distsched_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 90.0
distsched_schedule_attempts_total{profile="default-scheduler",result="unschedulable"} 2.0
# TYPE distsched_scheduling_attempt_duration_seconds histogram
distsched_scheduling_attempt_duration_seconds_bucket{le="0.1",profile="p",result="scheduled"} 80.0
distsched_scheduling_attempt_duration_seconds_bucket{le="+Inf",profile="p",result="scheduled"} 90.0
distsched_scheduling_attempt_duration_seconds_count{profile="p",result="scheduled"} 90.0
distsched_scheduling_attempt_duration_seconds_sum{profile="p",result="scheduled"} 4.0
# TYPE distsched_podgroup_scheduling_attempts_total counter
distsched_podgroup_scheduling_attempts_total{result="scheduled"} 30.0
distsched_podgroup_scheduling_attempts_total{result="unschedulable"} 1.0
# TYPE distsched_podgroup_scheduling_attempt_duration_seconds histogram
distsched_podgroup_scheduling_attempt_duration_seconds_bucket{le="+Inf",result="scheduled"} 30.0
distsched_podgroup_scheduling_attempt_duration_seconds_count{result="scheduled"} 30.0
distsched_podgroup_scheduling_attempt_duration_seconds_sum{result="scheduled"} 0.15
# TYPE distsched_gc_seconds_total counter
distsched_gc_seconds_total{generation="0"} 0.25
distsched_gc_seconds_total{generation="2"} 0.5
# TYPE distsched_worker_phase_cpu_seconds_total counter
distsched_worker_phase_cpu_seconds_total{phase="decide"} 2.5
distsched_worker_phase_cpu_seconds_total{phase="follow"} 0.75
"""
    counters = parse_worker_metrics([text, text])
    assert counters.conflicts == 8.0
    assert counters.attempts == {"scheduled": 180.0, "unschedulable": 4.0}
    assert counters.attempt_buckets == {0.1: 160.0, float("inf"): 180.0}
    delta = counters - parse_worker_metrics([text])
    assert delta.conflicts == 4.0 and delta.attempts["scheduled"] == 90.0
    assert counters.podgroup_attempts == {"scheduled": 60.0, "unschedulable": 2.0}
    assert delta.podgroup_duration_count == {"scheduled": 30.0}
    assert delta.podgroup_duration_sum == {"scheduled": pytest.approx(0.15)}
    assert counters.gc_seconds == pytest.approx(1.5)  # every generation, every worker
    assert delta.gc_seconds == pytest.approx(0.75)
    assert counters.phase_seconds == {"decide": 5.0, "follow": 1.5}
    assert delta.phase_seconds == {"decide": 2.5, "follow": 0.75}


def test_parse_stat_handles_spaces_and_parentheses_in_the_name() -> None:
    line = "42 (my (odd) name) S 7 42 42 0 -1 4194304 100 0 0 0 15 5 0 0 20 0 1 0 1 0 0"
    assert _parse_stat(line) == (7, 20)


def test_tree_cpu_counts_descendants_once() -> None:
    table = {1: (0, 100), 2: (1, 50), 3: (2, 25), 4: (0, 1000)}
    ticks = os.sysconf("SC_CLK_TCK")
    assert tree_cpu_seconds([1], table) == pytest.approx(175 / ticks)
    assert tree_cpu_seconds([1, 2, 99], table) == pytest.approx(175 / ticks)
    assert os.getpid() in process_table()
