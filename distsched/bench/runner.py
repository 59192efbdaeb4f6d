"""`distsched bench`: run a scheduler_perf-shaped workload end to end and report figures.

A run: start a private Redis (``appendfsync everysec``) unless a URL is given; spawn W
workers (each serving /metrics on a free port) and one binder pool of B processes, unless
``--external``; create the nodes and the init pods and wait until the cluster has settled;
then measure while the measured pods are created (all at once, or ``--rate`` per second)
and scheduled; drain; stop the processes; verify the invariants
(:mod:`distsched.bench.checker`). Exit 0 when every measured pod was bound and every
invariant holds, 1 otherwise, 2 on bad options.
"""

from __future__ import annotations

import os
import secrets
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import redis

from distsched.bench import checker
from distsched.bench.gangs import GangLayout, GangSampler, contention_outcome, gang_figures
from distsched.bench.measure import (
    RedisStats,
    RvSampler,
    ScriptProfile,
    WorkerCounters,
    host_busy_seconds,
    redis_stats,
    role_cpu_seconds,
    scrape,
)
from distsched.bench.phase import (
    CREATE_CHUNK,
    EXACT_INTERVAL_S,
    PROGRESS_INTERVAL_S,
    BindTracker,
    Churn,
    CreateChurn,
    MeasuredPhase,
    create_chunked,
)
from distsched.bench.procs import ProcessGroup
from distsched.bench.report import RawRun, build_result, plot, print_summary
from distsched.bench.scaling import parse_worker_counts, print_scaling, projection
from distsched.bench.workloads import WORKLOADS, Names, Obj, Workload, csi_node
from distsched.connection import ACK_ENV, RedisOptions, connect
from distsched.embedded import EmbeddedRedis, free_port
from distsched.keys import Keys
from distsched.output import err_console, print_json
from distsched.redis_text import as_text
from distsched.store import Store, parse_meta
from distsched.workers.eventhandlers import GROUP

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
SETUP_TIMEOUT_S = 300.0
DRAIN_TIMEOUT_S = 30.0
STALL_S = 30.0
SETTLE_TIMEOUT_S = 15.0


class BadInput(Exception):
    """Options that cannot make a run (exit 2)."""


class BenchFailure(Exception):
    """The run could not complete (exit 1): a process died, a setup step timed out."""


@dataclass(frozen=True)
class BenchConfig:
    workload: Workload
    nodes: int
    init_pods: int
    pods: int
    workers: int
    binders: int
    rate: float
    external: bool
    timeout_s: float
    metrics_urls: tuple[str, ...] = ()
    redis_profile: bool = False


def config_from_options(kwargs: dict[str, Any]) -> BenchConfig:
    name = kwargs["workload"]
    workload = WORKLOADS.get(name)
    if workload is None:
        raise BadInput(f"--workload {name!r}: unknown; one of {', '.join(WORKLOADS)}")
    nodes, pods = int(kwargs["nodes"]), int(kwargs["pods"])
    init = kwargs.get("init_pods")
    init = workload.default_init(nodes, pods) if init is None else int(init)
    try:
        counts = parse_worker_counts(kwargs["workers"])
    except ValueError as exc:
        raise BadInput(f"--workers {kwargs['workers']!r}: {exc}") from None
    if len(counts) > 1:
        raise BadInput("--workers: one count here; a comma list is a scaling run")
    workers, binders = counts[0], int(kwargs["binders"])
    problem = workload.check_counts(nodes, pods)
    if problem:
        raise BadInput(problem)
    rate = float(kwargs.get("rate") or 0.0)
    for flag, value, low in (
        ("--nodes", nodes, 1),
        ("--pods", pods, 1),
        ("--init-pods", init, 0),
        ("--binders", binders, 1),
        ("--rate", rate, 0),
    ):
        if value < low:
            raise BadInput(f"{flag} must be at least {low}, got {value}")
    external = bool(kwargs.get("external"))
    if not external and workers < 1:
        raise BadInput(f"--workers must be at least 1, got {workers}")
    limit = workload.max_measured(nodes, init)
    if limit is not None and pods > limit:
        raise BadInput(
            f"--pods {pods}: {workload.name} can schedule at most {limit} measured pods "
            f"on {nodes} nodes with {init} init pods"
        )
    return BenchConfig(
        workload=workload,
        nodes=nodes,
        init_pods=init,
        pods=pods,
        workers=workers,
        binders=binders,
        rate=rate,
        external=external,
        timeout_s=float(kwargs.get("timeout") or 600.0),
        metrics_urls=tuple(kwargs.get("metrics_url") or ()),
        redis_profile=bool(kwargs.get("redis_profile")),
    )


