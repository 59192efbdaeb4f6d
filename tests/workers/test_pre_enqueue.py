"""Issue 11, item 5: the event handlers gate a pod with its profile's PreEnqueue plugins
(kube's runPreEnqueuePlugins), not with a check of spec.schedulingGates of their own
(in-process worker, real Redis, FakeClock)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import redis

from distsched.clock import FakeClock
from distsched.framework.interface import Handle, PluginSpec, PreEnqueuePlugin
from distsched.framework.profile import parse_config
from distsched.framework.status import Status
from distsched.keys import Keys
from distsched.model import Pod
from tests.e2e.cluster import node, pod
from tests.workers import plugins
from tests.workers.harness import InProcessCluster


class HoldLabelled(PreEnqueuePlugin):
    """An out-of-tree PreEnqueue plugin: pods labelled ``hold: "yes"`` wait."""

    name = "HoldLabelled"

    def pre_enqueue(self, pod: Pod) -> Status | None:
        if pod.metadata.labels.get("hold") == "yes":
            return Status.unresolvable("held by label")
        return None


def _hold(args: dict[str, Any], handle: Handle) -> HoldLabelled:
    return HoldLabelled()


REGISTRY: Mapping[str, PluginSpec] = {
    **plugins.REGISTRY,
    "HoldLabelled": PluginSpec("HoldLabelled", _hold, ()),
}

GATES = {"schedulingGates": [{"name": "example.com/wait"}]}


def test_an_out_of_tree_pre_enqueue_plugin_gates_pods(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    config = parse_config(
        """
profiles:
  - schedulerName: default-scheduler
    plugins:
      multiPoint:
        enabled: [{name: HoldLabelled}]
""",
        "test-config.yaml",
        REGISTRY,
    )
    cluster = InProcessCluster(r, keys, clock, config=config, registry=REGISTRY)
    cluster.create(
        node("n1"),
        pod("held", labels={"hold": "yes"}),
        pod("free"),
        pod("gated", **GATES),
    )
    cluster.handle_events()
    assert cluster.where("held") == "gated"
    assert cluster.where("free") == "active"
    assert cluster.where("gated") == "gated"  # SchedulingGates is still in the profile


def test_a_profile_without_scheduling_gates_does_not_gate(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    config = parse_config(
        """
profiles:
  - schedulerName: default-scheduler
    plugins:
      multiPoint:
        disabled: [{name: SchedulingGates}]
""",
        "test-config.yaml",
        REGISTRY,
    )
    cluster = InProcessCluster(r, keys, clock, config=config, registry=REGISTRY)
    cluster.create(node("n1"), pod("gated", **GATES))
    cluster.handle_events()
    assert cluster.where("gated") == "active"


def test_resync_gates_with_the_profile_too(r: redis.Redis, keys: Keys, clock: FakeClock) -> None:
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(node("n1"), pod("gated", **GATES), pod("free"))
    cluster.queue.delete(["default/gated", "default/free"], now_ms=clock.now_ms())
    while cluster.worker.informer.poll_once(0):
        pass
    assert cluster.worker.resync() == 2
    assert cluster.where("gated") == "gated"
    assert cluster.where("free") == "active"
