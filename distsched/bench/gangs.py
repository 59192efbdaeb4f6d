"""Gang figures and the gang invariant sampled during a bench run (issue 22).

* :class:`GangLayout`: the run's PodGroups (``ns/name`` -> minimum) and their measured
  members, from the objects the bench creates (``spec.schedulingGroup`` or the
  ``scheduling.x-k8s.io/pod-group`` label, as :mod:`distsched.model.podgroups` reads them).
* :class:`GangSampler`: a thread that reads, every ``interval_s``, the ledger records
  (``T:cache:pods``: reserved or bound) of the members of every gang not yet seen whole,
  all in one MULTI, and reports each sample where a gang had some but fewer than its
  minimum of members reserved or bound. A gang seen whole once is admitted and no longer
  read: a member lost after admission (deleted, a failed binding) is no violation. The
  reads cost Redis a little CPU (one HMGET per group per sample, fewer as gangs complete),
  counted in the run's Redis figures.
* :func:`gang_figures`: gangs whole / partial / pending at the end, gangs per second (the
  moment a gang's last minimum member was bound), and the PodGroup attempt duration
  average from the workers' metric ``distsched_podgroup_scheduling_attempt_duration_seconds``
  (sum / count over the measured phase), or, when no worker metrics were scraped, the mean
  created -> last member bound latency of the gangs (``source`` says which).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import redis

from distsched.bench.measure import WorkerCounters, nearest_rank, throughput_samples
from distsched.bench.workloads import Obj
from distsched.keys import Keys
from distsched.model.podgroups import PodGroup, group_of_object

HMGET_GROUPS = 500  # groups per HMGET of a sample (each group whole in one command)
MAX_MESSAGES = 20
ONE_GANG_BOUND = "one-gang-bound"


@dataclass(frozen=True)
class GangLayout:
    """PodGroup key -> its minimum; PodGroup key -> the measured pods that name it."""

    minimum: dict[str, int]
    members: dict[str, list[str]]

    @classmethod
    def of(cls, setup: Sequence[Obj], pods: Sequence[Obj]) -> GangLayout:
        minimum = {
            group.key: group.min_member
            for group in (PodGroup.from_dict(o) for o in setup if o.get("kind") == "PodGroup")
        }
        members: dict[str, list[str]] = {key: [] for key in minimum}
        for pod in pods:
            group = group_of_object(pod)
            if group in members:
                meta = pod["metadata"]
                members[group].append(f"{meta['namespace']}/{meta['name']}")
        return cls(minimum, members)

    def placed(self, placed_keys: set[str] | Mapping[str, Any]) -> dict[str, int]:
        """Group -> how many of its members are in ``placed_keys``."""
        return {g: sum(1 for k in keys if k in placed_keys) for g, keys in self.members.items()}


@dataclass
class GangSampler:
    """Samples the gang invariant while the measured pods schedule (see module doc)."""

    client: redis.Redis
    keys: Keys
    layout: GangLayout
    interval_s: float = 0.1
    samples: int = 0
    partial_samples: int = 0  # samples in which some gang was partly held
    partial_gangs: set[str] = field(default_factory=set)
    messages: list[str] = field(default_factory=list)
    _open: list[str] = field(default_factory=list)
    _started: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> GangSampler:
        self._open = sorted(self.layout.members)
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="gang-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> GangSampler:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._open:
            self.sample()  # the state the phase ended in
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s) and self._open:
            try:
                self.sample()
            except redis.RedisError as exc:  # a sample lost is no verdict
                self.messages.append(f"gang: sampling failed: {exc}")
                return

    def sample(self) -> None:
        groups = list(self._open)
        if not groups:
            return
        pipe = self.client.pipeline(transaction=True)
        chunks = [groups[i : i + HMGET_GROUPS] for i in range(0, len(groups), HMGET_GROUPS)]
        for chunk in chunks:
            keys = [k for g in chunk for k in self.layout.members[g]]
            if keys:
                pipe.hmget(self.keys.ledger_pods, keys)
            else:
                pipe.ping()
        replies = pipe.execute()
        at = time.monotonic() - self._started
        partial = False
        still: list[str] = []
        for chunk, reply in zip(chunks, replies, strict=True):
            values = iter(reply if isinstance(reply, list) else [])
            for group in chunk:
                held = sum(1 for _ in self.layout.members[group] if next(values) is not None)
                minimum = self.layout.minimum[group]
                if held >= minimum:
                    continue  # admitted: no longer sampled
                still.append(group)
                if held > 0:
                    partial = True
                    self.partial_gangs.add(group)
                    if len(self.messages) < MAX_MESSAGES:
                        self.messages.append(
                            f"gang: {group} had {held} of its minimum {minimum} members "
                            f"reserved or bound at +{at:.2f}s (sample {self.samples + 1})"
                        )
        self._open = still
        self.samples += 1
        self.partial_samples += int(partial)


def _time_of_gangs(
    layout: GangLayout, bound_at: Mapping[str, float]
) -> tuple[list[float], dict[str, int]]:
    """The moments gangs became whole (their minimum-th member bound) and, per group, how
    many members are bound."""
    whole_at: list[float] = []
    counts: dict[str, int] = {}
    for group, members in layout.members.items():
        times = sorted(bound_at[k] for k in members if k in bound_at)
        counts[group] = len(times)
        minimum = layout.minimum[group]
        if len(times) >= minimum:
            whole_at.append(times[minimum - 1])
    return whole_at, counts


def gang_figures(
    layout: GangLayout,
    *,
    start: float,
    bound_at: Mapping[str, float],
    created_at: Mapping[str, float],
    placed: set[str],
    counters: WorkerCounters | None,
    sampler: GangSampler | None,
) -> dict[str, Any]:
    """The ``gangs`` object of the bench's JSON (see the module doc). ``bound_at`` /
    ``created_at``: measured pod key -> monotonic time; ``placed``: the measured pods
    bound or reserved at the end."""
    whole_at, _ = _time_of_gangs(layout, bound_at)
    held = layout.placed(placed)
    whole = sum(1 for g, n in held.items() if n >= layout.minimum[g])
    partial = sum(1 for g, n in held.items() if 0 < n < layout.minimum[g])
    span = max(whole_at) - start if whole_at else 0.0
    samples = sorted(throughput_samples(np.asarray(whole_at), start)) if whole_at else []
    per_s: dict[str, float | None] = {
        "average": round(sum(samples) / len(samples), 1) if samples else None,
        "p50": round(nearest_rank(samples, 50), 1) if samples else None,
        "overall": round(len(whole_at) / span, 1) if span > 0 else None,
        "samples": len(samples),
    }
    if not samples:
        per_s["average"] = per_s["p50"] = per_s["overall"]
    return {
        "groups": len(layout.members),
        "whole": whole,
        "partial": partial,
        "pending": len(layout.members) - whole - partial,
        "gangs_per_s": per_s,
        "attempts": _attempts(counters),
        "attempt_duration": _attempt_duration(layout, counters, bound_at, created_at),
        "sampled": None
        if sampler is None
        else {
            "samples": sampler.samples,
            "partial_samples": sampler.partial_samples,
            "partial_gangs": len(sampler.partial_gangs),
            "interval_s": sampler.interval_s,
        },
    }


def _attempts(counters: WorkerCounters | None) -> dict[str, int] | None:
    if counters is None:
        return None
    return {result: int(n) for result, n in sorted(counters.podgroup_attempts.items())}


def _attempt_duration(
    layout: GangLayout,
    counters: WorkerCounters | None,
    bound_at: Mapping[str, float],
    created_at: Mapping[str, float],
) -> dict[str, Any]:
    if counters is not None and sum(counters.podgroup_duration_count.values()) > 0:
        total = sum(counters.podgroup_duration_sum.values())
        count = sum(counters.podgroup_duration_count.values())
        by_result = {
            result: round(counters.podgroup_duration_sum.get(result, 0.0) / n, 6)
            for result, n in sorted(counters.podgroup_duration_count.items())
            if n > 0
        }
        return {
            "average_s": round(total / count, 6),
            "by_result_s": by_result,
            "source": "metric distsched_podgroup_scheduling_attempt_duration_seconds "
            "(sum/count, workers' /metrics)",
        }
    latencies = []
    for group, members in layout.members.items():
        times = [(created_at[k], bound_at[k]) for k in members if k in bound_at]
        if len(times) >= layout.minimum[group] and times:
            latencies.append(max(b for _, b in times) - max(c for c, _ in times))
    return {
        "average_s": round(sum(latencies) / len(latencies), 6) if latencies else None,
        "by_result_s": None,
        "source": "bind times (last member created -> last member bound; no worker metrics)",
    }


def contention_outcome(layout: GangLayout, placed: set[str]) -> str:
    """GangContention's verdict: "one-gang-bound" when exactly one gang is whole and the
    others hold nothing; else what happened ("no-gang-bound", "gangs-bound-2",
    "partial-gang")."""
    held = layout.placed(placed)
    whole = sum(1 for g, n in held.items() if n >= layout.minimum[g])
    if any(0 < n < layout.minimum[g] for g, n in held.items()):
        return "partial-gang"
    if whole == 1:
        return ONE_GANG_BOUND
    return "no-gang-bound" if whole == 0 else f"gangs-bound-{whole}"