def run_bench_command(options: RedisOptions, keys: Keys, **kwargs: Any) -> int:
    """Entry point of the CLI's ``bench`` command; returns the exit code.

    ``--workers 1,2,4`` makes a scaling run: one run per count (each on a fresh embedded
    server, or under its own deployment name ``<scheduler>-w<N>`` on a given Redis), then
    the measured table and a labelled projection for N worker machines. ``--rounds R``
    measures the list R times, interleaved (1, 2, 4, 1, 2, 4, ...; deployment names
    ``<scheduler>-w<N>-r<round>``), so that a drift of the machine falls on every count.
    """
    try:
        counts = parse_worker_counts(kwargs["workers"])
    except ValueError as exc:
        err_console.print(
            f"error: --workers {kwargs['workers']!r}: {exc}", markup=False, soft_wrap=True
        )
        return EXIT_BAD_INPUT
    rounds = int(kwargs.get("rounds") or 1)
    if rounds < 1 or (rounds > 1 and len(counts) == 1):
        err_console.print(
            f"error: --rounds {rounds}: a positive count, above 1 only for a scaling run "
            "(--workers with a comma list)",
            markup=False,
            soft_wrap=True,
        )
        return EXIT_BAD_INPUT
    if len(counts) == 1:
        return _run_one(options, keys, kwargs, report=True)[0]
    if kwargs.get("external") or kwargs.get("rate") or kwargs.get("plot"):
        err_console.print(
            "error: a scaling run (--workers with a comma list) takes no --external, --rate "
            "or --plot",
            markup=False,
            soft_wrap=True,
        )
        return EXIT_BAD_INPUT
    results = []
    for n, count in ((n, c) for n in range(1, rounds + 1) for c in counts):
        _say(f"scaling run: {count} worker(s)" + (f", round {n} of {rounds}" if rounds > 1 else ""))
        name = f"{keys.scheduler}-w{count}" + (f"-r{n}" if rounds > 1 else "")
        run_keys = Keys(name) if options.url else keys
        code, result = _run_one(options, run_keys, {**kwargs, "workers": str(count)}, False)
        if result is None or code != EXIT_OK:
            if result is not None and kwargs.get("output") == "json":
                print_json(result)
            elif result is not None:
                print_summary(result)
            return code
        results.append(result)
    report = projection(results, rounds)
    if kwargs.get("output") == "json":
        print_json({"scaling": report, "runs": results})
    else:
        print_scaling(report)
    return EXIT_OK


