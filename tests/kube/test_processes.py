"""distsched scheduling a real kube-apiserver, as an operator runs it: `distsched kube-bridge`,
`worker --kubeconfig` and `binder --kubeconfig` processes on a private Redis; pods created
through the API server (as kubectl does); everything judged from the API server."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from distsched.acl import server_version, setuser_args
from distsched.bench.kube import check_from_api
from distsched.bench.procs import ProcessGroup
from distsched.cache.ledger import Ledger
from distsched.clock import SYSTEM_CLOCK
from distsched.embedded import EmbeddedRedis
from distsched.faults import MARKER_ENV, POINT_ENV, SECONDS_ENV
from distsched.keys import Keys
from distsched.kube.client import (
    EVENTS,
    NODES,
    PODS,
    PRIORITY_CLASSES,
    PVCS,
    STORAGE_CLASSES,
    ApiError,
    KubeClient,
)
from distsched.kube.testenv import TestEnv
from tests.kube.helpers import api_node, api_pod, clean, node_of
from tests.support.waits import wait_for

pytestmark = pytest.mark.kube


@pytest.fixture
def roles(
    apiserver: TestEnv, kube: KubeClient, tmp_path: Path
) -> Iterator[tuple[ProcessGroup, EmbeddedRedis]]:
    clean(kube)
    server = EmbeddedRedis(data_dir=tmp_path / "redis", appendfsync="no").start()
    group = ProcessGroup(server.url, log_dir=tmp_path)
    group.extra_env["DISTSCHED_KUBECONFIG"] = str(apiserver.kubeconfig)
    yield group, server
    group.stop()
    server.stop()


def start(group: ProcessGroup, *, binder_env: dict[str, str] | None = None) -> None:
    group.spawn("kube-bridge", "--lease-ms", "3000")
    group.spawn("worker")
    saved = dict(group.extra_env)
    group.extra_env.update(binder_env or {})
    try:
        group.spawn("binder")
    finally:
        group.extra_env.clear()
        group.extra_env.update(saved)


def role_logs(group: ProcessGroup, lines: int = 30) -> str:
    """The last lines of each role's log, for a wait that timed out."""
    assert group.log_dir is not None
    tails = []
    for log in sorted(group.log_dir.glob("*.log")):
        tail = log.read_text(errors="replace").splitlines()[-lines:]
        tails.append(f"--- {log.name}\n" + "\n".join(tail))
    return "\n".join(tails)


def bound(kube: KubeClient, names: list[str]) -> bool:
    pods, _ = kube.list(PODS, namespace="default")
    nodes = {p["metadata"]["name"]: (p.get("spec") or {}).get("nodeName") for p in pods}
    return all(nodes.get(n) for n in names)


def events_of(kube: KubeClient, reason: str) -> dict[str, dict]:
    items, _ = kube.list(EVENTS, namespace="default")
    return {e["regarding"]["name"]: e for e in items if e.get("reason") == reason}


