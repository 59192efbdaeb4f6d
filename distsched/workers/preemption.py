"""Carrying out a PostFilter (preemption) decision: kube's prepareCandidate.

The plugin decides (distsched/framework/plugins/default_preemption.py); the worker acts through
its :class:`~distsched.framework.cluster_writer.ClusterWriter` (standalone: the store): it
records status.nominatedNodeName on the preemptor so that its next attempt tries that
node first and the other workers keep the room for it, preempts the victims (each
delete is an AssignedPodDelete event, which moves the preemptor back from the
unschedulable set) and clears lower-priority nominations on the node.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence

from distsched import metrics
from distsched.framework.cluster_writer import UNSCHEDULABLE, ClusterWriter
from distsched.framework.cycle_state import CycleState
from distsched.framework.diagnosis import FitError
from distsched.framework.plugins.default_preemption import PreemptionResult
from distsched.framework.runtime import Framework
from distsched.framework.snapshot import Snapshot
from distsched.model import Pod, PodRef
from distsched.store import StoreError

log = logging.getLogger(__name__)


def apply_post_filter(
    fw: Framework,
    state: CycleState,
    pod: Pod,
    err: FitError,
    *,
    snapshot: Snapshot,
    writer: ClusterWriter,
    seen: Mapping[str, object] | None = None,
) -> tuple[str, tuple[str, ...], tuple[str, str] | None]:
    """Run PostFilter for a pod that fits nowhere; returns the node the pod is now
    nominated to in the store ("" if none, or if recording the nomination failed), the
    keys of the victims preempted for it, and the PodScheduled=False (reason, message)
    written with the nomination (the failure handler's for ``err``)."""
    result, status = fw.run_post_filter_plugins(state, pod, snapshot, err.diagnosis)
    if result is None or not result.nominated_node_name:
        log.debug("no preemption for %s: %s", pod.key, status.message())
        if result is not None and pod.status.nominated_node_name:
            # kube: an empty result clears a nomination that no longer helps.
            with contextlib.suppress(StoreError):
                writer.set_nominated_node(PodRef(pod.key), "")
        return "", (), None
    node = result.nominated_node_name
    victims = result.victims if isinstance(result, PreemptionResult) else ()
    clear = result.clear_nominations if isinstance(result, PreemptionResult) else ()
    log.info("preempting %d pod(s) on %s for %s", len(victims), node, pod.key)
    said = (UNSCHEDULABLE, str(err))
    if not carry_out(writer, pod, node, victims, clear, unschedulable=said, seen=seen):
        return "", (), None
    return node, tuple(victim.key for victim in victims), said


def carry_out(
    writer: ClusterWriter,
    pod: Pod,
    node: str,
    victims: Sequence[Pod],
    clear: Sequence[Pod] = (),
    *,
    unschedulable: tuple[str, str] | None = None,
    seen: Mapping[str, object] | None = None,
) -> bool:
    """kube's prepareCandidate for one preemptor: nominate the preemptor to the node,
    delete the victims, clear the lower-priority nominations on the node. Returns
    whether the nomination was recorded (nothing is deleted when it was not). With
    ``unschedulable`` (reason, message) the pod's PodScheduled=False goes with the
    nomination (see ``ClusterWriter.set_nominated_node``, which may start from ``seen``,
    the pod's object as the worker popped it).

    The nomination is written before the deletions, where kube writes it after: kube
    records it first in its scheduler's memory, which every later decision reads. Here
    the other workers learn it from the store's stream, and a worker that saw the
    victims' room freed (the ledger, released as their deletions are handled) before
    the nomination would give that room to another pod, and the preemptor would have to
    preempt again elsewhere. In the stream the nomination now comes first."""
    try:
        writer.set_nominated_node(pod.ref(), node, unschedulable=unschedulable, seen=seen)
    except StoreError as exc:
        log.warning("cannot nominate %s for %s: %s", node, pod.key, exc)
        return False
    refusals = writer.preempt_all(victims, preemptor=pod, node=node)
    for victim, refused in zip(victims, refusals, strict=True):
        if refused is not None:
            log.warning("preemption of %s for %s failed: %s", victim.key, pod.key, refused)
    for other in clear:
        with contextlib.suppress(StoreError):
            writer.set_nominated_node(PodRef(other.key), "")
    metrics.preemption_victims.observe(len(victims))
    return True
