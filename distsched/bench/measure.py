"""What the bench measures and how: process CPU, Redis INFO, worker metrics, rv clock.

* CPU of a role = utime + stime of each of its processes and their descendants, read
  from ``/proc/<pid>/stat`` before and after the measured phase (no psutil).
* Redis CPU = ``used_cpu_sys + used_cpu_user`` of ``INFO cpu``; commands = the sum of
  ``calls`` over ``INFO commandstats`` (commands run inside Lua scripts count too).
* Worker counters (conflicts, attempts, attempt latency) come from each worker's
  ``/metrics`` endpoint.
* Times of store writes: every write bumps the store's resourceVersion, so a thread
  samples ``GET rv`` every few milliseconds and :class:`RvClock` maps any rv to the
  moment it was written by interpolating between the samples around it. A pod's creation
  and binding rvs then give created → bound latencies at millisecond resolution (the
  stored creationTimestamp has only seconds).
"""

from __future__ import annotations

import hashlib
import math
import os
import threading
import time
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np
import redis
from prometheus_client.parser import text_string_to_metric_families

from distsched.keys import Keys
from distsched.redis_text import as_text

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------------------- processes


def _parse_stat(text: str) -> tuple[int, int]:
    """(ppid, utime + stime in ticks) of one /proc/<pid>/stat line."""
    # The command name may hold spaces and parentheses: split after its last ")".
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), int(fields[11]) + int(fields[12])