def test_pods_created_through_the_api_are_bound_as_kube_scheduler_binds_them(
    kube: KubeClient, roles: tuple[ProcessGroup, EmbeddedRedis]
) -> None:
    group, _ = roles
    for i in range(4):
        kube.create(NODES, api_node(f"n{i}", cpu="4"))
    # Room another scheduler took: counted, never double-booked.
    kube.create(PODS, api_pod("theirs", cpu="3", node="n0"), "default")
    start(group)
    names = [f"p{i}" for i in range(24)]
    for name in names:
        kube.create(PODS, api_pod(name, cpu="500m"), "default")
    kube.create(PODS, api_pod("too-big", cpu="64"), "default")
    wait_for("24 pods bound through the API server", lambda: bound(kube, names), 60)
    assert check_from_api(kube, {"default"}) == []

    def all_scheduled() -> dict[str, dict] | None:
        found = events_of(kube, "Scheduled")
        return found if len(found) >= 24 else None

    scheduled = wait_for("Scheduled events", all_scheduled, 20)
    assert set(names) <= set(scheduled) and "theirs" not in scheduled
    assert scheduled["p0"]["reportingController"] == "default-scheduler"
    assert scheduled["p0"]["note"].startswith("Successfully assigned default/p0 to n")

    def unschedulable() -> dict | None:
        pod = kube.get(PODS, "too-big", "default")
        conditions = (pod.get("status") or {}).get("conditions") or []
        return next((c for c in conditions if c.get("type") == "PodScheduled"), None)

    condition = wait_for("too-big's PodScheduled=False", unschedulable, 30)
    assert condition["status"] == "False" and condition["reason"] == "Unschedulable"
    assert condition["message"].startswith("0/4 nodes are available:")
    assert "Insufficient cpu" in condition["message"]
    failed = wait_for("a FailedScheduling event", lambda: events_of(kube, "FailedScheduling"), 20)
    assert set(failed) == {"too-big"} and failed["too-big"]["type"] == "Warning"


def test_a_binding_conflict_releases_the_reservation(
    kube: KubeClient, roles: tuple[ProcessGroup, EmbeddedRedis], tmp_path: Path
) -> None:
    group, server = roles
    kube.create(NODES, api_node("a", cpu="2"))
    kube.create(NODES, api_node("b", cpu="2"))
    marker = tmp_path / "paused"
    pause = {POINT_ENV: "bind-claimed", MARKER_ENV: str(marker), SECONDS_ENV: "4"}
    start(group, binder_env=pause)
    pod = kube.create(PODS, api_pod("p", cpu="1500m"), "default")
    wait_for("the binder to pause with p claimed", marker.exists, 30)
    held = json.loads(marker.read_text())["pods"]
    assert held == ["default/p"]
    # Another scheduler binds p meanwhile, to the node our worker did not choose.
    ledger = Ledger(redis.Redis.from_url(server.url), Keys(), SYSTEM_CLOCK)
    ours = ledger.pod("default/p")
    assert ours is not None and ours.state == "assumed"
    other = "b" if ours.node == "a" else "a"
    kube.bind("default", "p", other, uid=pod["metadata"]["uid"])

    # Our binder wakes, gets 409 from the API server: the reservation goes, the ledger
    # ends up with p where the API server has it, nothing overcommitted.
    def moved() -> bool:
        record = ledger.pod("default/p")
        return record is not None and record.node == other and record.state == "bound"

    wait_for("the ledger to hold p on the other node", moved, 30)
    assert node_of(kube, "p") == other
    assert ledger.check_consistency() == []
    state = ledger.node_state([ours.node])[ours.node]
    assert state.requested.get("cpu", 0) == 0


def test_a_node_deleted_and_the_api_server_restarted_mid_run(
    kube: KubeClient, roles: tuple[ProcessGroup, EmbeddedRedis], apiserver: TestEnv
) -> None:
    group, _ = roles
    for i in range(3):
        kube.create(NODES, api_node(f"n{i}", cpu="8"))
    start(group)
    first = [f"a{i}" for i in range(12)]
    for name in first:
        kube.create(PODS, api_pod(name, cpu="1"), "default")
    wait_for("the first pods bound", lambda: bound(kube, first), 60)
    kube.delete(NODES, "n2")
    apiserver.restart_apiserver(down_s=2.0)
    later = [f"b{i}" for i in range(8)]
    for name in later:
        kube.create(PODS, api_pod(name, cpu="1"), "default")
    wait_for("the later pods bound after the restart", lambda: bound(kube, later), 90)
    pods, _ = kube.list(PODS, namespace="default")
    placed = {p["metadata"]["name"]: (p.get("spec") or {}).get("nodeName") for p in pods}
    assert all(placed[name] != "n2" for name in later)
    assert check_from_api(kube, {"default"}) == []


