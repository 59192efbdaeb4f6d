"""distsched and kube-scheduler on the same real API server, in one run.

``python -m distsched.bench.kube_compare --workload SchedulingBasic --nodes 5000
--init-pods 1000 --pods 10000`` runs, each on a fresh etcd + kube-apiserver
(:mod:`distsched.kube.testenv`, binaries found as its docstring says):

1. ``bind-only``: no scheduler; the bench binds each pod as it is created (the ceiling);
   ``bind-event-only`` (only when asked for with ``--only``): the same, and the bench also
   writes each pod's Scheduled event, as a scheduler must (the ceiling of one that takes no
   time of its own);
2. ``distsched``: the bench's roles (``kube-bridge``, ``--workers`` workers, a binder) on a
   private embedded server, pointed at the API server;
3. ``kube-scheduler`` with scheduler_perf's client settings (QPS and burst 5000), and
4. ``kube-scheduler`` with its defaults (QPS 50, burst 100),

and prints one line per run and the ratios to the ceiling and to kube-scheduler (``-o
json`` for all figures). ``--only`` picks some of them. Nothing here builds Kubernetes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import click

from distsched.bench.kube import KubeBenchConfig, run_kube_bench
from distsched.bench.procs import ProcessGroup
from distsched.bench.workloads import WORKLOADS
from distsched.embedded import EmbeddedRedis
from distsched.kube.client import KubeClient
from distsched.kube.config import load
from distsched.kube.testenv import TestEnv, find_assets

RUNS = ("bind-only", "distsched", "kube-scheduler", "kube-scheduler-defaults")
CHOICES = (*RUNS, "bind-event-only")
KUBE_SCHEDULER_CONFIG = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: {kubeconfig}
{qps}leaderElection:
  leaderElect: false
"""


def _say(message: str) -> None:
    print(f"[compare] {message}", file=sys.stderr, flush=True)


# scheduler_perf's API server turns Priority admission off too: its pod templates set
# spec.priority without a PriorityClass (PreemptionBasic's preemptors).
SCHEDULER_PERF_ADMISSION_OFF = ("ServiceAccount", "TaintNodesByCondition", "Priority")

SYNC_S = 3.0
"""Time a scheduler gets to start and list before the bench creates anything."""


def one_run(
    name: str, config: KubeBenchConfig, workdir: Path, *, workers: int, binders: int
) -> dict[str, Any]:
    env = TestEnv(workdir / name, admission_off=SCHEDULER_PERF_ADMISSION_OFF).start()
    started: list[Any] = []
    try:
        kube = KubeClient(load(str(env.kubeconfig)))
        ceiling = name in ("bind-only", "bind-event-only")
        config = KubeBenchConfig(
            **{**config.__dict__, "bind_only": ceiling, "bind_events": name == "bind-event-only"}
        )
        if name == "distsched":
            server = EmbeddedRedis(data_dir=workdir / name / "redis", appendfsync="no").start()
            started.append(server)
            group = ProcessGroup(server.url, log_dir=workdir / name)
            group.extra_env["DISTSCHED_KUBECONFIG"] = str(env.kubeconfig)
            started.append(group)
            group.spawn("kube-bridge")
            for _ in range(workers):
                group.spawn("worker")
            group.spawn("binder", "--processes", str(binders))
            time.sleep(SYNC_S)
        elif name.startswith("kube-scheduler"):
            binary = find_assets("kube-scheduler")["kube-scheduler"]
            qps = "" if name.endswith("defaults") else "  qps: 5000\n  burst: 5000\n"
            path = workdir / name / "scheduler.yaml"
            path.write_text(KUBE_SCHEDULER_CONFIG.format(kubeconfig=env.kubeconfig, qps=qps))
            log = open(workdir / name / "kube-scheduler.log", "ab")  # noqa: SIM115
            proc = subprocess.Popen(
                [binary, "--config", str(path), "--secure-port=0"], stdout=log, stderr=log
            )
            log.close()
            started.append(proc)
            time.sleep(SYNC_S)
        _say(f"{name}: {config.workload.name}, {config.nodes} nodes, {config.pods} pods")
        report = run_kube_bench(kube, config)
        report["run"] = name
        kube.close()
        return report
    finally:
        for thing in reversed(started):
            if isinstance(thing, subprocess.Popen):
                thing.terminate()
                thing.wait(15)
            else:
                thing.stop()
        env.stop()


@click.command()
@click.option("--workload", default="SchedulingBasic", show_default=True)
@click.option("--nodes", default=5000, show_default=True)
@click.option("--init-pods", type=int, default=None)
@click.option("--pods", default=10000, show_default=True)
@click.option("--workers", default=2, show_default=True)
@click.option("--binders", default=1, show_default=True)
@click.option(
    "--only",
    multiple=True,
    type=click.Choice(CHOICES),
    help="Runs to make (default: all but bind-event-only).",
)
@click.option("--timeout", type=float, default=900.0, show_default=True)
@click.option("-o", "output", type=click.Choice(["text", "json"]), default="text")
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Keep each run's API server, Redis and process logs here (default: a temporary "
    "directory, removed).",
)
def main(
    workload: str,
    nodes: int,
    init_pods: int | None,
    pods: int,
    workers: int,
    binders: int,
    only: tuple[str, ...],
    timeout: float,
    output: str,
    workdir: Path | None,
) -> None:
    """Measure the bind-only ceiling, distsched and kube-scheduler on fresh API servers."""
    chosen = WORKLOADS.get(workload)
    if chosen is None:
        raise click.UsageError(f"--workload: one of {', '.join(sorted(WORKLOADS))}")
    init = init_pods if init_pods is not None else chosen.default_init(nodes, pods)
    config = KubeBenchConfig(chosen, nodes, init, pods, timeout_s=timeout, keep=True)
    reports = []
    with tempfile.TemporaryDirectory(prefix="distsched-compare-") as tmp:
        base = Path(tmp) if workdir is None else workdir
        for name in only or RUNS:
            if (base / name).exists():
                raise click.UsageError(f"--workdir: {base / name} exists already")
            reports.append(one_run(name, config, base, workers=workers, binders=binders))
    overall = {r["run"]: r["throughput"]["overall"] for r in reports}
    if output == "json":
        click.echo(json.dumps({"runs": reports, "overall": overall}, indent=2))
        return
    for r in reports:
        t = r["throughput"]
        ok = "ok" if r["invariants"]["ok"] else f"VIOLATIONS {r['invariants']['violations'][:3]}"
        click.echo(
            f"{r['run']:24s} {r['bound']}/{r['pods']} bound, overall {t['overall']:6.0f} pods/s "
            f"(1 s samples: average {t['average']:.0f}, p50 {t['p50']:.0f}); invariants {ok}"
        )
    ceiling, ours = overall.get("bind-only"), overall.get("distsched")
    if ceiling and ours:
        click.echo(f"distsched / bind-only ceiling: {ours / ceiling:.2f}")
    if overall.get("bind-event-only") and ours:
        click.echo(f"distsched / bind-event-only ceiling: {ours / overall['bind-event-only']:.2f}")
    for peer in ("kube-scheduler", "kube-scheduler-defaults"):
        if ours and overall.get(peer):
            click.echo(f"distsched / {peer}: {ours / overall[peer]:.2f}x")


if __name__ == "__main__":
    main()