def _run_one(
    options: RedisOptions, keys: Keys, kwargs: dict[str, Any], report: bool
) -> tuple[int, dict[str, Any] | None]:
    """One bench run: (exit code, its result or None when it could not run)."""
    try:
        config = config_from_options(kwargs)
        if config.external and not options.url:
            raise BadInput("--external needs --redis-url (the deployment to measure)")
    except BadInput as exc:
        err_console.print(f"error: {exc}", markup=False, highlight=False)
        return EXIT_BAD_INPUT, None
    if threading.current_thread() is threading.main_thread():
        # SIGTERM unwinds like Ctrl-C, so the workers, binders and server we started stop.
        signal.signal(signal.SIGTERM, _interrupt)
    embedded: EmbeddedRedis | None = None
    try:
        if not options.url:
            embedded = EmbeddedRedis(appendfsync="everysec").start()
            options = RedisOptions(url=embedded.url)
            _say(f"embedded Redis at {embedded.url}")
        raw = run_bench(options, keys, config)
    except BadInput as exc:
        err_console.print(f"error: {exc}", markup=False, highlight=False)
        return EXIT_BAD_INPUT, None
    except BenchFailure as exc:
        err_console.print(f"bench failed: {exc}", markup=False, highlight=False)
        return EXIT_FAILED, None
    except KeyboardInterrupt:
        err_console.print("bench interrupted", markup=False)
        return EXIT_FAILED, None
    finally:
        if embedded is not None:
            embedded.stop()
    result = build_result(raw)
    if report:
        if kwargs.get("output") == "json":
            print_json(result)
        else:
            print_summary(result)
        if kwargs.get("plot"):
            plot(raw, kwargs["plot"])
    ok = result["invariants"]["ok"] and result["outcome"] == config.workload.expected_outcome
    if not ok and kwargs.get("output") == "json":
        for violation in result["invariants"]["violations"]:
            err_console.print(f"violation: {violation}", markup=False, highlight=False)
    return (EXIT_OK if ok else EXIT_FAILED), result


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def _say(message: str) -> None:
    err_console.print(f"[dim]{message}[/dim]", highlight=False)


# --------------------------------------------------------------------------- deployment


@dataclass
class Deployment:
    """The processes measured: our own ProcessGroup, or an external deployment."""

    options: RedisOptions
    client: redis.Redis
    keys: Keys
    group: ProcessGroup | None
    metrics_urls: list[str] = field(default_factory=list)
    log_dir: Path | None = None

    def roles(self) -> dict[str, list[int]]:
        if self.group is None:
            return {}
        return {
            "workers": [p.pid for p in self.group.workers()],
            "binders": [p.pid for p in self.group.binders()],
        }

    def check_alive(self, roles: tuple[str, ...] = ("worker", "binder")) -> None:
        if self.group is None:
            return
        for proc in self.group.processes:
            if proc.role in roles and not proc.alive():
                tail = ""
                if proc.log_path and proc.log_path.exists():
                    tail = "\n".join(proc.log_path.read_text(errors="replace").splitlines()[-15:])
                raise BenchFailure(f"{proc.role} (pid {proc.pid}) exited:\n{tail}")


def start_deployment(
    options: RedisOptions, keys: Keys, config: BenchConfig, log_dir: Path
) -> Deployment:
    client = connect(options)
    if config.external:
        return Deployment(options, client, keys, None, list(config.metrics_urls))
    # The roles get the acknowledgement option the bench was given (the URL they get anyway).
    env = {} if options.min_replicas_ack is None else {ACK_ENV: str(options.min_replicas_ack)}
    group = ProcessGroup(options.url, scheduler=keys.scheduler, log_dir=log_dir, extra_env=env)
    urls = []
    for _ in range(config.workers):
        port = free_port()
        group.spawn("worker", "--metrics-port", str(port))
        urls.append(f"http://127.0.0.1:{port}/metrics")
    group.spawn("binder", "--processes", str(config.binders))
    return Deployment(options, client, keys, group, urls, log_dir)


