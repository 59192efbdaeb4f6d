"""Churn soak: pods created at a steady rate, each deleted a few seconds later, for minutes,
against real worker and binder processes; then every pod is deleted and what is left is
counted. It checks that nothing leaks under churn and that Redis memory follows the live
cluster, not the run's length.

``python -m distsched.bench.soak --minutes 10 --rate 250 --lifetime 10`` runs the long
version on a private embedded server (or ``--redis-url``; the run uses its own scheduler
name). The report has, after the delete-all: ledger reservations, per-pod keys (ledger,
queue, explain, Permit lists, nodes' pod sets), the event streams' lengths, Redis
``used_memory`` sampled every 5 s (first, highest, and the means of the run's second and
last thirds, whose ratio says whether memory grows with the run), the binding history
(double binds) and the consistency sweep's repairs found in the workers' logs (the sweep
must not be what kept the ledger clean: every repair is a race that still exists).
"""

from __future__ import annotations

import contextlib
import re
import tempfile
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path

import click
import redis

from distsched.bench.binder_pool import node_manifest, pod_manifest
from distsched.bench.checker import check, held_history
from distsched.bench.procs import ProcessGroup
from distsched.bench.standalone import print_report, run_standalone, standalone_options
from distsched.keys import Keys
from distsched.redis_text import as_text
from distsched.store import NotFound, Store

MEMORY_EVERY_S = 5.0
TICK_S = 0.1
SWEEP_LINE = re.compile(r"sweep: repaired (\d+) (\S+) record")


@dataclass(frozen=True, slots=True)
class SoakConfig:
    minutes: float = 10.0
    rate: float = 250.0  # pods created per second
    lifetime_s: float = 10.0  # each pod is deleted this long after its creation
    nodes: int = 50
    workers: int = 2
    binders: int = 1
    drain_timeout_s: float = 90.0
    scheduler: str = "soak"


@dataclass
class SoakReport:
    created: int = 0
    deleted: int = 0
    bound: int = 0
    elapsed_s: float = 0.0
    ledger_reservations: int = 0
    per_pod_keys: dict[str, int] = field(default_factory=dict)
    stream_entries: dict[str, int] = field(default_factory=dict)
    memory_mb: dict[str, float] = field(default_factory=dict)
    sweep_repairs: dict[str, int] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.ledger_reservations or self.per_pod_keys or self.violations)

    def line(self) -> str:
        mem = self.memory_mb
        return (
            f"soak: {self.created} pods created and deleted in {self.elapsed_s:.0f}s "
            f"({self.created / max(self.elapsed_s, 1e-9):.0f}/s), {self.bound} bound; after "
            f"delete-all: {self.ledger_reservations} ledger reservations, per-pod keys "
            f"{self.per_pod_keys or 0}, streams {self.stream_entries}; Redis used_memory "
            f"first {mem.get('first', 0):.1f} MB, highest {mem.get('highest', 0):.1f} MB, "
            f"second third {mem.get('second_third', 0):.1f} MB, last third "
            f"{mem.get('last_third', 0):.1f} MB, after {mem.get('after', 0):.1f} MB; "
            f"sweep repairs {self.sweep_repairs or 0}; violations {len(self.violations)}"
        )


def per_pod_keys(client: redis.Redis, keys: Keys) -> dict[str, int]:
    """Records that exist per pod, counted (only the non-empty kinds)."""
    pipe = client.pipeline(transaction=False)
    pipe.hlen(keys.ledger_pods)
    pipe.zcard(keys.ledger_assumed)
    pipe.hlen(keys.ledger_anti_affinity_pods)
    pipe.hlen(keys.info)
    pipe.hlen(keys.explain)
    pipe.hlen(keys.objects("Pod"))
    pipe.hlen(keys.store_meta("Pod"))
    names = ("ledger", "assumed", "aapods", "queue", "explain", "store", "store-meta")
    counts = dict(zip(names, pipe.execute(), strict=True))
    counts["permit"] = sum(1 for _ in client.scan_iter(keys.permit("*"), count=1000))
    nodes = [as_text(n) for n in client.smembers(keys.ledger_nodes)]
    counts["nodepods"] = sum(client.scard(keys.ledger_node_pods(n)) for n in nodes)
    return {k: int(v) for k, v in counts.items() if v}


def _used_mb(client: redis.Redis) -> float:
    return int(client.info("memory")["used_memory"]) / 2**20


def _sweep_repairs(log_dir: Path) -> dict[str, int]:
    found: Counter[str] = Counter()
    for path in log_dir.glob("worker-*.log"):
        for match in SWEEP_LINE.finditer(path.read_text(errors="replace")):
            found[match.group(2)] += int(match.group(1))
    return dict(found)


