"""Configurable fake plugins for framework tests."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from distsched.event_log import PodEvent, scheduled_message
from distsched.framework.cycle_state import CycleState
from distsched.framework.events import ClusterEvent
from distsched.framework.interface import (
    BindPlugin,
    FilterPlugin,
    FilterResult,
    Handle,
    PermitPlugin,
    PluginSpec,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ReservePlugin,
    ScorePlugin,
)
from distsched.framework.snapshot import Snapshot
from distsched.framework.status import PluginError, Status
from distsched.model.objects import Pod, PodRef
from distsched.store import BindResult, Store, StoreError
from distsched.store.writer import StoreWriter


class FakeFilter(PreFilterPlugin, FilterPlugin):
    """Rejects the nodes named in args["reject"] ({node: reason}); optional PreFilter outcome."""

    def __init__(self, args: dict[str, Any]) -> None:
        self.reject: dict[str, str] = args.get("reject", {})
        self.unresolvable: bool = args.get("unresolvable", False)
        self.pre_result: frozenset[str] | None = args.get("pre_result")
        self.pre_status: Status | None = args.get("pre_status")
        self.raise_error: bool = args.get("raise_error", False)
        self.seen: list[list[str]] = []

    def pre_filter(self, state, pod, snapshot):  # type: ignore[no-untyped-def]
        result = PreFilterResult(self.pre_result) if self.pre_result is not None else None
        return result, self.pre_status

    def filter(self, state, pod, snapshot: Snapshot, indices: np.ndarray) -> FilterResult:
        if self.raise_error:
            raise PluginError("boom")
        node_names = [snapshot.node_name(int(i)) for i in indices]
        self.seen.append(node_names)
        result = FilterResult()
        for reason in sorted(set(self.reject.values())):
            mask = np.array([self.reject.get(n) == reason for n in node_names], dtype=bool)
            result.add(reason, mask, unresolvable=self.unresolvable)
        return result


class FakeScore(PreScorePlugin, ScorePlugin):
    """Scores nodes from args["scores"] ({node: score}); optionally skipped or normalized x2."""

    def __init__(self, args: dict[str, Any]) -> None:
        self.scores: dict[str, int] = args.get("scores", {})
        self.skip: bool = args.get("skip", False)
        self.double: bool = args.get("double", False)

    def pre_score(self, state, pod, snapshot, indices):  # type: ignore[no-untyped-def]
        return Status.skip() if self.skip else None

    def score(self, state, pod, snapshot: Snapshot, indices: np.ndarray) -> np.ndarray:
        return np.array(
            [self.scores.get(snapshot.node_name(int(i)), 0) for i in indices], dtype=np.int64
        )

    def normalize_score(self, state, pod, scores: np.ndarray) -> np.ndarray:
        return scores * 2 if self.double else scores


class Recorder(ReservePlugin, PermitPlugin, BindPlugin):
    """Records calls into args["log"]; outcomes come from args."""

    def __init__(self, name: str, args: dict[str, Any]) -> None:
        self.label = name
        self.log: list[str] = args["log"]
        self.reserve_status: Status | None = args.get("reserve")
        self.permit_outcome: tuple[Status | None, float] = args.get("permit", (None, 0.0))
        self.bind_status: Status | None = args.get("bind")

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        self.log.append(f"reserve:{self.label}")
        return self.reserve_status

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        self.log.append(f"unreserve:{self.label}")

    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status | None, float]:
        self.log.append(f"permit:{self.label}")
        return self.permit_outcome

    def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        self.log.append(f"bind:{self.label}")
        return self.bind_status


def spec(
    name: str,
    factory: Callable[[dict[str, Any], Handle], Any],
    events: tuple[ClusterEvent, ...] | None = (),
) -> PluginSpec:
    return PluginSpec(name, factory, events)


def fake_registry(
    events: dict[str, tuple[ClusterEvent, ...] | None] | None = None,
) -> dict[str, PluginSpec]:
    events = events or {}
    registry = {
        "FilterA": spec("FilterA", lambda a, h: FakeFilter(a), events.get("FilterA", ())),
        "FilterB": spec("FilterB", lambda a, h: FakeFilter(a), events.get("FilterB", ())),
        "ScoreA": spec("ScoreA", lambda a, h: FakeScore(a)),
        "ScoreB": spec("ScoreB", lambda a, h: FakeScore(a)),
        "RecA": spec("RecA", lambda a, h: Recorder("A", a)),
        "RecB": spec("RecB", lambda a, h: Recorder("B", a)),
    }
    return registry


class RecordingWriter(StoreWriter):
    """The standalone ClusterWriter, keeping each write it was asked for in ``calls``
    (method, pod key, detail) and the events (which it does not store) in ``events``."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.calls: list[tuple[str, str, str]] = []
        self.events: list[tuple[str, str, str, str]] = []

    def bind_many(
        self,
        bindings: Sequence[tuple[str, str, str]],
        *,
        reservations: Mapping[str, str] | None = None,
        scheduled_by: Mapping[str, str] | None = None,
    ) -> list[BindResult]:
        self.calls += [("bind_many", key, node) for key, _uid, node in bindings]
        results = super().bind_many(bindings, reservations=reservations, scheduled_by=scheduled_by)
        if scheduled_by is not None:
            self.events += [
                (key, "Normal", "Scheduled", scheduled_message(key, node))
                for (key, _uid, node), result in zip(bindings, results, strict=True)
                if str(result) == "bound"
            ]
        return results

    def preempt_all(
        self, victims: Sequence[Pod], *, preemptor: Pod, node: str
    ) -> list[StoreError | None]:
        for victim in victims:
            self.calls.append(("preempt", victim.key, f"for {preemptor.key} on {node}"))
        return super().preempt_all(victims, preemptor=preemptor, node=node)

    def set_nominated_node(
        self,
        pod: PodRef,
        node: str,
        *,
        unschedulable: tuple[str, str] | None = None,
        seen: Mapping[str, object] | None = None,
    ) -> None:
        self.calls.append(("set_nominated_node", pod.key, node))
        if unschedulable is not None:
            self.calls.append(("pod_unschedulable", pod.key, unschedulable[0]))
        super().set_nominated_node(pod, node, unschedulable=unschedulable, seen=seen)

    def pod_unschedulable(self, pod: PodRef, *, reason: str, message: str) -> bool:
        self.calls.append(("pod_unschedulable", pod.key, reason))
        return super().pod_unschedulable(pod, reason=reason, message=message)

    def record_events(self, events: Sequence[PodEvent]) -> None:
        self.events += [(e.pod_key, e.event_type, e.reason, e.message) for e in events]
        super().record_events(events)