def wait_for(
    what: str,
    condition: Callable[[], bool],
    deployment: Deployment,
    timeout_s: float,
    roles: tuple[str, ...] = ("worker", "binder"),
) -> None:
    """Poll ``condition`` until true; fail when a process of ``roles`` died or at timeout."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        deployment.check_alive(roles)
        if time.monotonic() > deadline:
            raise BenchFailure(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(0.05)


def _consumers(client: redis.Redis, keys: Keys) -> int:
    try:
        return len(client.xinfo_consumers(keys.queue_events, GROUP))
    except redis.ResponseError:
        return 0  # no stream or group yet


def _store_is_empty(client: redis.Redis, keys: Keys) -> bool:
    pipe = client.pipeline(transaction=False)
    pipe.hlen(keys.store_meta("Pod"))
    pipe.hlen(keys.store_meta("Node"))
    return not any(pipe.execute())


# --------------------------------------------------------------------------- the run


@dataclass
class Checkpoint:
    at: float
    cpu: dict[str, float]
    redis: RedisStats


def take_checkpoint(deployment: Deployment) -> Checkpoint:
    cpu = role_cpu_seconds(deployment.roles())
    cpu["bench"] = time.process_time()
    cpu["host"] = host_busy_seconds()
    return Checkpoint(time.monotonic(), cpu, redis_stats(deployment.client))


def _scrape(deployment: Deployment) -> WorkerCounters | None:
    if not deployment.metrics_urls:
        return None
    return scrape(deployment.metrics_urls)


def _missing_plugins(workload: Workload) -> list[str]:
    from distsched.framework.registry import IN_TREE_REGISTRY

    return [name for name in workload.needs if name not in IN_TREE_REGISTRY]


def setup_cluster(
    deployment: Deployment, store: Store, config: BenchConfig, names: Names
) -> list[str]:
    """Nodes and init pods; returns the init pod keys."""
    workload, client, keys = config.workload, deployment.client, deployment.keys
    if deployment.group is not None:
        _say(f"starting {config.workers} worker(s) and a pool of {config.binders} binder(s)")
        wait_for(
            "the workers to join the event stream",
            lambda: _consumers(client, keys) >= config.workers,
            deployment,
            SETUP_TIMEOUT_S,
        )
    _say(f"creating {config.nodes} nodes")
    ledger_nodes = client.scard(keys.ledger_nodes)
    node_objs = workload.nodes(names, config.nodes)
    create_chunked(store, node_objs)
    wait_for(
        "the ledger to register every node",
        lambda: client.scard(keys.ledger_nodes) >= ledger_nodes + config.nodes,
        deployment,
        SETUP_TIMEOUT_S,
    )
    if workload.csi_nodes:
        _say(f"creating {config.nodes} CSINodes")
        create_chunked(store, [csi_node(n["metadata"]["name"]) for n in node_objs])
    init_keys = [names.init_key(i) for i in range(config.init_pods)]
    if not init_keys:
        return init_keys
    verb = "waiting for" if workload.init_schedulable else "not waiting for"
    init_pods = workload.init_pods(names, config.init_pods)
    volumes = workload.volume_objects(init_pods)
    if volumes:
        _say(f"creating {len(volumes) // 2} claims and their PVs for the init pods")
        create_chunked(store, volumes)
    _say(f"creating {config.init_pods} init pods ({verb} them)")
    create_chunked(store, init_pods)
    if workload.init_schedulable:
        tracker = BindTracker(client, keys, init_keys)

        def all_bound() -> bool:
            time.sleep(0.2)
            return tracker.poll() >= len(init_keys)

        wait_for("the init pods to be bound", all_bound, deployment, config.timeout_s)
    return init_keys


def create_setup_objects(
    deployment: Deployment, store: Store, config: BenchConfig, names: Names
) -> list[Obj]:
    """The workload's objects created before measuring (namespaces, PodGroups); waits until
    the queue knows every PodGroup's minimum, as upstream's PodGroups exist before its pods."""
    objs = config.workload.setup_objects(names, config.nodes, config.pods)
    if not objs:
        return objs
    client, keys = deployment.client, deployment.keys
    groups = sum(1 for o in objs if o.get("kind") == "PodGroup")
    known = client.hlen(keys.gang_min)
    _say(f"creating {groups} PodGroups")
    create_chunked(store, objs)
    wait_for(
        "the queue to know every PodGroup",
        lambda: client.hlen(keys.gang_min) >= known + groups,
        deployment,
        SETUP_TIMEOUT_S,
    )
    return objs


def settle_gangs(deployment: Deployment, layout: GangLayout, placed: set[str]) -> bool:
    """Wait until every member of a gang that is not placed has failed an attempt (it is
    in backoffQ or the unschedulable set, not active, gated or in flight): the gangs left
    pending were tried. False after SETTLE_TIMEOUT_S."""
    client, keys = deployment.client, deployment.keys
    waiting = [k for members in layout.members.values() for k in members if k not in placed]
    if not waiting:
        return True

    def tried() -> bool:
        time.sleep(0.1)
        pipe = client.pipeline(transaction=True)
        pipe.zmscore(keys.backoff, waiting)
        pipe.zmscore(keys.unschedulable, waiting)
        backoff, unschedulable = pipe.execute()
        return all(
            a is not None or b is not None for a, b in zip(backoff, unschedulable, strict=True)
        )

    try:
        wait_for("the pending gangs to be tried", tried, deployment, SETTLE_TIMEOUT_S)
    except BenchFailure as exc:
        _say(str(exc))
        return False
    return True


def placement_figures(client: redis.Redis, keys: Keys) -> dict[str, float]:
    """How evenly the bound pods (init and measured) lie over the nodes: min, max, mean
    and standard deviation (population) of the pods per node, every node counted."""
    pipe = client.pipeline(transaction=False)
    pipe.hkeys(keys.store_meta("Node"))
    pipe.hvals(keys.store_meta("Pod"))
    nodes, metas = pipe.execute()
    per_node = dict.fromkeys((as_text(n) for n in nodes), 0)
    for raw in metas:
        node = parse_meta(raw).node
        if node in per_node:
            per_node[node] += 1
    counts = np.array(list(per_node.values()) or [0], dtype=float)
    return {
        "min": float(counts.min()),
        "max": float(counts.max()),
        "mean": round(float(counts.mean()), 3),
        "stddev": round(float(counts.std()), 3),
    }


def placed_pods(client: redis.Redis, keys: Keys, pod_keys: list[str]) -> set[str]:
    """Those of ``pod_keys`` bound or reserved: with a record in the ledger."""
    records = client.hmget(keys.ledger_pods, pod_keys) if pod_keys else []
    return {k for k, record in zip(pod_keys, records, strict=True) if record is not None}


def drain(deployment: Deployment) -> None:
    """Stop our workers, let the binders finish the queued bindings, stop everything."""
    client, keys = deployment.client, deployment.keys

    def quiet() -> bool:
        pipe = client.pipeline(transaction=False)
        pipe.zcard(keys.inflight)
        pipe.zcard(keys.ledger_assumed)
        return not any(pipe.execute())

    if deployment.group is None:
        try:
            wait_for("inflight and assumed pods to drain", quiet, deployment, DRAIN_TIMEOUT_S)
        except BenchFailure as exc:
            _say(str(exc))
        return
    for proc in deployment.group.workers():
        proc.stop()
    try:
        wait_for("assumed pods to drain", quiet, deployment, DRAIN_TIMEOUT_S, ("binder",))
    except BenchFailure as exc:
        _say(str(exc))  # the checker reports what is left
    deployment.group.stop()


def run_bench(options: RedisOptions, keys: Keys, config: BenchConfig) -> RawRun:
    workload = config.workload
    warnings = [
        f"{workload.name} needs the {name} plugin, which is not registered: "
        "expect unbound pods or violated constraints"
        for name in _missing_plugins(workload)
    ]
    for warning in warnings:
        err_console.print(f"warning: {warning}", markup=False, highlight=False)
    names = Names(f"b{secrets.token_hex(2)}-" if config.external else "")
    with tempfile.TemporaryDirectory(prefix="distsched-bench-") as tmp:
        probe = connect(options)
        try:
            if not config.external and not _store_is_empty(probe, keys):
                raise BadInput(
                    f"scheduler {keys.scheduler!r} at the given Redis already has objects; "
                    "use an empty database, another --scheduler, or --external"
                )
        finally:
            probe.close()
        deployment = start_deployment(options, keys, config, Path(tmp))
        try:
            # The workers trim the event stream; the checker must see every binding.
            with checker.held_history(deployment.client, keys, "bench-history") as history:
                return _measure(deployment, config, names, warnings, history)
        finally:
            if deployment.group is not None:
                deployment.group.stop()
            deployment.client.close()


def _measure(
    deployment: Deployment,
    config: BenchConfig,
    names: Names,
    warnings: list[str],
    history: checker.BindHistory,
) -> RawRun:
    client, keys, workload = deployment.client, deployment.keys, config.workload
    store = Store(client, keys)
    init_keys = setup_cluster(deployment, store, config, names)
    setup = create_setup_objects(deployment, store, config, names)
    pods = workload.measured_pods(names, 0, config.pods)
    volumes = workload.volume_objects(pods)
    if volumes:
        # scheduler_perf creates each pod's claim and PV just before the pod, inside the
        # measured phase; here they exist before it starts (the phase times pods only).
        _say(f"creating {len(volumes) // 2} claims and their PVs for the measured pods")
        create_chunked(store, volumes)
    pod_keys = [f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in pods]
    tracker = BindTracker(client, keys, pod_keys, deleted_done=workload.measured_evictable)
    layout = GangLayout.of(setup, pods) if workload.gangs else None
    churn: Churn | CreateChurn | None = None
    if workload.churn:
        churn = Churn(store, names, init_keys)
    elif workload.churn_creates is not None:
        churn = CreateChurn(store, names, workload.churn_creates)
    pipe = client.pipeline(transaction=False)
    pipe.hlen(keys.ledger_pods)
    pipe.zcard(keys.ledger_assumed)
    records, assumed = pipe.execute()
    before_counters = _scrape(deployment)
    before = take_checkpoint(deployment)
    profile = ScriptProfile(client).start() if config.redis_profile else None
    sampler = RvSampler(connect(deployment.options), keys).start()
    gang_sampler = None
    if layout is not None:
        gang_sampler = GangSampler(connect(deployment.options), keys, layout).start()
    mode = f"at {config.rate:g} pods/s" if config.rate else "all at once"
    _say(f"measuring: {config.pods} {workload.name} pods created {mode}")
    phase = MeasuredPhase(
        client=client,
        keys=keys,
        store=store,
        pods=pods,
        pod_keys=pod_keys,
        rate=config.rate,
        timeout_s=config.timeout_s,
        stall_s=STALL_S,
        checkpoint=lambda: take_checkpoint(deployment),
        check_alive=deployment.check_alive,
        churn=churn,
        churn_interval_s=workload.churn_interval_s,
        baseline_bound=int(records) - int(assumed),
        exact_interval_s=PROGRESS_INTERVAL_S
        if workload.init_evictable or workload.measured_evictable
        else EXACT_INTERVAL_S,
        target=workload.expected_bound(config.nodes, config.pods),
        chunk=max(1, min(CREATE_CHUNK, workload.arrival_chunk(config.pods)))
        if workload.arrival_chunk
        else CREATE_CHUNK,
    )
    try:
        result = phase.run(tracker)
        settle = layout is not None and workload.expected_outcome != "complete"
        if settle and result.outcome == "complete":
            assert layout is not None
            if not settle_gangs(deployment, layout, placed_pods(client, keys, pod_keys)):
                warnings.append("the pending gangs were not all tried before the run ended")
    finally:
        clock = sampler.stop()
        scripts = profile.stop() if profile is not None else None
        if gang_sampler is not None:
            gang_sampler.stop()
            gang_sampler.client.close()
    after = result.after
    assert isinstance(after, Checkpoint)
    after_counters = _scrape(deployment)
    counters = None
    if before_counters is not None and after_counters is not None:
        counters = after_counters - before_counters
    if result.outcome != "complete":
        warnings.append(
            f"{result.outcome}: {len(tracker.pending)} measured pods unbound after "
            f"{result.end - result.start:.0f}s"
        )
    _say("draining and checking invariants")
    drain(deployment)
    everyone = workload.expected_bound(config.nodes, config.pods) == len(pods)
    expected = set(pod_keys) if everyone and not workload.measured_evictable else set()
    if workload.init_schedulable and not workload.init_evictable:
        expected.update(init_keys)
    violations = checker.check(client, keys, expect_bound=expected, history=history)
    placement = placement_figures(client, keys)
    gangs = None
    if layout is not None:
        assert gang_sampler is not None
        violations = gang_sampler.messages + violations
        tracker.poll()  # a gang member bound after the phase ended counts (and is judged)
        placed = placed_pods(client, keys, pod_keys)
        if workload.expected_outcome != "complete" and result.outcome == "complete":
            result.outcome = contention_outcome(layout, placed)
    bound_keys = [k for k in pod_keys if k in tracker.bind_rv]
    created_rvs = [result.created_rv[k] for k in pod_keys if k in result.created_rv]
    cpu: dict[str, float | None] = {
        role: after.cpu[role] - before.cpu.get(role, 0.0) for role in after.cpu
    }
    redis_cpu = after.redis.cpu_seconds - before.redis.cpu_seconds
    host = cpu.pop("host") or 0.0
    ours = sum(v for v in cpu.values() if v is not None) + redis_cpu
    # What else ran on this machine meanwhile (other benchmarks, test suites): it competes
    # for the same cores. Meaningless when Redis runs on another host.
    other_cores: float | None = max(0.0, host - ours) / max(after.at - before.at, 1e-9)
    if deployment.group is None:
        cpu = {"workers": None, "binders": None, **cpu}
        other_cores = None  # the deployment's own processes are "other" here
    bound_at = clock.times_of([tracker.bind_rv[k] for k in bound_keys])
    if layout is not None:
        created = clock.times_of([result.created_rv[k] for k in bound_keys])
        gangs = gang_figures(
            layout,
            start=result.start,
            bound_at=dict(zip(bound_keys, bound_at.tolist(), strict=True)),
            created_at=dict(zip(bound_keys, created.tolist(), strict=True)),
            placed=placed,
            counters=counters,
            sampler=gang_sampler,
        )
    return RawRun(
        workload=workload.name,
        nodes=config.nodes,
        init_pods=config.init_pods,
        pods=config.pods,
        workers=config.workers if deployment.group else (len(config.metrics_urls) or None),
        binders=config.binders if deployment.group else None,
        rate=config.rate,
        outcome=result.outcome,
        start=result.start,
        end=result.end,
        created_at=clock.times_of([result.created_rv[k] for k in bound_keys]),
        bound_at=bound_at,
        all_created_at=clock.times_of(created_rvs) if created_rvs else np.zeros(0),
        cpu={**cpu, "redis": redis_cpu},
        other_cpu_cores=other_cores,
        load_average=os.getloadavg()[0],
        redis=after.redis - before.redis,
        counters=counters,
        scripts=scripts,
        violations=violations,
        warnings=warnings,
        gangs=gangs,
        placement=placement,
        churn=churn_figures(client, keys, churn, tracker),
    )


def churn_figures(
    client: redis.Redis,
    keys: Keys,
    churn: Churn | CreateChurn | None,
    tracker: BindTracker,
) -> dict[str, int] | None:
    """What the churn did (see report.py's ``churn``); None without churn."""
    if churn is None:
        return None
    figures = {"steps": churn.step, "measured_preempted": len(tracker.deleted)}
    if isinstance(churn, CreateChurn):
        figures["preemptors_bound"] = len(placed_pods(client, keys, churn.created))
    return figures
