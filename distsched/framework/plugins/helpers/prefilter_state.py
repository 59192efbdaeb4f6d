"""PreFilterExtensions for plugins whose PreFilter state can take a pod in or out.

InterPodAffinity and PodTopologySpread keep counts in their PreFilter state; preemption's
dry runs and the nominated-pods filter pass add or remove pods on one node through
AddPod/RemovePod, which for both plugins means "update the counts with this pod".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from distsched.framework.cycle_state import CycleState
from distsched.framework.interface import PreFilterExtensions
from distsched.framework.podinfo import PodInfo
from distsched.framework.status import PluginError, Status
from distsched.model.objects import Pod

if TYPE_CHECKING:
    from distsched.framework.snapshot import Snapshot


class PodCountingState(Protocol):
    def update_with_pod(
        self, info: PodInfo, snapshot: Snapshot, node_index: int, sign: int
    ) -> None: ...


class CountingPreFilterExtensions:
    """Mixin: AddPod/RemovePod update the state stored under ``pre_filter_state_key``."""

    pre_filter_state_key: str

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self  # type: ignore[return-value]

    def add_pod(
        self,
        state: CycleState,
        pod: Pod,
        pod_info_to_add: PodInfo,
        node_index: int,
        snapshot: Snapshot,
    ) -> Status | None:
        return self._update(state, pod_info_to_add, node_index, snapshot, 1)

    def remove_pod(
        self,
        state: CycleState,
        pod: Pod,
        pod_info_to_remove: PodInfo,
        node_index: int,
        snapshot: Snapshot,
    ) -> Status | None:
        return self._update(state, pod_info_to_remove, node_index, snapshot, -1)

    def _update(
        self, state: CycleState, info: PodInfo, node_index: int, snapshot: Snapshot, sign: int
    ) -> Status | None:
        counts: PodCountingState | None = state.get(self.pre_filter_state_key)
        if counts is None:
            key = self.pre_filter_state_key
            return Status.from_error(PluginError(f"reading {key!r} from cycleState"))
        counts.update_with_pod(info, snapshot, node_index, sign)
        return None
