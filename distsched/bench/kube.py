"""scheduler_perf's workloads through a real API server (``distsched bench --kubeconfig``).

As scheduler_perf does with its real API server: the bench creates the nodes and the init
pods through the API, waits for the init pods to be bound, then creates the measured pods
and follows their bindings from a watch (create -> bound). Whatever scheduler serves the
pods' ``schedulerName`` binds them: distsched (the roles the bench starts, or a running
deployment) or kube-scheduler. ``--bind-only`` runs no scheduler at all: the bench POSTs a
Binding for each pod itself, as fast as the API server takes them (node by node in turn),
which measures the ceiling a scheduler can at best reach on this API server and machine.
With ``--bind-events`` it also POSTs the "Scheduled" event a scheduler writes for each pod
it binds (kube-scheduler and distsched both do): the ceiling of a scheduler that takes no
time of its own but writes what one must.

Figures: ``overall`` is measured pods bound / (last binding - first create), the one to
compare; ``average`` etc. are scheduler_perf's: pods bound per 1 s sample. At the end the
checker reads the nodes and pods from the API server and judges them with the bench's
independent rules (no node over its allocatable, no host port twice, every hard
constraint kept).
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import threading
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from distsched.bench.checker import (
    Cluster,
    Violations,
    check_inter_pod,
    check_nodes,
    check_topology_spread,
)
from distsched.bench.workloads import Names, Workload
from distsched.event_log import ACTIONS, scheduled_message
from distsched.kube.client import (
    EVENTS,
    NAMESPACES,
    NODES,
    PODS,
    ApiError,
    KubeClient,
    WatchCancel,
    binding_request,
    create_request,
    delete_request,
)
from distsched.kube.events import new_event, object_reference
from distsched.model import Node, Pod

Obj = dict[str, Any]

CREATE_CONCURRENCY = 32
BIND_CONCURRENCY = 32


@dataclass
class KubeBenchConfig:
    workload: Workload
    nodes: int
    init_pods: int
    pods: int
    scheduler_name: str = "default-scheduler"
    bind_only: bool = False
    bind_events: bool = False  # bind-only: and the Scheduled event of each binding
    timeout_s: float = 600.0
    create_concurrency: int = CREATE_CONCURRENCY
    bind_concurrency: int = BIND_CONCURRENCY
    keep: bool = False


@dataclass
class BindWatch:
    """Binding times of pods in some namespaces, from one watch of all pods."""

    kube: KubeClient
    namespaces: set[str]
    bound_at: dict[str, float] = field(default_factory=dict)
    nodes: dict[str, str] = field(default_factory=dict)
    _cancel: WatchCancel = field(default_factory=WatchCancel)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    errors: list[str] = field(default_factory=list)

    def start(self, resource_version: str) -> BindWatch:
        self._rv = resource_version
        self._thread = threading.Thread(target=self._run, name="bench-watch", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                for event in self.kube.watch(
                    PODS, resource_version=self._rv, timeout_s=300, cancel=self._cancel
                ):
                    meta = event.obj.get("metadata") or {}
                    if meta.get("resourceVersion"):
                        self._rv = str(meta["resourceVersion"])
                    if (
                        event.type in ("ADDED", "MODIFIED")
                        and meta.get("namespace") in self.namespaces
                    ):
                        node = (event.obj.get("spec") or {}).get("nodeName")
                        key = f"{meta['namespace']}/{meta['name']}"
                        if node and key not in self.bound_at:
                            self.bound_at[key] = time.monotonic()
                            self.nodes[key] = node
                    if self._stop.is_set():
                        return
            except ApiError as exc:
                self.errors.append(str(exc))
                if exc.gone:
                    return
                time.sleep(0.2)

    def stop(self) -> None:
        self._stop.set()
        self._cancel.cancel()
        if self._thread is not None:
            self._thread.join(5)


def _say(message: str) -> None:
    import sys

    print(f"[bench] {message}", file=sys.stderr, flush=True)


def _all_ok(results: Sequence[Any], what: str) -> None:
    failures = [r for r in results if isinstance(r, ApiError) and not r.conflict]
    if failures:
        raise RuntimeError(f"{len(failures)} {what} failed, e.g. {failures[0]}")


def _prepare(obj: Obj, scheduler: str) -> tuple[str, Obj]:
    namespace = obj["metadata"].get("namespace", "default")
    spec = dict(obj.get("spec") or {})
    spec["schedulerName"] = scheduler
    out = {**obj, "spec": spec}
    out.pop("status", None)
    return namespace, out


def create_and_bind(
    kube: KubeClient, pods: Sequence[Obj], config: KubeBenchConfig, node_names: Sequence[str]
) -> None:
    """Create ``pods`` (``create_concurrency`` at a time); in bind-only mode each one is
    bound as soon as it exists, node by node in turn (the "scheduler" that takes no time),
    ``bind_concurrency`` bindings at a time."""
    create_gate = asyncio.Semaphore(config.create_concurrency)
    bind_gate = asyncio.Semaphore(config.bind_concurrency)
    failures: list[str] = []

    async def one(i: int) -> None:
        namespace, obj = _prepare(pods[i], config.scheduler_name)
        try:
            async with create_gate:
                await kube.arequest(create_request(PODS, obj, namespace))
            if config.bind_only:
                async with bind_gate:
                    name = obj["metadata"]["name"]
                    node = node_names[i % len(node_names)]
                    await kube.arequest(binding_request(namespace, name, node))
                    if config.bind_events:
                        event = scheduled_event(namespace, name, node)
                        await kube.arequest(create_request(EVENTS, event, namespace))
        except ApiError as exc:
            failures.append(str(exc))

    async def all_pods() -> None:
        await asyncio.gather(*(one(i) for i in range(len(pods))))

    kube.run(all_pods())
    if failures:
        raise RuntimeError(f"{len(failures)} pod creates or bindings failed, e.g. {failures[0]}")


def _wait_bound(watch: BindWatch, keys: Sequence[str], timeout_s: float, what: str) -> bool:
    deadline = time.monotonic() + timeout_s
    wanted = set(keys)
    last, last_change = -1, time.monotonic()
    while time.monotonic() < deadline:
        done = len(wanted & watch.bound_at.keys())
        if done == len(wanted):
            return True
        if done != last:
            last, last_change = done, time.monotonic()
        elif time.monotonic() - last_change > 60:
            _say(f"{what}: no binding for 60 s ({done}/{len(wanted)} bound); giving up")
            return False
        time.sleep(0.05)
    return False


def check_from_api(kube: KubeClient, namespaces: set[str]) -> list[str]:
    """The bench's independent checker, on what the API server holds."""
    nodes_raw, _ = kube.list(NODES)
    pods_raw, _ = kube.list(PODS)
    nodes = {}
    for obj in nodes_raw:
        obj = {**obj, "kind": "Node", "apiVersion": "v1"}
        nodes[obj["metadata"]["name"]] = Node.from_dict(obj)
    bound: dict[str, Pod] = {}
    pending: dict[str, Pod] = {}
    for obj in pods_raw:
        meta = obj["metadata"]
        if meta.get("namespace") not in namespaces:
            continue
        pod = Pod.from_dict({**obj, "kind": "Pod", "apiVersion": "v1"})
        (bound if pod.spec.node_name else pending)[pod.key] = pod
    out = Violations()
    cluster = Cluster(nodes, bound, pending, {})
    check_nodes(cluster, out)
    check_inter_pod(cluster, out)
    check_topology_spread(cluster, out)
    return out.messages()


