"""Scale-out from measurement: one bench run per worker count, then a projection.

Each run reports CPU per pod of every role. Worker CPU per pod (summed over the workers)
is modelled as ``a + W * b``: ``a`` is the work done once per pod (filter, score,
reserve), ``b`` what every worker pays for every pod whatever worker schedules it (tailing
and decoding the event stream, mirroring the ledger). Redis CPU per pod is modelled the
same way (``r0 + W * r1``: each worker's reads). Both lines are least-squares fits over
the measured worker counts.

With N worker machines, one core each, the workers can serve ``N / (a + N * b)`` pods/s
and Redis ``1 / (r0 + N * r1)``; the projection is the smaller of the two. It assumes
binders run on machines of their own (their cost per pod does not depend on N) and that
the network adds no CPU. It is a projection from a small machine, labelled as such.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.table import Table

from distsched.output import console
from distsched.workers.phases import BIND, POP, PREPARE, RESERVE

PROJECTED_MACHINES = (1, 2, 4, 8, 16, 32, 64)


@dataclass(frozen=True)
class Line:
    """``intercept + slope * x``, fitted by least squares."""

    intercept: float
    slope: float

    def at(self, x: float) -> float:
        return self.intercept + self.slope * x


def fit_line(xs: Sequence[float], ys: Sequence[float]) -> Line:
    if len(set(xs)) < 2:
        raise ValueError("a line needs at least two distinct x values")
    n = len(xs)
    mean_x, mean_y = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mean_x) ** 2 for x in xs)
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True))
    slope = sxy / sxx
    return Line(mean_y - slope * mean_x, slope)


def _cost_line(xs: Sequence[float], ys: Sequence[float]) -> Line:
    """The fitted cost line; a negative slope is noise (nothing gets cheaper per pod with
    more workers), so it becomes the flat line through the mean."""
    line = fit_line(xs, ys)
    return line if line.slope >= 0 else Line(sum(ys) / len(ys), 0.0)


def parse_worker_counts(text: str) -> list[int]:
    """``"2"`` -> [2]; ``"1,2,4"`` -> [1, 2, 4]; raises ValueError on anything else."""
    counts = [int(part) for part in str(text).split(",") if part.strip()]
    if not counts:
        raise ValueError("no worker count")
    if len(set(counts)) != len(counts):
        raise ValueError("a worker count appears twice")
    return counts


# Phases of a worker's turn that a pod costs the same whatever the number of workers
# (one worker pops, prepares, reserves and binds it): where they differ between the runs
# of a round, the machine's speed moved between them.
PER_POD_PHASES = (POP, PREPARE, RESERVE, BIND)


def _per_pod_phases_us(result: dict[str, Any]) -> float | None:
    phases = result.get("worker_cpu_us_per_pod_by_phase")
    if not phases:
        return None
    return sum(phases.get(phase) or 0.0 for phase in PER_POD_PHASES) or None


def worker_cpu_ratios(results: Sequence[dict[str, Any]], rounds: int) -> dict[str, Any]:
    """Per round (the results in order, ``len(results) // rounds`` worker counts each):
    worker CPU per pod at the most workers ÷ at the fewest, and their median. On a
    shared machine one round's ratio moves by ±15 % on unchanged code; the median of
    interleaved rounds is the figure to compare.

    ``speed_adjusted``: each round's ratio times the inverse ratio of the phases a pod
    costs the same at any number of workers (:data:`PER_POD_PHASES`, from the workers'
    ``distsched_worker_phase_cpu_seconds_total``): the machine's speed drift between the
    two runs taken out, what the extra workers add (following the cluster, the share of
    the ties) kept. None when a run has no phase figures."""
    per_round = len(results) // rounds
    counts = [int(r["workers"]) for r in results[:per_round]]
    fewest, most = counts.index(min(counts)), counts.index(max(counts))
    ratios: list[float] = []
    adjusted: list[float] | None = []
    for n in range(rounds):
        group = results[n * per_round : (n + 1) * per_round]
        at_most = group[most]["cpu_seconds_per_1000_pods"]["workers"]
        at_fewest = group[fewest]["cpu_seconds_per_1000_pods"]["workers"]
        ratio = at_most / max(at_fewest, 1e-12)
        ratios.append(round(ratio, 3))
        yard_most, yard_fewest = _per_pod_phases_us(group[most]), _per_pod_phases_us(group[fewest])
        if adjusted is not None and yard_most and yard_fewest:
            adjusted.append(round(ratio * yard_fewest / yard_most, 3))
        else:
            adjusted = None
    return {
        "workers": [counts[fewest], counts[most]],
        "per_round": ratios,
        "median": round(statistics.median(ratios), 3),
        "speed_adjusted": None
        if not adjusted
        else {"per_round": adjusted, "median": round(statistics.median(adjusted), 3)},
    }


def projection(results: Sequence[dict[str, Any]], rounds: int = 1) -> dict[str, Any]:
    """The scaling section of the JSON report, from one bench result per worker count and
    round (the fits go through every run)."""
    workers = [float(r["workers"]) for r in results]
    worker_ms = [float(r["cpu_seconds_per_1000_pods"]["workers"]) for r in results]
    redis_us = [float(r["redis_cpu_us_per_pod"]) for r in results]
    w = _cost_line(workers, worker_ms)
    r = _cost_line(workers, redis_us)
    rows = []
    for n in PROJECTED_MACHINES:
        worker_limit = n / (w.at(n) / 1000.0)
        redis_limit = 1e6 / r.at(n)
        rows.append(
            {
                "worker_machines": n,
                "workers_limit_pods_per_s": round(worker_limit),
                "redis_limit_pods_per_s": round(redis_limit),
                "projected_pods_per_s": round(min(worker_limit, redis_limit)),
                "bound_by": "workers" if worker_limit < redis_limit else "redis",
            }
        )
    return {
        "kind": "projection",
        "model": {
            "worker_ms_per_pod_once": round(w.intercept, 4),
            "worker_ms_per_pod_per_worker": round(w.slope, 4),
            "redis_us_per_pod_once": round(r.intercept, 2),
            "redis_us_per_pod_per_worker": round(r.slope, 2),
        },
        "worker_cpu_ratio": worker_cpu_ratios(results, rounds),
        "measured": [
            {
                "round": 1 + i // (len(results) // rounds),
                "workers": int(res["workers"]),
                "throughput_overall": res["throughput"]["overall"],
                "throughput_average": res["throughput"]["average"],
                "cpu_seconds_per_1000_pods": res["cpu_seconds_per_1000_pods"],
                "worker_cpu_us_per_pod_by_phase": res.get("worker_cpu_us_per_pod_by_phase"),
                "redis_cpu_us_per_pod": res["redis_cpu_us_per_pod"],
                "conflict_rate": res["conflict_rate"],
                "invariants_ok": res["invariants"]["ok"],
            }
            for i, res in enumerate(results)
        ],
        "projection": rows,
    }


def print_scaling(report: dict[str, Any]) -> None:
    measured = Table(title="measured (this machine)", show_edge=False)
    rounds = any(row.get("round", 1) > 1 for row in report["measured"])
    columns = ("workers", "pods/s overall", "worker ms/pod", "binder ms/pod", "Redis µs/pod")
    for column in ("round", *columns) if rounds else columns:
        measured.add_column(column, justify="right")
    for row in report["measured"]:
        cpu = row["cpu_seconds_per_1000_pods"]
        measured.add_row(
            *([str(row["round"])] if rounds else []),
            str(row["workers"]),
            f"{row['throughput_overall']:,.0f}",
            f"{cpu['workers']:.3f}",
            f"{cpu['binders']:.3f}",
            f"{row['redis_cpu_us_per_pod']:.0f}",
        )
    console.print(measured)
    ratio = report["worker_cpu_ratio"]
    fewest, most = ratio["workers"]
    console.print(
        f"worker CPU per pod, W={most} ÷ W={fewest}: "
        + ", ".join(f"{r:.2f}x" for r in ratio["per_round"])
        + (f" (median {ratio['median']:.2f}x)" if len(ratio["per_round"]) > 1 else ""),
        markup=False,
        highlight=False,
    )
    adjusted = ratio.get("speed_adjusted")
    if adjusted:
        console.print(
            "  adjusted for the machine's speed (by the per-pod phases): "
            + ", ".join(f"{r:.2f}x" for r in adjusted["per_round"])
            + (f" (median {adjusted['median']:.2f}x)" if len(adjusted["per_round"]) > 1 else ""),
            markup=False,
            highlight=False,
        )
    model = report["model"]
    console.print(
        f"model: worker {model['worker_ms_per_pod_once']} ms/pod once + "
        f"{model['worker_ms_per_pod_per_worker']} ms/pod per worker; Redis "
        f"{model['redis_us_per_pod_once']} µs/pod + {model['redis_us_per_pod_per_worker']} "
        "µs/pod per worker",
        markup=False,
        highlight=False,
    )
    projected = Table(title="PROJECTION for N worker machines (one core each)", show_edge=False)
    for column in ("N", "workers limit", "Redis limit", "projected pods/s", "bound by"):
        projected.add_column(column, justify="right")
    for row in report["projection"]:
        projected.add_row(
            str(row["worker_machines"]),
            f"{row['workers_limit_pods_per_s']:,}",
            f"{row['redis_limit_pods_per_s']:,}",
            f"{row['projected_pods_per_s']:,}",
            row["bound_by"],
        )
    console.print(projected)