def run_soak(url: str, config: SoakConfig, log_dir: Path) -> SoakReport:
    keys = Keys(config.scheduler)
    client = redis.Redis.from_url(url, socket_timeout=10)
    store = Store(client, keys)
    if store.list("Pod")[0] or store.list("Node")[0]:
        raise ValueError(f"scheduler {config.scheduler!r} already has objects in Redis")
    nodes = [node_manifest(f"node-{i:03d}", cpu="32") for i in range(config.nodes)]
    store.create_many(nodes)
    report = SoakReport()
    memory: list[tuple[float, float]] = []
    group = ProcessGroup(url, scheduler=config.scheduler, log_dir=log_dir)
    live: deque[tuple[float, str]] = deque()
    with held_history(client, keys, "soak-history") as history:
        try:
            for _ in range(config.workers):
                group.spawn("worker")
            for _ in range(config.binders):
                group.spawn("binder")
            started = time.monotonic()
            end = started + config.minutes * 60
            next_memory = started
            while (now := time.monotonic()) < end:
                due = int((now - started) * config.rate)
                if due > report.created:
                    names = [f"churn-{i:07d}" for i in range(report.created, due)]
                    store.create_many([pod_manifest(n, cpu="50m", memory="64Mi") for n in names])
                    live.extend((now, f"default/{n}") for n in names)
                    report.created = due
                while live and live[0][0] + config.lifetime_s <= now:
                    _, key = live.popleft()
                    _delete(store, key)
                    report.deleted += 1
                if now >= next_memory:
                    memory.append((now - started, _used_mb(client)))
                    history.advance()  # reads the bindings, so the stream can be trimmed
                    next_memory = now + MEMORY_EVERY_S
                time.sleep(max(0.0, TICK_S - (time.monotonic() - now)))
            report.elapsed_s = time.monotonic() - started
            while live:
                _delete(store, live.popleft()[1])
                report.deleted += 1
            deadline = time.monotonic() + config.drain_timeout_s
            while time.monotonic() < deadline and per_pod_keys(client, keys):
                history.advance()
                time.sleep(0.5)
            # One more round of position reports and trims (5 s and 10 s).
            time.sleep(16)
            report.violations = check(client, keys, history=history)
        finally:
            group.stop()
    report.bound = sum(history.binds.values())
    double = [f"{k} bound {n} times" for k, n in history.per_pod().items() if n > 1]
    report.violations += double
    report.ledger_reservations = client.hlen(keys.ledger_pods)
    report.per_pod_keys = per_pod_keys(client, keys)
    report.stream_entries = {
        "store:events": client.xlen(keys.events),
        "q:events": client.xlen(keys.queue_events),
    }
    report.memory_mb = _memory_summary(memory, _used_mb(client))
    report.sweep_repairs = _sweep_repairs(log_dir)
    client.close()
    return report


def _delete(store: Store, key: str) -> None:
    with contextlib.suppress(NotFound):  # already gone: nothing to do
        store.delete("Pod", key)


def _memory_summary(samples: list[tuple[float, float]], after: float) -> dict[str, float]:
    if not samples:
        return {"after": after}
    values = [mb for _, mb in samples]
    third = max(1, len(values) // 3)
    second = values[third : 2 * third] or values
    last = values[-third:]
    return {
        "first": values[0],
        "highest": max(values),
        "second_third": sum(second) / len(second),
        "last_third": sum(last) / len(last),
        "after": after,
    }


DEFAULTS = SoakConfig()


@click.command()
@standalone_options
@click.option("--minutes", default=DEFAULTS.minutes, show_default=True)
@click.option("--rate", default=DEFAULTS.rate, show_default=True, help="Pods created per s.")
@click.option(
    "--lifetime",
    "lifetime_s",
    default=DEFAULTS.lifetime_s,
    show_default=True,
    help="Seconds from a pod's creation to its deletion.",
)
@click.option("--nodes", default=DEFAULTS.nodes, show_default=True)
@click.option("--workers", default=DEFAULTS.workers, show_default=True)
@click.option("--binders", default=DEFAULTS.binders, show_default=True)
def main(redis_url: str | None, log_dir: Path | None, output: str, **options: float) -> None:
    """Run the churn soak and print the report; exit 1 when something leaked."""
    config = SoakConfig(**options)  # type: ignore[arg-type]
    with tempfile.TemporaryDirectory(prefix="distsched-soak-") as tmp:
        logs = log_dir or Path(tmp)
        logs.mkdir(parents=True, exist_ok=True)
        report = run_standalone(
            redis_url, lambda url: run_soak(url, config, logs), appendfsync="no"
        )
    print_report(report, output, most=20)


if __name__ == "__main__":
    main()