def _samples(bound_times: Sequence[float], start: float) -> list[float]:
    """Pods bound per 1 s sample (scheduler_perf's throughput collector)."""
    if not bound_times:
        return []
    end = max(bound_times)
    counts = [0] * (int(end - start) + 1)
    for t in bound_times:
        counts[int(t - start)] += 1
    return [float(c) for c in counts]


def run_kube_bench(kube: KubeClient, config: KubeBenchConfig) -> dict[str, Any]:
    workload = config.workload
    if workload.gangs:
        import click

        raise click.UsageError(
            f"--workload {workload.name}: gang workloads run on distsched's own store only "
            "(the API server would need the PodGroup CRD or kube 1.36's v1alpha2 API)"
        )
    if workload.volume_source or workload.csi_nodes:
        import click

        raise click.UsageError(
            f"--workload {workload.name}: the volume workloads run on distsched's own store "
            "only for now (their claims, PVs and CSINodes are not created through the API "
            "server)"
        )
    # Unique per run: a namespace of an earlier run may still be terminating.
    names = Names(f"kb{uuid.uuid4().hex[:8]}-")
    namespaces = {names.init_ns, names.measured_ns}
    for namespace in sorted(namespaces):
        with contextlib.suppress(ApiError):
            kube.create(
                NAMESPACES,
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
            )
    node_objs = workload.nodes(names, config.nodes)
    node_names = [n["metadata"]["name"] for n in node_objs]
    _say(f"creating {len(node_objs)} nodes through the API server")
    results = kube.request_many(
        [create_request(NODES, n) for n in node_objs], concurrency=config.create_concurrency
    )
    _all_ok(results, "node creates")
    _, rv = kube.list(PODS, params={"limit": 1}, page=1)
    watch = BindWatch(kube, namespaces).start(rv)
    try:
        init = workload.init_pods(names, config.init_pods)
        if init:
            _say(f"creating {len(init)} init pods")
            create_and_bind(kube, init, config, node_names)
            init_keys = [f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in init]
            waited = _wait_bound(watch, init_keys, config.timeout_s, "init pods")
            if workload.init_schedulable and not waited:
                raise RuntimeError("init pods were not all bound")
        measured = workload.measured_pods(names, 0, config.pods)
        keys = [f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in measured]
        _say(f"measuring: {len(measured)} {workload.name} pods created through the API server")
        writes_before = api_writes(kube)  # None: /metrics not readable with these rights
        start = time.monotonic()
        create_and_bind(kube, measured, config, node_names)
        created_end = time.monotonic()
        complete = _wait_bound(watch, keys, config.timeout_s, "measured pods")
        bound_times = [watch.bound_at[k] for k in keys if k in watch.bound_at]
        writes_after = api_writes(kube)
        writes = (
            None if writes_before is None or writes_after is None else writes_after - writes_before
        )
    finally:
        watch.stop()
    last = max(bound_times) if bound_times else time.monotonic()
    overall = len(bound_times) / max(last - start, 1e-9)
    samples = _samples(bound_times, start)
    _say("checking invariants from the API server")
    violations = check_from_api(kube, namespaces)
    report = {
        "workload": workload.name,
        "nodes": config.nodes,
        "init_pods": config.init_pods,
        "pods": config.pods,
        "scheduler": _scheduler_of(config),
        "outcome": "complete" if complete else "incomplete",
        "bound": len(bound_times),
        "seconds": last - start,
        "create_seconds": created_end - start,
        "throughput": {
            "overall": overall,
            "average": statistics.fmean(samples) if samples else 0.0,
            "p50": _percentile(samples, 50),
            "p90": _percentile(samples, 90),
            "p99": _percentile(samples, 99),
        },
        "invariants": {"ok": not violations, "violations": violations[:20]},
        "watch_errors": watch.errors[:5],
        "api_writes": None
        if writes is None
        else {
            "per_pod": round(sum(writes.values()) / max(len(bound_times), 1), 2),
            "by_request": dict(writes.most_common()),
        },
    }
    if not config.keep:
        _cleanup(kube, namespaces, node_names)
    return report


WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "DELETE", "APPLY"})


def api_writes(kube: KubeClient) -> Counter[str] | None:
    """The API server's write requests so far (``apiserver_request_total``), by
    "VERB resource[/subresource]": the measured phase's difference says what a scheduler
    (and the bench's own creates) cost the API server per pod. None when the bench's
    credentials may not read ``/metrics`` (a real cluster's)."""
    try:
        text = kube.get_text("/metrics")
    except ApiError as exc:
        _say(f"no API server metrics: {exc}")
        return None
    counts: Counter[str] = Counter()
    for family in text_string_to_metric_families(text):
        if family.name != "apiserver_request":
            continue
        for sample in family.samples:
            labels = sample.labels
            if sample.name != "apiserver_request_total" or labels.get("verb") not in WRITE_VERBS:
                continue
            what = labels.get("resource", "")
            if labels.get("subresource"):
                what += "/" + labels["subresource"]
            counts[f"{labels['verb']} {what}"] += int(sample.value)
    return counts


def _scheduler_of(config: KubeBenchConfig) -> str:
    if not config.bind_only:
        return config.scheduler_name
    return "bind-event-only" if config.bind_events else "bind-only"


def scheduled_event(namespace: str, name: str, node: str) -> Obj:
    """The events.k8s.io "Scheduled" event kube-scheduler writes for a bound pod."""
    return new_event(
        object_reference({"metadata": {"namespace": namespace, "name": name}}),
        None,
        "Normal",
        "Scheduled",
        ACTIONS["Scheduled"],
        scheduled_message(f"{namespace}/{name}", node),
        reporting="bench",
        instance="bench",
        now_ms=time.time_ns() // 1_000_000,
    )


def _percentile(samples: Sequence[float], p: int) -> float:
    if not samples:
        return 0.0
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))]


def _cleanup(kube: KubeClient, namespaces: set[str], node_names: Sequence[str]) -> None:
    for namespace in namespaces:
        with contextlib.suppress(ApiError):
            kube.request(
                "DELETE", PODS.path(namespace), params={"gracePeriodSeconds": "0"},
                what=PODS.describe(namespace),
            )  # fmt: skip
        with contextlib.suppress(ApiError):
            kube.delete(NAMESPACES, namespace)
    kube.request_many(
        [delete_request(NODES, n) for n in node_names], concurrency=CREATE_CONCURRENCY
    )