def test_redis_restarted_empty_while_the_api_server_keeps_the_truth(
    kube: KubeClient, roles: tuple[ProcessGroup, EmbeddedRedis]
) -> None:
    group, server = roles
    kube.create(NODES, api_node("n0", cpu="4"))
    start(group)
    first = [f"a{i}" for i in range(4)]
    for name in first:
        kube.create(PODS, api_pod(name, cpu="500m"), "default")
    wait_for("the first pods bound", lambda: bound(kube, first), 60)
    redis.Redis.from_url(server.url).flushall()
    # The bridge lists everything again; the bound pods' room is counted again: the node
    # (4 cpu) takes 4 more of these pods, and not one more.
    later = [f"b{i}" for i in range(4)]
    for name in later:
        kube.create(PODS, api_pod(name, cpu="500m"), "default")
    wait_for(
        "the later pods bound after the reset",
        lambda: bound(kube, later),
        90,
        context=lambda: role_logs(group),
    )
    kube.create(PODS, api_pod("no-room", cpu="500m"), "default")
    time.sleep(5)
    ledger = Ledger(redis.Redis.from_url(server.url), Keys(), SYSTEM_CLOCK)
    held = {key: ledger.pod(key) for key in [f"default/{n}" for n in first + later]}
    assert node_of(kube, "no-room") == "", f"the ledger after the reset: {held}"
    assert check_from_api(kube, {"default"}) == []


def test_up_with_a_kubeconfig_runs_the_bridge_workers_and_binders(
    kube: KubeClient, apiserver: TestEnv, tmp_path: Path
) -> None:
    import os
    import signal
    import subprocess
    import sys

    clean(kube)
    kube.create(NODES, api_node("n0"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("DISTSCHED_")}
    up = subprocess.Popen(
        [sys.executable, "-m", "distsched", "up", "--kubeconfig", str(apiserver.kubeconfig)],
        env={**env, "HOME": str(tmp_path)},
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "up.log", "wb"),  # noqa: SIM115
        start_new_session=True,
    )
    try:
        kube.create(PODS, api_pod("via-up"), "default")
        wait_for("via-up bound", lambda: bound(kube, ["via-up"]), 60)
    finally:
        up.send_signal(signal.SIGINT)
        assert up.wait(30) == 0, (tmp_path / "up.log").read_text()[-2000:]


def test_every_role_as_its_own_acl_user_schedules_a_real_cluster(
    kube: KubeClient, roles: tuple[ProcessGroup, EmbeddedRedis], tmp_path: Path
) -> None:
    """The bridge, a worker and a binder each log in as the least-privilege user
    `distsched acl` prints for this server: pods bound through the API server, a pod
    deleted, and not one ACL denial."""
    _, server = roles
    admin = redis.Redis.from_url(server.url)
    version = server_version(admin)
    urls = {}
    for role in ("kube-bridge", "worker", "binder"):
        admin.execute_command("ACL", "SETUSER", *setuser_args(role, "pw-" + role, version=version))
        urls[role] = f"redis://{role}:pw-{role}@{server.host}:{server.port}/0"
    admin.execute_command("ACL", "LOG", "RESET")
    kube.create(NODES, api_node("n0", cpu="4"))
    groups = []
    for role, url in urls.items():
        (tmp_path / role).mkdir()
        group = ProcessGroup(url, log_dir=tmp_path / role)
        group.extra_env["DISTSCHED_KUBECONFIG"] = roles[0].extra_env["DISTSCHED_KUBECONFIG"]
        groups.append(group)
        group.spawn(role)
    try:
        names = [f"acl{i}" for i in range(6)]
        for name in names:
            kube.create(PODS, api_pod(name, cpu="500m"), "default")
        wait_for("the pods bound", lambda: bound(kube, names), 60)
        kube.delete(PODS, "acl0", "default", grace_period_s=0)
        store_meta = Keys().store_meta("Pod")
        wait_for(
            "acl0 gone from the store", lambda: not admin.hexists(store_meta, "default/acl0"), 30
        )
        denials = [f"{e['username']}: {e['object']} ({e['reason']})" for e in admin.acl_log()]
        assert denials == [], denials
        assert check_from_api(kube, {"default"}) == []
    finally:
        for group in groups:
            group.stop()
        admin.close()


