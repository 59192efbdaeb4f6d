"""Issue 19: the worker and the binder end failures in the one failure handler, and every
write they make to the cluster goes through their ClusterWriter (the seam a bridge to a
real API server plugs into). In-process: real Redis, fake clock."""

from __future__ import annotations

from typing import Any

import redis

from distsched.bench.binder_pool import node_manifest, pod_manifest
from distsched.clock import FakeClock
from distsched.framework.cycle_state import CycleState
from distsched.framework.interface import PluginSpec, PreBindPlugin
from distsched.framework.status import Code, Status
from distsched.keys import Keys
from distsched.model import Pod
from distsched.store import Store
from tests.framework.fakes import RecordingWriter
from tests.workers.harness import InProcessCluster
from tests.workers.plugins import REGISTRY, config


class Refuser(PreBindPlugin):
    """PreBind refuses pods named "refused-*"."""

    name = "Refuser"

    def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        if pod.metadata.name.startswith("refused"):
            return Status(Code.UNSCHEDULABLE, "volume not ready")
        return None


WITH_REFUSER = {**REGISTRY, "Refuser": PluginSpec("Refuser", lambda _a, _h: Refuser(), ())}


def prioritized(name: str, cpu: str, priority: int, **spec: Any) -> dict[str, Any]:
    obj = pod_manifest(name, cpu=cpu)
    obj["spec"].update(priority=priority, **spec)
    return obj


def scheduled_condition(cluster: InProcessCluster, name: str) -> tuple[str, str, str]:
    status = cluster.pod(name).get("status") or {}
    (condition,) = [c for c in status.get("conditions", []) if c["type"] == "PodScheduled"]
    return condition["status"], condition.get("reason", ""), condition.get("message", "")


def test_both_cycles_fail_through_one_handler_and_write_through_the_writer(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    writer = RecordingWriter(Store(r, keys, clock=clock))
    cluster = InProcessCluster(
        r,
        keys,
        clock,
        config=config("Refuser", registry=WITH_REFUSER),
        registry=WITH_REFUSER,
        writer=writer,
    )
    cluster.create(node_manifest("n1", cpu="2"))
    cluster.handle_events()
    cluster.create(
        pod_manifest("big", cpu="64"), pod_manifest("refused-1"), pod_manifest("ok", cpu="1")
    )
    cluster.handle_events()
    cluster.turn()  # big fails in its scheduling cycle
    assert cluster.where("big") == "unschedulable"
    outcome = cluster.bind()  # refused-1 fails in its binding cycle
    assert outcome.bound == ["default/ok"] and list(outcome.failed) == ["default/refused-1"]
    no_fit = "0/1 nodes are available: 1 Insufficient cpu."
    assert scheduled_condition(cluster, "big") == ("False", "Unschedulable", no_fit)
    # The room refused-1 held may help big: the binding failure's move request.
    assert cluster.where("big") == "backoff"
    refused = "binding to n1 failed: volume not ready"
    assert scheduled_condition(cluster, "refused-1")[:2] == ("False", "SchedulerError")
    assert refused in scheduled_condition(cluster, "refused-1")[2]
    assert cluster.where("refused-1") == "backoff"
    assert scheduled_condition(cluster, "ok") == ("True", "", "")
    assert sorted((key, reason) for key, _type, reason, _msg in writer.events) == [
        ("default/big", "FailedScheduling"),
        ("default/ok", "Scheduled"),
        ("default/refused-1", "FailedScheduling"),
    ]
    assert ("pod_unschedulable", "default/big", "Unschedulable") in writer.calls
    assert ("pod_unschedulable", "default/refused-1", "SchedulerError") in writer.calls


def test_preemption_deletes_and_nominates_through_the_writer(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    writer = RecordingWriter(Store(r, keys, clock=clock))
    cluster = InProcessCluster(r, keys, clock, writer=writer)
    cluster.create(node_manifest("n1", cpu="2"), prioritized("victim", "2", 1, nodeName="n1"))
    cluster.handle_events()
    cluster.create(prioritized("urgent", "2", 1000))
    cluster.handle_events()
    cluster.turn()
    assert cluster.store.get("Pod", "default/victim") is None
    assert cluster.pod("urgent")["status"]["nominatedNodeName"] == "n1"
    # The nomination first: a worker that sees the victim's room free must already have
    # it in the stream before (distsched.workers.preemption.carry_out).
    assert [c for c in writer.calls if c[0] != "pod_unschedulable"] == [
        ("set_nominated_node", "default/urgent", "n1"),
        ("preempt", "default/victim", "for default/urgent on n1"),
    ]
    # Its PodScheduled=False went with the nomination (kube's one status update): the
    # failure handler does not write the pod again.
    assert writer.calls[:2] == [
        ("set_nominated_node", "default/urgent", "n1"),
        ("pod_unschedulable", "default/urgent", "Unschedulable"),
    ]
    assert writer.calls.count(("pod_unschedulable", "default/urgent", "Unschedulable")) == 1
    condition = next(
        c for c in cluster.pod("urgent")["status"]["conditions"] if c["type"] == "PodScheduled"
    )
    assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
