"""Turn a run's raw measurements into the bench's figures; print them; plot them.

Definitions (also in BENCHMARKS.md):

* throughput: scheduler_perf's SchedulingThroughput over 1 s samples of bound measured
  pods (see :func:`distsched.bench.measure.throughput_samples`); average and nearest-rank
  percentiles. With no full sample (a run shorter than ~2 s) every figure is the overall
  rate, bound pods / (last binding - first creation), and ``samples`` is 0.
* latency: created -> bound per measured pod, in seconds, from the store rvs of both
  writes mapped to time (:class:`distsched.bench.measure.RvClock`).
* conflict_rate: ledger refusals / (refusals + successful scheduling attempts).
* attempts_per_pod: scheduling attempts of any result / measured pods bound.
* cpu_seconds_per_1000_pods: CPU of each role during the measured phase per 1,000 bound
  measured pods; ``bench`` is this process (pod creation and sampling).
* worker_gc_seconds_per_1000_pods: the part of the workers' CPU above spent in Python's
  garbage collector (``distsched_gc_seconds_total``), same phase and unit.
* worker_cpu_us_per_pod_by_phase: the workers' scheduling loops' CPU, summed over the
  workers, per bound measured pod in µs, by phase of a turn
  (``distsched_worker_phase_cpu_seconds_total``; :mod:`distsched.workers.phases` says what
  each phase holds): with several workers, ``follow`` and ``feed`` grow with their number
  (each follows the whole cluster) while the others stay per pod.
* redis_*: INFO deltas over the measured phase per bound measured pod; they include the
  creation of the pods (the API server's share) and the bench's sampling. Commands run
  inside Lua scripts count as commands, and a script's usec includes theirs.
* host.other_cpu_cores: CPU the rest of the machine used during the phase (all busy CPU
  of /proc/stat minus the roles above), in cores: on a shared 2-core box, the figures of
  a run with a high value are not comparable.
* host.code: the directory the bench imported distsched from (its roles, started from the
  same directory and environment, run the same code): which checkout a before/after pair
  measured. ``python -m`` puts the current directory first on sys.path, ahead of
  PYTHONPATH, so run a worktree's code from inside the worktree.
* redis_scripts (``--redis-profile`` only): µs and calls per pod of each Lua script, from
  the slow log.
* redis_script_commands (``--redis-profile`` on a server that marks a script's commands in
  its slow log, as Redis 7.0 does; else null): per script, µs and calls per pod of the
  commands it ran, by command and key (``HMGET store:meta:Pod``, ``SADD cache:nodepods:*``):
  what a script's time is not Lua's own.
* gangs (gang workloads only, else null): see :mod:`distsched.bench.gangs`.
* placement.pods_per_node: min, max, mean and stddev of the bound pods (init and measured)
  per node, every node counted: how evenly several workers spread identical pods.
* churn (churn workloads only, else null): ``steps`` taken; ``preemptors_bound`` of the
  pods the churn created (PreemptionAsync); ``measured_preempted``: measured pods deleted
  as victims (PreemptionAsync counts them done).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import distsched
from distsched.bench.measure import (
    RedisStats,
    ScriptTimes,
    WorkerCounters,
    histogram_quantile,
    nearest_rank,
    throughput_samples,
)
from distsched.output import err_console, print_table

TOP_COMMANDS = 10

# The checkout this bench runs (reported with every run: see host.code above).
CODE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(distsched.__file__)))


@dataclass
class RawRun:
    workload: str
    nodes: int
    init_pods: int
    pods: int
    workers: int | None  # None: an external deployment whose workers are unknown
    binders: int | None
    rate: float
    outcome: str
    start: float
    end: float
    created_at: np.ndarray  # monotonic seconds, per bound measured pod
    bound_at: np.ndarray
    all_created_at: np.ndarray  # every measured pod created
    cpu: dict[str, float | None]  # role -> CPU seconds during the phase
    other_cpu_cores: float | None  # CPU of the machine's other processes, in cores
    load_average: float  # 1-minute load average at the end of the phase
    redis: RedisStats
    counters: WorkerCounters | None
    scripts: ScriptTimes | None  # --redis-profile
    violations: list[str]
    warnings: list[str]
    gangs: dict[str, Any] | None = None  # gang workloads: bench.gangs.gang_figures
    placement: dict[str, float] | None = None  # bound pods per node: runner.placement_figures
    churn: dict[str, int] | None = None  # churn workloads: what the churn did


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(float(value), digits)


def _per_pod(value: float | None, pods: int, scale: float = 1.0) -> float | None:
    return None if value is None or pods == 0 else value * scale / pods


def _script_figures(
    times: dict[str, tuple[int, int]], bound: int
) -> dict[str, dict[str, float | None]]:
    """name -> (calls, µs) as calls and µs per pod, the costliest first."""
    return {
        name: {
            "calls_per_pod": _round(_per_pod(calls, bound), 3),
            "usec_per_pod": _round(_per_pod(usec, bound), 3),
        }
        for name, (calls, usec) in sorted(times.items(), key=lambda kv: kv[1][1], reverse=True)
    }


def throughput_figures(run: RawRun) -> dict[str, Any]:
    bound = len(run.bound_at)
    span = float(run.bound_at.max() - run.start) if bound else 0.0
    overall = bound / span if span > 0 else 0.0
    samples = sorted(throughput_samples(run.bound_at, run.start))
    if samples:
        average = sum(samples) / len(samples)
        p50, p90, p99 = (nearest_rank(samples, p) for p in (50, 90, 99))
    else:
        average = p50 = p90 = p99 = overall
    return {
        "average": _round(average, 1),
        "p50": _round(p50, 1),
        "p90": _round(p90, 1),
        "p99": _round(p99, 1),
        "samples": len(samples),
        "overall": _round(overall, 1),
    }


def latency_figures(run: RawRun) -> dict[str, float | None]:
    latencies = np.sort(np.maximum(run.bound_at - run.created_at, 0.0))
    if len(latencies) == 0:
        return {"p50": None, "p90": None, "p99": None, "max": None}
    values = latencies.tolist()
    return {
        "p50": _round(nearest_rank(values, 50)),
        "p90": _round(nearest_rank(values, 90)),
        "p99": _round(nearest_rank(values, 99)),
        "max": _round(values[-1]),
    }


def build_result(run: RawRun) -> dict[str, Any]:
    bound = len(run.bound_at)
    counters = run.counters
    conflicts = attempts = scheduled = gc_seconds = None
    phases: dict[str, float | None] | None = None
    attempt_latency: dict[str, float | None] = {"p50": None, "p90": None, "p99": None}
    if counters is not None:
        conflicts = counters.conflicts
        attempts = sum(counters.attempts.values())
        scheduled = counters.attempts.get("scheduled", 0.0)
        gc_seconds = counters.gc_seconds
        phases = {
            phase: _round(_per_pod(seconds, bound, 1e6), 2)
            for phase, seconds in sorted(counters.phase_seconds.items(), key=lambda kv: -kv[1])
        }
        attempt_latency = {
            f"p{q}": _round(histogram_quantile(q / 100, counters.attempt_buckets), 5)
            for q in (50, 90, 99)
        }
    tried = (conflicts or 0) + (scheduled or 0)
    redis_cpu = run.redis.cpu_seconds
    top = sorted(run.redis.usec.items(), key=lambda kv: kv[1], reverse=True)[:TOP_COMMANDS]
    return {
        "workload": run.workload,
        "nodes": run.nodes,
        "init_pods": run.init_pods,
        "pods": run.pods,
        "workers": run.workers,
        "binders": run.binders,
        "rate": run.rate or None,
        "outcome": run.outcome,
        "bound": bound,
        "duration_s": _round(run.end - run.start, 3),
        "throughput": throughput_figures(run),
        "latency": latency_figures(run),
        "attempt_latency": attempt_latency,
        "conflicts": None if conflicts is None else int(conflicts),
        "conflict_rate": _round(conflicts / tried, 5) if conflicts is not None and tried else None,
        "attempts_per_pod": _round(_per_pod(attempts, bound), 4),
        "cpu_seconds_per_1000_pods": {
            role: _round(_per_pod(seconds, bound, 1000.0), 4) for role, seconds in run.cpu.items()
        },
        "worker_gc_seconds_per_1000_pods": _round(_per_pod(gc_seconds, bound, 1000.0), 4),
        "worker_cpu_us_per_pod_by_phase": phases,
        "redis_commands_per_pod": _round(_per_pod(run.redis.total_calls, bound), 2),
        "redis_cpu_us_per_pod": _round(_per_pod(redis_cpu, bound, 1e6), 2),
        "redis_ceiling_pods_per_s": _round(bound / redis_cpu, 0) if redis_cpu > 0 else None,
        "redis_top_commands": {
            name: {
                "calls_per_pod": _round(_per_pod(run.redis.calls.get(name, 0), bound), 3),
                "usec_per_pod": _round(_per_pod(usec, bound), 3),
            }
            for name, usec in top
        },
        "redis_scripts": None
        if run.scripts is None
        else _script_figures(run.scripts.scripts, bound),
        "redis_script_commands": None
        if run.scripts is None or run.scripts.commands is None
        else {
            name: _script_figures(commands, bound)
            for name, commands in run.scripts.commands.items()
        },
        "host": {
            "cores": os.cpu_count(),
            "other_cpu_cores": _round(run.other_cpu_cores, 2),
            "load_average": _round(run.load_average, 2),
            "code": CODE_DIR,
        },
        "gangs": run.gangs,
        "placement": {"pods_per_node": run.placement},
        "churn": run.churn,
        "invariants": {"ok": not run.violations, "violations": run.violations},
        "warnings": run.warnings,
    }


def _fmt(value: Any, suffix: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.4g}{suffix}" if abs(value) < 100 else f"{value:,.0f}{suffix}"
    return f"{value}{suffix}"


def _phases_line(phases: dict[str, float | None] | None) -> str:
    """The workers' CPU by phase, µs per pod, largest first ("-" unscraped)."""
    if not phases:
        return "-"
    return "  ".join(f"{phase} {_fmt(us)}" for phase, us in phases.items()) + "  (us/pod)"


