"""Out-of-tree plugins for the worker tests: a recorder of the plugin lifecycle and
Permit gates with their own timeouts. Calls are recorded in :data:`CALLS`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from distsched.framework.cycle_state import CycleState
from distsched.framework.events import ClusterEvent
from distsched.framework.interface import (
    Handle,
    PermitPlugin,
    PluginSpec,
    PostBindPlugin,
    PreBindPlugin,
    QueueSortPlugin,
    ReservePlugin,
)
from distsched.framework.profile import SchedulerConfig, parse_config
from distsched.framework.registry import IN_TREE_REGISTRY
from distsched.framework.status import Code, Status
from distsched.model import Pod
from distsched.queue_types import QueuedPod

CALLS: list[tuple[str, str, Any]] = []
"""(what, pod key, detail) in call order; tests clear it first."""

STATE_KEY = "Recorder/reservation"
EVENTS: tuple[ClusterEvent, ...] = ()


class Recorder(ReservePlugin, PreBindPlugin, PostBindPlugin):
    """Reserve writes plain data into the CycleState; PreBind and PostBind read it back."""

    name = "Recorder"

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        reserves = sum(1 for what, key, _ in CALLS if what == "reserve" and key == pod.key)
        state.write(STATE_KEY, {"node": node_name, "nth": reserves + 1})
        CALLS.append(("reserve", pod.key, node_name))
        return None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        CALLS.append(("unreserve", pod.key, node_name))

    def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        CALLS.append(("prebind", pod.key, state.get(STATE_KEY)))
        return None

    def post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
        CALLS.append(("postbind", pod.key, state.get(STATE_KEY)))


class Gate(PermitPlugin):
    """Permit Wait, for pods labelled ``wait: "yes"``, with this gate's own timeout."""

    def __init__(self, name: str, timeout_s: float) -> None:
        self.name = name
        self.timeout_s = timeout_s

    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status | None, float]:
        if pod.metadata.labels.get("wait") != "yes":
            return None, 0.0
        return Status(Code.WAIT, f"{self.name} holds the pod"), self.timeout_s


def _recorder(args: dict[str, Any], handle: Handle) -> Recorder:
    return Recorder()


def _gate(name: str, timeout_s: float) -> Any:
    def new(args: dict[str, Any], handle: Handle) -> Gate:
        return Gate(name, timeout_s)

    return new


REGISTRY: Mapping[str, PluginSpec] = {
    **IN_TREE_REGISTRY,
    "Recorder": PluginSpec("Recorder", _recorder, EVENTS),
    "Gate2": PluginSpec("Gate2", _gate("Gate2", 2.0), EVENTS),
    "Gate10": PluginSpec("Gate10", _gate("Gate10", 10.0), EVENTS),
}


def config(
    *plugins: str, extra: str = "", registry: Mapping[str, PluginSpec] = REGISTRY
) -> SchedulerConfig:
    """A one-profile configuration with ``plugins`` enabled on every extension point."""
    enabled = "\n".join(f"          - name: {name}" for name in plugins)
    text = f"""
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
{extra}
profiles:
  - schedulerName: default-scheduler
    plugins:
      multiPoint:
        enabled:
{enabled}
"""
    return parse_config(text, "test-config.yaml", registry)


class FifoSort(QueueSortPlugin):
    """A queueSort plugin other than PrioritySort (which the Redis queue cannot honour)."""

    name = "FifoSort"

    def less(self, a: QueuedPod, b: QueuedPod) -> bool:
        return a.timestamp_ms < b.timestamp_ms


WITH_FIFO: Mapping[str, PluginSpec] = {
    **REGISTRY,
    "FifoSort": PluginSpec("FifoSort", lambda args, handle: FifoSort(), EVENTS),
}
