"""DynamicResources, as far as distsched goes: a pod with ``spec.resourceClaims`` is not
scheduled (PreFilter: UnschedulableAndUnresolvable, so preemption does not try either).

kube's plugin allocates devices from ResourceSlices for the pod's ResourceClaims (or
checks they are allocated already) and places the pod where they are. distsched models
no claims, devices or slices; placing such a pod as if it had no claims would put it
where its devices are not, so it waits, and ``explain`` says why. Pods without claims
are skipped (the plugin's Filter is never needed).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from distsched.framework.cycle_state import CycleState
from distsched.framework.events import ClusterEvent
from distsched.framework.interface import (
    Handle,
    PreFilterPlugin,
    PreFilterResult,
    SignPlugin,
)
from distsched.framework.podinfo import PodInfo
from distsched.framework.snapshot import Snapshot
from distsched.framework.status import Status
from distsched.model.objects import Pod

NAME = "DynamicResources"
# Nothing a cluster event brings makes such a pod schedulable here (its claims are
# immutable): it is retried only by the unschedulable set's periodic flush.
EVENTS: tuple[ClusterEvent, ...] = ()


def not_modelled(claims: tuple[str, ...]) -> str:
    names = ", ".join(f'"{c}"' for c in claims)
    return (
        f"pod has resource claims ({names}): dynamic resource allocation is not modelled "
        "by distsched"
    )


class DynamicResources(PreFilterPlugin, SignPlugin):
    name = NAME

    def sign_pod(self, pod: Pod, info: PodInfo, snapshot: Snapshot) -> Hashable | None:
        return pod.spec.resource_claims

    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status | None]:
        claims = pod.spec.resource_claims
        if not claims:
            return None, Status.skip()
        return None, Status.unresolvable(not_modelled(claims))


def new(args: dict[str, Any], handle: Handle) -> DynamicResources:
    return DynamicResources()