def test_a_wait_for_first_consumer_claim_gets_the_node_its_pod_is_bound_to(
    kube: KubeClient, roles: tuple[ProcessGroup, EmbeddedRedis]
) -> None:
    """VolumeBinding's PreBind through the API server: the claim of a WaitForFirstConsumer
    class gets ``volume.kubernetes.io/selected-node`` (what its provisioner waits for),
    naming the node the pod is then bound to; the class's allowedTopologies decide it."""
    group, _ = roles
    kube.create(NODES, api_node("n-a", cpu="4", **{"topology.kubernetes.io/zone": "a"}))
    kube.create(NODES, api_node("n-b", cpu="4", **{"topology.kubernetes.io/zone": "b"}))
    suffix = str(int(time.time() * 1000) % 10**8)
    kube.create(
        STORAGE_CLASSES,
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": f"zonal-{suffix}"},
            "provisioner": "ebs.csi.aws.com",
            "volumeBindingMode": "WaitForFirstConsumer",
            "allowedTopologies": [
                {"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone", "values": ["b"]}]}
            ],
        },
    )
    claim = f"data-{suffix}"
    kube.create(
        PVCS,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim},
            "spec": {
                "storageClassName": f"zonal-{suffix}",
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
        "default",
    )
    pod = api_pod("db")
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    start(group)
    kube.create(PODS, pod, "default")
    wait_for("db bound through the API server", lambda: node_of(kube, "db"), 60)
    assert node_of(kube, "db") == "n-b"
    annotations = kube.get(PVCS, claim, "default")["metadata"].get("annotations") or {}
    assert annotations.get("volume.kubernetes.io/selected-node") == "n-b"


def test_a_high_priority_pod_preempts_through_the_api_server(
    kube: KubeClient, roles: tuple[ProcessGroup, EmbeddedRedis]
) -> None:
    """kube's PreemptPod through the API: each victim gets DisruptionTarget, is deleted
    (uid precondition) and gets a Preempted event; the preemptor is nominated, then bound
    where its victims were."""
    group, _ = roles
    high = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": "distsched-test-high"}, "value": 10}  # fmt: skip
    with contextlib.suppress(ApiError):
        kube.create(PRIORITY_CLASSES, high)
    try:
        for i in range(2):
            kube.create(NODES, api_node(f"n{i}", cpu="2"))
        start(group)
        low = [f"low{i}" for i in range(4)]
        for name in low:
            pod = api_pod(name, cpu="900m")
            pod["spec"]["terminationGracePeriodSeconds"] = 0
            kube.create(PODS, pod, "default")
        wait_for("the low-priority pods bound", lambda: bound(kube, low), 60)
        vip = api_pod("vip", cpu="1500m")
        vip["spec"]["priorityClassName"] = "distsched-test-high"
        kube.create(PODS, vip, "default")
        wait_for("the preemptor bound", lambda: bound(kube, ["vip"]), 60)
        pods, _ = kube.list(PODS, namespace="default")
        left = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods}
        gone = sorted(set(low) - set(left))
        assert len(gone) == 2, left  # the two pods of one node, no more
        assert all(n != left["vip"] for name, n in left.items() if name != "vip")
        preempted = wait_for("Preempted events", lambda: events_of(kube, "Preempted"), 20)
        assert set(preempted) >= set(gone)
        assert check_from_api(kube, {"default"}) == []
    finally:
        with contextlib.suppress(ApiError):
            kube.delete(PRIORITY_CLASSES, "distsched-test-high")