def print_summary(result: dict[str, Any]) -> None:
    t, lat, cpu = result["throughput"], result["latency"], result["cpu_seconds_per_1000_pods"]
    host = result["host"]
    rate = f" at {result['rate']:g} pods/s" if result["rate"] else ""
    title = (
        f"{result['workload']}: {result['nodes']} nodes, {result['init_pods']} init, "
        f"{result['pods']} pods{rate}, {_fmt(result['workers'])} worker(s), "
        f"{_fmt(result['binders'])} binder(s) - {result['outcome']}"
    )
    rows: list[Sequence[Any]] = [
        ("bound", f"{result['bound']} in {_fmt(result['duration_s'], ' s')}"),
        (
            "throughput (pods/s)",
            f"avg {_fmt(t['average'])}  p50 {_fmt(t['p50'])}  p90 {_fmt(t['p90'])}  "
            f"p99 {_fmt(t['p99'])}  ({t['samples']} samples, overall {_fmt(t['overall'])})",
        ),
        (
            "latency created->bound (s)",
            f"p50 {_fmt(lat['p50'])}  p90 {_fmt(lat['p90'])}  p99 {_fmt(lat['p99'])}  "
            f"max {_fmt(lat['max'])}",
        ),
        (
            "attempt latency (s)",
            "  ".join(f"{k} {_fmt(v)}" for k, v in result["attempt_latency"].items()),
        ),
        (
            "conflicts",
            f"{_fmt(result['conflicts'])} (rate {_fmt(result['conflict_rate'])}), "
            f"attempts/pod {_fmt(result['attempts_per_pod'])}",
        ),
        (
            "CPU s / 1000 pods",
            "  ".join(f"{role} {_fmt(v)}" for role, v in cpu.items())
            + f"  (workers' GC {_fmt(result['worker_gc_seconds_per_1000_pods'])})",
        ),
        (
            "worker CPU by phase",
            _phases_line(result.get("worker_cpu_us_per_pod_by_phase")),
        ),
        (
            "Redis per pod",
            f"{_fmt(result['redis_cpu_us_per_pod'])} us CPU, "
            f"{_fmt(result['redis_commands_per_pod'])} commands; ceiling "
            f"{_fmt(result['redis_ceiling_pods_per_s'])} pods/s",
        ),
        (
            "Redis top commands",
            ", ".join(
                f"{name} {v['calls_per_pod']}x/{v['usec_per_pod']}us"
                for name, v in list(result["redis_top_commands"].items())[:6]
            ),
        ),
        (
            "host",
            f"{host['cores']} cores, other processes used {_fmt(host['other_cpu_cores'])} "
            f"cores, load {host['load_average']}, code {host.get('code', '?')}",
        ),
        ("invariants", "ok" if result["invariants"]["ok"] else "VIOLATED"),
    ]
    gangs = result.get("gangs")
    if gangs is not None:
        duration = gangs["attempt_duration"]
        rows.insert(
            -1,
            (
                "gangs",
                f"{gangs['whole']}/{gangs['groups']} whole, {gangs['partial']} partial, "
                f"{gangs['pending']} pending; {_fmt(gangs['gangs_per_s']['average'])} gangs/s "
                f"(overall {_fmt(gangs['gangs_per_s']['overall'])}); attempt avg "
                f"{_fmt(duration['average_s'])} s ({duration['source'].split(' ')[0]})",
            ),
        )
    if result["redis_scripts"] is not None:
        inner = result.get("redis_script_commands") or {}

        def script_cell(name: str, usec: float) -> str:
            if name not in inner:
                return f"{name} {usec}us"
            commands = sum(v["usec_per_pod"] or 0.0 for v in inner[name].values())
            return f"{name} {usec}us (its commands {commands:.1f})"

        scripts = ", ".join(
            script_cell(name, v["usec_per_pod"])
            for name, v in list(result["redis_scripts"].items())[:8]
        )
        rows.insert(-1, ("Redis scripts per pod", scripts))
    print_table(title, ["figure", "value"], rows)
    for warning in result["warnings"]:
        err_console.print(f"warning: {warning}", markup=False, highlight=False)
    for violation in result["invariants"]["violations"]:
        err_console.print(f"violation: {violation}", markup=False, highlight=False)


