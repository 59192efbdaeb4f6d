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
from tests.support.objects import node, pod
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


# -- issue 14: PreEnqueue decides from the raw object when its plugins can -------------------


def count_parses(cluster: InProcessCluster) -> list[str]:
    """The keys of the pods the worker parses from now on."""
    parsed: list[str] = []
    view = cluster.worker.view
    real = view.pod_from

    def spy(obj: dict[str, Any]) -> Pod:
        parsed.append(f"{obj['metadata'].get('namespace', 'default')}/{obj['metadata']['name']}")
        return real(obj)

    view.pod_from = spy  # type: ignore[method-assign]
    return parsed


def test_pods_without_gates_are_queued_without_being_parsed(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    cluster = InProcessCluster(r, keys, clock)
    parsed = count_parses(cluster)
    # The store's create script queues the pod without gates (the profile gates only on
    # schedulingGates); the one with gates goes the handlers' typed way.
    cluster.create(node("n1"), pod("free"), pod("gated", **GATES))
    cluster.handle_events()
    assert (cluster.where("free"), cluster.where("gated")) == ("active", "gated")
    assert parsed == ["default/gated"]
    # Without the profile registered (say, no worker started yet), the handlers do both.
    r.delete(keys.profiles)
    cluster.create(pod("free-2"), pod("gated-2", **GATES))
    cluster.handle_events()
    assert cluster.where("free-2") == "active"
    assert cluster.where("gated-2") == "gated"  # a gated pod stays gated
    assert parsed == ["default/gated", "default/gated-2"]  # typed only for gated pods


def test_a_gated_pod_stays_gated_through_updates_until_its_gates_go(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(node("n1"), pod("gated", **GATES))
    cluster.handle_events()
    obj = cluster.pod("gated")
    obj["metadata"]["labels"] = {"touched": "yes"}
    cluster.store.update(obj)
    cluster.handle_events()
    assert cluster.where("gated") == "gated"
    obj = cluster.pod("gated")
    obj["spec"]["schedulingGates"] = []
    cluster.store.update(obj)
    cluster.handle_events()
    assert cluster.where("gated") == "active"
    cluster.settle()
    assert cluster.node_of("gated") == "n1"


def test_a_pod_whose_gates_do_not_parse_is_not_gated(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    """As before the fast path: a pod that does not parse is not gated (its attempt says
    why it cannot be scheduled); the raw check sends it the typed way, which fails."""
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(
        node("n1"),
        pod("dup", schedulingGates=[{"name": "a"}, {"name": "a"}]),
        pod("bad-name", schedulingGates=[{"name": "Not a name!"}]),
        pod("not-a-list", schedulingGates="a"),
    )
    cluster.handle_events()
    assert cluster.where("dup") == "active"
    assert cluster.where("bad-name") == "active"
    assert cluster.where("not-a-list") == "active"


def test_pods_of_one_template_are_scheduled_as_themselves(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    """The parsed-spec cache shares the spec, never the metadata: each binding carries
    its own pod's key and uid, and each pod its own labels in the snapshot."""
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(
        node("n1"), *(pod(f"web-{i}", labels={"app": "web", "i": str(i)}) for i in range(3))
    )
    cluster.handle_events()
    cluster.turn()
    bindings = cluster.take_bindings()
    uids = {f"default/web-{i}": cluster.pod(f"web-{i}")["metadata"]["uid"] for i in range(3)}
    assert {b.pod_key: b.uid for b in bindings} == uids
    specs = {id(cluster.worker.view.pod(k).spec) for k in uids}  # type: ignore[union-attr]
    assert len(specs) == 1
    for i in range(3):
        got = cluster.worker.view.pod(f"default/web-{i}")
        assert got is not None and got.metadata.labels == {"app": "web", "i": str(i)}
