"""Crash safety of gangs (issue 22, item 8), with real worker and binder processes: a
worker killed while it holds a gang, popped or reserved, leaves nothing reserved for
long, and the gang is placed whole by another worker."""

from __future__ import annotations

import time
from pathlib import Path
from typing import cast

import redis

from distsched.bench.checker import BindHistory
from distsched.bench.procs import ProcessGroup
from distsched.cache.ledger import Ledger
from distsched.clock import SYSTEM_CLOCK
from distsched.model.podgroups import POD_GROUP_LABEL
from distsched.store import Store
from tests.crash.harness import (
    ASSUME_TTL_MS,
    KEYS,
    assert_invariants,
    create_cluster,
    fault,
    report_recovery,
    spawn,
    wait_marker,
    worker_args,
)
from tests.support.objects import pod
from tests.support.waits import wait_all_bound

GANG = 8
BINDER_ARGS = ("--assume-ttl-ms", str(ASSUME_TTL_MS))


def create_gang(client: redis.Redis, name: str = "train") -> list[str]:
    store = Store(client, KEYS)
    group = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": GANG},
    }
    members = [
        pod(f"{name}-{i}", cpu="2", memory="64Mi", labels={POD_GROUP_LABEL: name})
        for i in range(GANG)
    ]
    store.create_many([group, *members])
    return [f"default/{name}-{i}" for i in range(GANG)]


def held_by_ledger(client: redis.Redis, pods: list[str]) -> set[str]:
    return set(Ledger(client, KEYS, SYSTEM_CLOCK).pod_nodes(pods))


def test_worker_killed_holding_a_popped_gang(
    private_client: redis.Redis,
    processes: ProcessGroup,
    tmp_path: Path,
    bind_history: BindHistory,
) -> None:
    create_cluster(private_client, 0)  # 4 nodes of 8 cpu: the gang of 8 x 2 cpu fits
    pods = create_gang(private_client)
    marker = tmp_path / "fault"
    victim = spawn(processes, "worker", *worker_args(), fault=fault("pop", marker))
    held = wait_marker(marker)["pods"]
    assert sorted(held) == sorted(pods)  # one pop took the whole gang
    assert held_by_ledger(private_client, pods) == set()
    spawn(processes, "worker", *worker_args())
    spawn(processes, "binder", *BINDER_ARGS)
    victim.kill()
    killed = time.monotonic()
    seen = wait_all_bound(private_client, pods)
    report_recovery("gang: worker SIGKILLed after pop", killed, seen, pods)
    assert_invariants(private_client, pods, history=bind_history)


def test_worker_killed_after_reserving_a_gang(
    private_client: redis.Redis,
    processes: ProcessGroup,
    tmp_path: Path,
    bind_history: BindHistory,
) -> None:
    create_cluster(private_client, 0)
    pods = create_gang(private_client)
    marker = tmp_path / "fault"
    victim = spawn(processes, "worker", *worker_args(), fault=fault("reserve", marker))
    held = wait_marker(marker)["pods"]
    # All members reserved in the one call, or none: never part of the gang.
    assert sorted(held) == sorted(pods)
    assert held_by_ledger(private_client, pods) == set(pods)
    spawn(processes, "worker", *worker_args())
    spawn(processes, "binder", *BINDER_ARGS)
    victim.kill()
    killed = time.monotonic()
    seen = wait_all_bound(private_client, pods)
    report_recovery("gang: worker SIGKILLed after reserve", killed, seen, pods)
    assert_invariants(private_client, pods, history=bind_history)
    assert cast(int, private_client.exists(KEYS.gang_held)) == 0