def process_table() -> dict[int, tuple[int, int]]:
    """pid -> (ppid, cpu ticks) of every live process."""
    table: dict[int, tuple[int, int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                table[int(entry)] = _parse_stat(f.read())
        except (OSError, ValueError):
            continue  # exited while we read
    return table


def tree_cpu_seconds(roots: Iterable[int], table: dict[int, tuple[int, int]]) -> float:
    """CPU seconds of the processes ``roots`` and all their live descendants."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    seen: set[int] = set()
    stack = [pid for pid in roots if pid in table]
    ticks = 0
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        ticks += table[pid][1]
        stack.extend(children.get(pid, ()))
    return ticks / CLOCK_TICKS


def host_busy_seconds() -> float:
    """CPU seconds the whole machine spent running processes since boot (all cores,
    /proc/stat user + nice + system). Interrupt time is left out: loopback networking is
    mostly our own traffic, and it is not charged to any process."""
    with open("/proc/stat") as f:
        user, nice, system = (int(v) for v in f.readline().split()[1:4])
    return (user + nice + system) / CLOCK_TICKS


def role_cpu_seconds(roles: dict[str, list[int]]) -> dict[str, float]:
    table = process_table()
    return {role: tree_cpu_seconds(pids, table) for role, pids in roles.items()}


# --------------------------------------------------------------------------- Redis INFO


@dataclass(frozen=True)
class RedisStats:
    cpu_seconds: float
    calls: dict[str, int]
    usec: dict[str, int]

    def __sub__(self, other: RedisStats) -> RedisStats:
        return RedisStats(
            self.cpu_seconds - other.cpu_seconds,
            {k: v - other.calls.get(k, 0) for k, v in self.calls.items()},
            {k: v - other.usec.get(k, 0) for k, v in self.usec.items()},
        )

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values())


def redis_stats(client: redis.Redis) -> RedisStats:
    cpu = client.info("cpu")
    stats = client.info("commandstats")
    calls: dict[str, int] = {}
    usec: dict[str, int] = {}
    for name, values in stats.items():
        command = name.removeprefix("cmdstat_")
        calls[command] = int(values["calls"])
        usec[command] = int(values["usec"])
    return RedisStats(float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"]), calls, usec)


# --------------------------------------------------------------------------- worker metrics


def _minus(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    return {k: v - b.get(k, 0.0) for k, v in a.items()}


@dataclass(frozen=True)
class WorkerCounters:
    """Sums over all scraped workers. The podgroup_* maps (result -> value) are gang
    cycles: ``distsched_podgroup_scheduling_attempts_total`` and the sum and count of
    ``distsched_podgroup_scheduling_attempt_duration_seconds``."""

    conflicts: float
    attempts: dict[str, float]  # result -> count
    attempt_buckets: dict[float, float]  # upper bound -> cumulative count (all results)
    podgroup_attempts: dict[str, float] = field(default_factory=dict)
    podgroup_duration_sum: dict[str, float] = field(default_factory=dict)
    podgroup_duration_count: dict[str, float] = field(default_factory=dict)
    gc_seconds: float = 0.0  # distsched_gc_seconds_total, every generation
    # distsched_worker_phase_cpu_seconds_total: phase -> seconds
    phase_seconds: dict[str, float] = field(default_factory=dict)

    def __sub__(self, other: WorkerCounters) -> WorkerCounters:
        return WorkerCounters(
            self.conflicts - other.conflicts,
            _minus(self.attempts, other.attempts),
            {k: v - other.attempt_buckets.get(k, 0.0) for k, v in self.attempt_buckets.items()},
            _minus(self.podgroup_attempts, other.podgroup_attempts),
            _minus(self.podgroup_duration_sum, other.podgroup_duration_sum),
            _minus(self.podgroup_duration_count, other.podgroup_duration_count),
            self.gc_seconds - other.gc_seconds,
            _minus(self.phase_seconds, other.phase_seconds),
        )


_BY_RESULT = {
    "distsched_schedule_attempts_total": "attempts",
    "distsched_podgroup_scheduling_attempts_total": "podgroup_attempts",
    "distsched_podgroup_scheduling_attempt_duration_seconds_sum": "podgroup_duration_sum",
    "distsched_podgroup_scheduling_attempt_duration_seconds_count": "podgroup_duration_count",
}


def parse_worker_metrics(texts: Sequence[str]) -> WorkerCounters:
    conflicts = gc_seconds = 0.0
    by_result: dict[str, dict[str, float]] = {name: {} for name in _BY_RESULT.values()}
    buckets: dict[float, float] = {}
    phases: dict[str, float] = {}
    for text in texts:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "distsched_reserve_conflicts_total":
                    conflicts += sample.value
                elif sample.name == "distsched_gc_seconds_total":
                    gc_seconds += sample.value
                elif sample.name == "distsched_worker_phase_cpu_seconds_total":
                    phase = sample.labels.get("phase", "")
                    phases[phase] = phases.get(phase, 0.0) + sample.value
                elif sample.name in _BY_RESULT:
                    values = by_result[_BY_RESULT[sample.name]]
                    result = sample.labels.get("result", "")
                    values[result] = values.get(result, 0.0) + sample.value
                elif sample.name == "distsched_scheduling_attempt_duration_seconds_bucket":
                    bound = float(sample.labels["le"])
                    buckets[bound] = buckets.get(bound, 0.0) + sample.value
    return WorkerCounters(
        conflicts,
        by_result["attempts"],
        buckets,
        by_result["podgroup_attempts"],
        by_result["podgroup_duration_sum"],
        by_result["podgroup_duration_count"],
        gc_seconds,
        phases,
    )


def scrape(urls: Sequence[str], timeout_s: float = 5.0) -> WorkerCounters:
    texts = []
    for url in urls:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            texts.append(response.read().decode())
    return parse_worker_metrics(texts)


def histogram_quantile(q: float, buckets: dict[float, float]) -> float | None:
    """Prometheus' histogram_quantile over cumulative ``buckets`` (linear within a bucket)."""
    bounds = sorted(buckets)
    if not bounds or buckets[bounds[-1]] <= 0:
        return None
    rank = q * buckets[bounds[-1]]
    lower_bound, lower_count = 0.0, 0.0
    for bound in bounds:
        count = buckets[bound]
        if count >= rank:
            if math.isinf(bound):
                return lower_bound
            if count == lower_count:
                return bound
            return lower_bound + (bound - lower_bound) * (rank - lower_count) / (
                count - lower_count
            )
        lower_bound, lower_count = bound, count
    return lower_bound


# --------------------------------------------------------------------------- rv clock


class RvSampler:
    """A thread that samples the store's resourceVersion every ``interval_s`` seconds."""

    def __init__(self, client: redis.Redis, keys: Keys, interval_s: float = 0.01) -> None:
        self._client = client
        self._key = keys.resource_version
        self._interval = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rv-sampler", daemon=True)
        self.times: list[float] = []
        self.rvs: list[int] = []
        self.calls = 0

    def sample(self) -> None:
        before = time.monotonic()
        rv = int(self._client.get(self._key) or 0)
        after = time.monotonic()
        self.calls += 1
        self.times.append((before + after) / 2)
        self.rvs.append(rv)

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            self.sample()
            next_at += self._interval
            delay = next_at - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)
            else:
                next_at = time.monotonic()

    def start(self) -> RvSampler:
        self.sample()
        self._thread.start()
        return self

    def stop(self) -> RvClock:
        self._stop.set()
        self._thread.join()
        self.sample()
        return RvClock(self.times, self.rvs)


class RvClock:
    """rv -> monotonic time of the write that produced it.

    The counter was at ``v`` when a sample saw ``v``; an rv ``r`` between two distinct
    sampled values ``a < r <= b`` was written after the *last* sample that saw ``a`` and
    no later than the *first* that saw ``b``; we interpolate linearly in between.
    """

    def __init__(self, times: Sequence[float], rvs: Sequence[int]) -> None:
        if not rvs:
            raise ValueError("no rv samples")
        values: list[int] = []
        first: list[float] = []
        last: list[float] = []
        for t, rv in zip(times, rvs, strict=True):
            if values and rv == values[-1]:
                last[-1] = t
            elif not values or rv > values[-1]:
                values.append(rv)
                first.append(t)
                last.append(t)
        self.values = np.asarray(values, dtype=np.float64)
        self.first = np.asarray(first)
        self.last = np.asarray(last)

    def times_of(self, rvs: Sequence[int] | np.ndarray) -> np.ndarray:
        r = np.asarray(rvs, dtype=np.float64)
        k = np.searchsorted(self.values, r, side="left")
        out = np.empty_like(r)
        before = k == 0
        after = k >= len(self.values)
        out[before] = self.first[0]
        out[after] = self.last[-1]
        mid = ~(before | after)
        km = k[mid]
        lo_v, hi_v = self.values[km - 1], self.values[km]
        lo_t, hi_t = self.last[km - 1], self.first[km]
        out[mid] = lo_t + (r[mid] - lo_v) / (hi_v - lo_v) * (hi_t - lo_t)
        return out


# --------------------------------------------------------------------------- statistics


def nearest_rank(sorted_values: Sequence[float], percent: float) -> float:
    """scheduler_perf's percentile: the value at rank ceil(n * p / 100)."""
    n = len(sorted_values)
    return float(sorted_values[max(0, math.ceil(n * percent / 100) - 1)])


def throughput_samples(bound_at: np.ndarray, start: float, interval_s: float = 1.0) -> list[float]:
    """Per-interval scheduling rates the way scheduler_perf's throughput collector takes them.

    ``bound_at``: binding times of the measured pods; ticks every ``interval_s`` from
    ``start``. Ticks before the first bound pod are skipped, so is the first one with pods
    (sampling and creation start independently); an interval without new pods is merged
    into the next one that has some (each merged interval gets that rate); the partial
    interval after the last full tick is dropped.
    """
    if len(bound_at) == 0:
        return []
    ordered = np.sort(bound_at)
    ticks = start + interval_s * np.arange(1, int((ordered[-1] - start) // interval_s) + 1)
    counts = np.searchsorted(ordered, ticks, side="right")
    samples: list[float] = []
    started, last_count, last_tick, skipped = False, 0, start, 0
    for tick, count in zip(ticks, counts, strict=True):
        if count == 0:
            continue
        if not started:
            started, last_count, last_tick = True, int(count), float(tick)
            continue
        if count == last_count:
            skipped += 1
            continue
        rate = (int(count) - last_count) / (float(tick) - last_tick)
        samples.extend([rate] * (skipped + 1))
        last_count, last_tick, skipped = int(count), float(tick), 0
    return samples


# --------------------------------------------------------------------------- script profile


def script_names() -> dict[str, str]:
    """SHA1 (as EVALSHA sends it) -> name of every script in distsched/lua."""
    from importlib import resources

    from distsched import lua

    names = {}
    for entry in resources.files(lua).iterdir():
        if entry.name.endswith(".lua"):
            sha = hashlib.sha1(lua.source(entry.name[:-4]).encode()).hexdigest()
            names[sha] = entry.name[:-4]
    return names


SCRIPT_CLIENT = b"?:0"  # the slow log's client address of a command a script ran (Redis 7.0)


def key_family(key: bytes) -> str:
    """A key's name without the deployment's hash tag, one object's name folded to ``*``
    (``cache:node:node-00017`` -> ``cache:node:*``; kinds, capitalised, stay:
    ``store:meta:Pod``)."""
    text = key.decode(errors="replace")
    if text.startswith("{") and "}:" in text:
        text = text.split("}:", 1)[1]
    parts = text.split(":")
    if len(parts) > 2 and not parts[2][:1].isupper():
        parts[2:] = ["*"]
    return ":".join(parts)


@dataclass
class ScriptTimes:
    """What ``--redis-profile`` measured: script -> (calls, µs); and, where the server's
    slow log tells a script's own commands apart (Redis 7.0 logs them under the client
    address ``?:0``; Valkey under its caller's), script -> "COMMAND key family" ->
    (calls, µs) of the commands it ran: the rest of its time is Lua's (the interpreter,
    and the values it hands to and gets from Redis)."""

    scripts: dict[str, tuple[int, int]]
    commands: dict[str, dict[str, tuple[int, int]]] | None


class ScriptProfile:
    """Per-script Redis time from the slow log with a 0 µs threshold (``--redis-profile``).

    The slow log lists the commands a script ran just before the script's own entry (a
    script runs alone), and a script's duration already includes them. Logging every
    command costs Redis CPU of its own, so a profiled run's other Redis figures read a
    little high.
    """

    SETTINGS = ("slowlog-log-slower-than", "slowlog-max-len")

    def __init__(self, client: redis.Redis) -> None:
        self._client = client
        self._saved: dict[str, str] = {}

    def start(self) -> ScriptProfile:
        current = self._client.config_get("slowlog-*")
        self._saved = {k: as_text(cast(str, current[k])) for k in self.SETTINGS if k in current}
        self._client.config_set("slowlog-max-len", 1_000_000)
        self._client.config_set("slowlog-log-slower-than", 0)
        self._client.slowlog_reset()
        return self

    def stop(self) -> ScriptTimes:
        self._client.config_set("slowlog-log-slower-than", -1)
        entries = self._client.slowlog_get(1_000_000)
        for key, value in self._saved.items():
            self._client.config_set(key, value)
        self._client.slowlog_reset()
        logged = sorted(entries, key=lambda e: int(cast(int, e["id"])))
        return attribute_slowlog(logged, script_names())


def attribute_slowlog(entries: Sequence[dict[str, object]], names: dict[str, str]) -> ScriptTimes:
    """Script and command times from slow-log entries in the order they were logged."""
    scripts: dict[str, tuple[int, int]] = {}
    commands: dict[str, dict[str, tuple[int, int]]] = {}
    marked = False  # the server marks a script's commands (else no breakdown)
    ran: list[tuple[str, int]] = []  # the commands logged since the last script
    for entry in entries:
        command = entry["command"]
        argv = command.split(b" ", 2) if isinstance(command, bytes) else []
        if not argv:
            continue
        verb = argv[0].upper()
        if entry.get("client_address") == SCRIPT_CLIENT:
            marked = True
            family = key_family(argv[1]) if len(argv) > 1 else ""
            ran.append((f"{verb.decode()} {family}".strip(), int(cast(int, entry["duration"]))))
            continue
        if len(argv) < 2 or verb not in (b"EVALSHA", b"EVAL"):
            ran = []
            continue
        sha = argv[1].decode()
        name = names.get(sha, "eval" if verb == b"EVAL" else sha[:12])
        calls, usec = scripts.get(name, (0, 0))
        scripts[name] = (calls + 1, usec + int(cast(int, entry["duration"])))
        own = commands.setdefault(name, {})
        for label, duration in ran:
            calls, usec = own.get(label, (0, 0))
            own[label] = (calls + 1, usec + duration)
        ran = []
    return ScriptTimes(scripts, commands if marked else None)
