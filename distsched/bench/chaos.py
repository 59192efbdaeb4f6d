"""Chaos run: schedule a bench load while workers and binders are SIGKILLed, restarted and
SIGSTOPped past their lease, and check the invariants the whole time.

``python -m distsched.bench.chaos --pods 10000 --nodes 500 --workers 4 --binders 2`` runs the
long version against a private embedded server (or ``--redis-url``; the run uses its own
scheduler name, so its keys never mix with another deployment's). Every
``--kill-every`` seconds one random role process is SIGKILLed and restarted; at the same
time another one is SIGSTOPped for ``--stop-s`` (longer than the lease) and resumed.

An independent sampler reads the ledger every 100 ms in one MULTI and counts samples in
which a node's requested amount of a resource exceeds its allocatable. At the end, with
the faults over and the queue drained, :func:`distsched.bench.checker.check` compares the
store, queue and ledger. The report counts pods lost, overcommitted samples, duplicate
binds and leaked reservations; all four must be 0.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import click
import redis

from distsched.bench.binder_pool import node_manifest, pod_manifest
from distsched.bench.checker import check, held_history
from distsched.bench.procs import ProcessGroup
from distsched.bench.standalone import print_report, run_standalone, standalone_options
from distsched.cache.ledger_types import NodeUsage
from distsched.keys import Keys
from distsched.launcher import RoleProcess
from distsched.store import Store, parse_meta

SAMPLE_EVERY_S = 0.1
RETRYABLE = (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError)


@dataclass(frozen=True, slots=True)
class ChaosConfig:
    pods: int = 10_000
    nodes: int = 500
    workers: int = 4
    binders: int = 2
    kill_every_s: float = 2.0
    lease_ms: int = 2_000
    assume_ttl_ms: int = 4_000
    stop_s: float = 3.0  # SIGSTOP length; longer than the lease, so the pods are reclaimed
    create_per_s: float = 400.0
    timeout_s: float = 600.0
    seed: int = 1
    scheduler: str = "chaos"


@dataclass
class ChaosReport:
    pods: int = 0
    bound: int = 0
    pods_lost: int = 0
    overcommitted_samples: int = 0
    samples: int = 0
    duplicate_binds: int = 0
    leaked_reservations: int = 0
    kills: int = 0
    stops: int = 0
    elapsed_s: float = 0.0
    violations: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (
            self.pods_lost
            or self.overcommitted_samples
            or self.duplicate_binds
            or self.leaked_reservations
            or self.violations
        )

    def line(self) -> str:
        return (
            f"chaos: {self.pods} pods, {self.bound} bound in {self.elapsed_s:.1f}s, "
            f"{self.kills} kills, {self.stops} stops; pods lost {self.pods_lost}, "
            f"overcommitted samples {self.overcommitted_samples}/{self.samples}, "
            f"duplicate binds {self.duplicate_binds}, leaked reservations "
            f"{self.leaked_reservations}, other violations {len(self.violations)}"
        )


class LedgerSampler:
    """Reads every node hash of the ledger each 100 ms; counts overcommitted samples."""

    def __init__(self, url: str, keys: Keys) -> None:
        self._client = redis.Redis.from_url(url, socket_timeout=5)
        self._keys = keys
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ledger-sampler", daemon=True)
        self.samples = 0
        self.overcommitted = 0
        self.examples: list[str] = []

    def sample(self) -> list[str]:
        """Every (node, resource) over allocatable in one consistent read of the ledger."""
        members = cast(set[bytes], self._client.smembers(self._keys.ledger_nodes))
        names = sorted(n.decode() for n in members)
        if not names:
            return []
        pipe = self._client.pipeline(transaction=True)
        for name in names:
            pipe.hgetall(self._keys.ledger_node(name))
        pipe.hmget(self._keys.ledger_usage, names)
        *hashes, usages = pipe.execute()
        over = []
        for name, fields, usage in zip(names, hashes, usages, strict=True):
            values = {k.decode(): v.decode() for k, v in fields.items()}
            if values.get("live") == "0":
                continue  # a ghost node: removed, its bound pods are still accounted
            # (NodeUsage leaves out "+cpu"/"+memory": scoring's non-zero extra, not a limit)
            requested = NodeUsage.parse(name, usage.decode() if usage else "").requested
            for resource, amount in requested.items():
                if amount > int(values.get(f"alloc:{resource}", 0)):
                    over.append(f"{name} {resource} {amount} > {values.get(f'alloc:{resource}')}")
        return over

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_EVERY_S):
            try:
                over = self.sample()
            except RETRYABLE:
                continue
            self.samples += 1
            if over:
                self.overcommitted += 1
                self.examples += over[: 5 - len(self.examples)]

    def start(self) -> LedgerSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)
        self._client.close()


def _signal_group(proc: RoleProcess, sig: int) -> None:
    """Signal the role process and its children (a binder pool) together."""
    if proc.alive():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)


class Chaos:
    """The fault driver: one kill and restart per tick, one process stopped at a time."""

    def __init__(self, group: ProcessGroup, config: ChaosConfig, rng: random.Random) -> None:
        self.group = group
        self.config = config
        self.rng = rng
        self.kills = 0
        self.stops = 0
        self._stopped: RoleProcess | None = None
        self._resume_at = 0.0

    def tick(self) -> None:
        now = time.monotonic()
        if self._stopped is not None and now >= self._resume_at:
            _signal_group(self._stopped, signal.SIGCONT)
            self._stopped = None
        candidates = [p for p in self.group.processes if p is not self._stopped]
        victim = self.rng.choice(candidates)
        victim.restart()
        self.kills += 1
        if self._stopped is None:
            others = [p for p in candidates if p is not victim and p.alive()]
            if others:
                self._stopped = self.rng.choice(others)
                _signal_group(self._stopped, signal.SIGSTOP)
                self._resume_at = now + self.config.stop_s
                self.stops += 1

    def end(self) -> None:
        if self._stopped is not None:
            _signal_group(self._stopped, signal.SIGCONT)
            self._stopped = None


def count_violations(messages: list[str]) -> Counter[str]:
    """Violations per kind from checker messages (which cap each kind's list)."""
    counts: Counter[str] = Counter()
    for message in messages:
        kind, _, rest = message.partition(": ")
        if rest.startswith("... and ") and rest.endswith(" more"):
            counts[kind] += int(rest[len("... and ") : -len(" more")])
        else:
            counts[kind] += 1
    return counts


def _bound(client: redis.Redis, keys: Keys) -> set[str]:
    meta = cast(dict[bytes, bytes], client.hgetall(keys.store_meta("Pod")))
    return {k.decode() for k, v in meta.items() if parse_meta(v).node}


def _drained(client: redis.Redis, keys: Keys) -> bool:
    pipe = client.pipeline(transaction=True)
    for key in (keys.active, keys.backoff, keys.inflight, keys.ledger_assumed):
        pipe.zcard(key)
    return sum(pipe.execute()) == 0


def run_chaos(url: str, config: ChaosConfig, log_dir: Path | None = None) -> ChaosReport:
    keys = Keys(config.scheduler)
    client = redis.Redis.from_url(url, socket_timeout=10)
    store = Store(client, keys)
    rng = random.Random(config.seed)
    if store.list("Pod")[0] or store.list("Node")[0]:
        raise ValueError(f"scheduler {config.scheduler!r} already has objects in Redis")
    nodes = [node_manifest(f"node-{i:04d}", cpu="16", memory="64Gi") for i in range(config.nodes)]
    for i in range(0, len(nodes), 500):
        store.create_many(nodes[i : i + 500])
    role_args = ("--lease-ms", str(config.lease_ms), "--assume-ttl-ms", str(config.assume_ttl_ms))
    group = ProcessGroup(url, scheduler=config.scheduler, log_dir=log_dir)
    report = ChaosReport(pods=config.pods)
    sampler = LedgerSampler(url, keys).start()
    started = time.monotonic()
    # The workers trim the event stream; the checker must judge every binding.
    with held_history(client, keys, "chaos-history") as history:
        try:
            for _ in range(config.workers):
                group.spawn("worker", *role_args)
            for _ in range(config.binders):
                group.spawn("binder", "--assume-ttl-ms", str(config.assume_ttl_ms))
            chaos = Chaos(group, config, rng)
            expected: set[str] = set()
            chunk = 100
            next_kill = time.monotonic() + config.kill_every_s
            deadline = started + config.timeout_s
            created = 0
            while time.monotonic() < deadline:
                now = time.monotonic()
                due = min(config.pods, int((now - started) * config.create_per_s))
                while created < due:
                    names = [f"chaos-{i:06d}" for i in range(created, min(due, created + chunk))]
                    store.create_many([pod_manifest(n) for n in names])
                    expected.update(f"default/{n}" for n in names)
                    created += len(names)
                if created == config.pods and expected <= _bound(client, keys):
                    break
                if now >= next_kill:
                    chaos.tick()
                    next_kill = now + config.kill_every_s
                time.sleep(0.05)
            chaos.end()
            kills, stops = chaos.kills, chaos.stops
            # Faults over: the survivors finish the stragglers (lease + TTL + a reaper tick).
            settle = time.monotonic() + (config.lease_ms + config.assume_ttl_ms) / 1000 + 15
            while time.monotonic() < settle and not (
                expected <= _bound(client, keys) and _drained(client, keys)
            ):
                time.sleep(0.1)
            report.elapsed_s = time.monotonic() - started
        finally:
            sampler.stop()
            group.stop()
        messages = check(client, keys, expect_bound=expected, limit_per_kind=5, history=history)
    counts = count_violations(messages)
    report.bound = len(expected & _bound(client, keys))
    report.pods_lost = counts["unbound"] + counts["lost-pod"]
    report.duplicate_binds = counts["double-bind"]
    report.leaked_reservations = counts["not-drained"] + counts["ledger"]
    report.overcommitted_samples = sampler.overcommitted + counts["overcommit"]
    report.samples = sampler.samples
    report.kills, report.stops = kills, stops
    counted = {"unbound", "lost-pod", "double-bind", "not-drained", "ledger", "overcommit"}
    report.violations = [m for m in messages if m.partition(": ")[0] not in counted]
    report.violations += [f"sampled overcommit: {e}" for e in sampler.examples]
    client.close()
    return report


DEFAULTS = ChaosConfig()


@click.command()
@standalone_options
@click.option("--pods", default=DEFAULTS.pods, show_default=True, help="Pods to schedule.")
@click.option("--nodes", default=DEFAULTS.nodes, show_default=True, help="Nodes (16 cpu each).")
@click.option("--workers", default=DEFAULTS.workers, show_default=True)
@click.option("--binders", default=DEFAULTS.binders, show_default=True)
@click.option(
    "--kill-every",
    "kill_every_s",
    default=DEFAULTS.kill_every_s,
    show_default=True,
    help="Seconds between SIGKILL+restarts.",
)
@click.option(
    "--stop-s", default=DEFAULTS.stop_s, show_default=True, help="SIGSTOP length (> lease)."
)
@click.option("--lease-ms", default=DEFAULTS.lease_ms, show_default=True)
@click.option("--assume-ttl-ms", default=DEFAULTS.assume_ttl_ms, show_default=True)
@click.option(
    "--create-per-s", default=DEFAULTS.create_per_s, show_default=True, help="Pod creation rate."
)
@click.option("--seed", default=DEFAULTS.seed, show_default=True)
def main(redis_url: str | None, log_dir: Path | None, output: str, **options: float) -> None:
    """Run the chaos load and print the report; exit 1 when an invariant broke."""
    config = ChaosConfig(**options)  # type: ignore[arg-type]
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)
    report = run_standalone(
        redis_url, lambda url: run_chaos(url, config, log_dir), appendfsync="everysec"
    )
    print_report(report, output)


if __name__ == "__main__":
    main()
