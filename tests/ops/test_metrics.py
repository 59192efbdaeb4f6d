"""/metrics of a real worker and a real binder pool after they scheduled a few pods."""

from __future__ import annotations

import socket
import time
import urllib.error

import pytest
import redis

from distsched.bench.procs import ProcessGroup
from distsched.embedded import free_port
from distsched.keys import Keys
from distsched.store import Store
from tests.cli.manifests import node, pod
from tests.ops.scrape import Exposition, scrape
from tests.support.readers import bound_nodes
from tests.support.waits import wait_for

PODS = 20
PROFILE = "default-scheduler"


def _free_pair() -> int:
    """A port P with P and P+1 free (a binder pool of two serves on P and P+1)."""
    for _ in range(50):
        port = free_port()
        try:
            socket.create_server(("127.0.0.1", port + 1)).close()
        except OSError:
            continue
        return port
    raise RuntimeError("no two consecutive free ports")


def _consuming(client: redis.Redis, keys: Keys) -> bool:
    """The worker reads the event stream, so every pod reaches the queue by an event
    (objects older than the worker's start are queued by its resync instead)."""
    return any(g["consumers"] for g in client.xinfo_groups(keys.queue_events))


def _check_names(exposition: Exposition) -> None:
    names = set(exposition.types) | {name for name, _, _ in exposition.samples}
    assert names, "empty exposition"
    for name in names:
        assert name.startswith("distsched_"), name
        assert "distsched_distsched" not in name and "_total_total" not in name, name


def _check_histogram(exposition: Exposition, name: str, **labels: str) -> float:
    """Buckets cumulative and ending in +Inf == _count; returns _count."""
    buckets = [
        (float(have["le"]), value)
        for sample, have, value in exposition.samples
        if sample == f"{name}_bucket" and all(have.get(k) == v for k, v in labels.items())
    ]
    assert buckets, f"no buckets for {name}{labels}"
    buckets.sort()
    counts = [value for _, value in buckets]
    assert counts == sorted(counts), f"{name} buckets are not cumulative"
    count = exposition.value(f"{name}_count", **labels)
    assert buckets[-1] == (float("inf"), count)
    return count


def test_worker_and_binder_metrics(processes: ProcessGroup, private_client: redis.Redis) -> None:
    worker_port, binder_port = free_port(), _free_pair()
    processes.spawn("worker", "--metrics-port", str(worker_port))  # default: 127.0.0.1
    processes.spawn(
        "binder",
        "--processes", "2",
        "--metrics-port", str(binder_port),
        "--metrics-addr", "0.0.0.0",
    )  # fmt: skip
    keys = Keys()
    no_stream_yet = (redis.ResponseError,)
    wait_for(
        "the worker to read events",
        lambda: _consuming(private_client, keys),
        20,
        retry=no_stream_yet,
    )
    store = Store(private_client, keys)
    store.create_many([node("n1"), node("n2")])
    store.create_many([pod(f"p{i:02d}") for i in range(PODS)] + [pod("too-big", cpu="64")])
    wait_for(f"{PODS} pods bound", lambda: len(bound_nodes(private_client, keys)) >= PODS, 30)
    time.sleep(0.5)  # the binder's confirm and the worker's failure of too-big settle

    worker = scrape("127.0.0.1", worker_port)
    binders = [scrape("127.0.0.1", binder_port + i) for i in range(2)]
    for exposition in (worker, *binders):
        _check_names(exposition)

    # --- the worker: attempts, their latency, the queue read from Redis
    scheduled = worker.value(
        "distsched_schedule_attempts_total", result="scheduled", profile=PROFILE
    )
    assert scheduled >= PODS
    assert (
        worker.value("distsched_schedule_attempts_total", result="unschedulable", profile=PROFILE)
        >= 1
    )
    assert worker.types["distsched_scheduling_attempt_duration_seconds"] == "histogram"
    count = _check_histogram(
        worker, "distsched_scheduling_attempt_duration_seconds", result="scheduled", profile=PROFILE
    )
    assert count == scheduled
    duration = worker.value(
        "distsched_scheduling_attempt_duration_seconds_sum", result="scheduled", profile=PROFILE
    )
    assert 0 < duration < 30 * count
    assert worker.value("distsched_pending_pods", queue="active") == 0
    assert worker.value("distsched_pending_pods", queue="inflight") == 0
    assert worker.value("distsched_pending_pods", queue="unschedulable") == 1
    assert worker.value("distsched_dead_lettered_pods") == 0
    assert worker.total("distsched_unschedulable_pods", plugin="NodeResourcesFit") == 1
    # Each pod entered activeQ once, straight from the store's create script (the default
    # profile gates only on schedulingGates): the handlers added none of them.
    assert worker.value("distsched_queue_store_added_pods_total") == PODS + 1
    assert worker.total("distsched_queue_incoming_pods_total", event="PodAdd") == 0
    assert worker.types["distsched_reserve_conflicts_total"] == "counter"
    assert worker.value("distsched_lease_reclaims_total", kind="inflight") == 0
    assert worker.value("distsched_lease_reclaims_total", kind="assumed") == 0
    assert worker.types["distsched_framework_extension_point_duration_seconds"] == "histogram"
    assert worker.types["distsched_preemption_attempts_total"] == "counter"

    # --- the binder pool: every pod bound once, by one of the two children
    assert sum(b.value("distsched_bindings_total", result="bound") for b in binders) == PODS
    assert sum(b.value("distsched_bindings_total", result="failed") for b in binders) == 0
    sli = sum(b.total("distsched_pod_scheduling_sli_duration_seconds_count") for b in binders)
    assert sli == PODS
    assert all(b.values("distsched_pending_pods", queue="active") == [0] for b in binders)
    bound_latency = sum(
        b.total("distsched_binding_duration_seconds_count", result="bound") for b in binders
    )
    assert bound_latency == PODS

    # --- bind address: loopback only unless --metrics-addr says otherwise
    with pytest.raises(urllib.error.URLError):
        scrape("127.0.0.2", worker_port, timeout_s=0)
    assert scrape("127.0.0.2", binder_port, timeout_s=5).types  # bound to 0.0.0.0