def plot(run: RawRun, path: str) -> bool:
    """Throughput per second and pending measured pods over time; False when matplotlib
    is missing (the message says how to get it)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        err_console.print(
            "--plot needs matplotlib: pip install 'distsched[plot]' (no figure written)",
            markup=False,
        )
        return False
    end = max(float(run.bound_at.max()) if len(run.bound_at) else run.end, run.end)
    grid = np.arange(run.start, end + 0.1, 0.1)
    created = np.searchsorted(np.sort(run.all_created_at), grid, side="right")
    bound = np.searchsorted(np.sort(run.bound_at), grid, side="right")
    seconds = np.arange(run.start, end + 1.0, 1.0)
    per_second = np.diff(np.searchsorted(np.sort(run.bound_at), seconds, side="right"))
    fig, ax_rate = plt.subplots(figsize=(9, 4.5))
    ax_rate.bar(seconds[:-1] - run.start + 0.5, per_second, width=0.9, alpha=0.5, label="bound/s")
    ax_rate.set_xlabel("seconds since the first measured pod was created")
    ax_rate.set_ylabel("pods bound per second")
    ax_pending = ax_rate.twinx()
    ax_pending.plot(grid - run.start, created - bound, color="tab:red", label="pending")
    ax_pending.set_ylabel("pending measured pods")
    ax_rate.set_title(f"{run.workload}: {run.nodes} nodes, {run.pods} pods, {run.workers} workers")
    fig.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True
