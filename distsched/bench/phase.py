"""The measured phase of a bench run: create the measured pods (at once or at a fixed
rate), run the workload's churn, follow progress, and stop when every measured pod is
bound (or deleted, for a workload whose measured pods may be preempted; or the
workload's ``target``: GangContention expects half), when progress stalls,
or at the deadline.

Following progress must cost Redis little, since Redis CPU per pod is a result: every
0.25 s the number of bound pods comes from two O(1) reads of the ledger (records minus
assumed pods); the exact check (one HMGET of the still-pending pods' store meta) runs
when that estimate says done, and otherwise every 2 s (every tick for the workloads whose
pods leave the ledger: preemption) in case it is off. Without churn or preemption it waits
while the estimate climbs (ExactSchedule): counting then would only repeat it, and on
50,000 pods those counts read some 2.3 metas per pod, ~1 % of the Redis instructions a pod
costs (``python -m distsched.bench.redis_instructions``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import redis
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from distsched.bench.workloads import ZONES, Names, Obj, PodFactory, churn_pod, node
from distsched.keys import Keys
from distsched.output import err_console
from distsched.store import NotFound, Store, parse_meta

PROGRESS_INTERVAL_S = 0.25
EXACT_INTERVAL_S = 2.0
HMGET_CHUNK = 5000
CREATE_CHUNK = 1000


class BindTracker:
    """Which of a set of pods are bound, and the resourceVersion of each binding (a bound
    pod is never written again, so its meta rv is the bind's rv)."""

    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        pod_keys: Sequence[str],
        *,
        deleted_done: bool = False,
    ) -> None:
        self._client = client
        self._meta = keys.store_meta("Pod")
        self.pending: list[str] = list(pod_keys)
        self.bind_rv: dict[str, int] = {}
        # deleted_done: a pod gone from the store (preempted) is done, not pending.
        self.deleted_done = deleted_done
        self.deleted: list[str] = []
        self.calls = 0

    def poll(self) -> int:
        """Read the pending pods' meta; returns how many are bound now."""
        still: list[str] = []
        pipe = self._client.pipeline(transaction=False)
        chunks = [
            self.pending[i : i + HMGET_CHUNK] for i in range(0, len(self.pending), HMGET_CHUNK)
        ]
        for chunk in chunks:
            pipe.hmget(self._meta, chunk)
        self.calls += len(chunks)
        for chunk, raws in zip(chunks, pipe.execute(), strict=True):
            for key, raw in zip(chunk, raws, strict=True):
                meta = parse_meta(raw) if raw is not None else None
                if meta is not None and meta.node:
                    self.bind_rv[key] = int(meta.rv)
                elif raw is None and self.deleted_done:
                    self.deleted.append(key)
                else:
                    still.append(key)
        self.pending = still
        return len(self.bind_rv) + len(self.deleted)

    @property
    def bound(self) -> int:
        return len(self.bind_rv)


def create_chunked(store: Store, objs: Sequence[Obj], chunk: int = CREATE_CHUNK) -> list[Obj]:
    created: list[Obj] = []
    for i in range(0, len(objs), chunk):
        created += store.create_many(objs[i : i + chunk])
    return created


@dataclass
class Churn:
    """MixedChurn: every step recreates a node and an unschedulable high-priority pod, and
    deletes one bound init pod (scheduler_perf's churn op in "recreate" mode, plus pod
    deletions so that AssignedPodDelete events flow)."""

    store: Store
    names: Names
    init_keys: Sequence[str]
    step: int = 0
    deleted_init: list[str] = field(default_factory=list)

    def run_step(self) -> None:
        k = self.step
        self.store.create(node(self.names.churn_node(k), ZONES[k % len(ZONES)]))
        self.store.create(churn_pod(self.names, k))
        if k > 0:
            self.store.delete("Node", self.names.churn_node(k - 1))
            self.store.delete("Pod", f"{self.names.init_ns}/churn-{k - 1:06d}")
        if k < len(self.init_keys):
            try:
                self.store.delete("Pod", self.init_keys[k])
                self.deleted_init.append(self.init_keys[k])
            except NotFound:
                pass
        self.step += 1


@dataclass
class CreateChurn:
    """scheduler_perf's churn op in "create" mode: every step creates one more pod from
    the workload's template (PreemptionAsync: a high-priority pod that must preempt) and
    deletes nothing."""

    store: Store
    names: Names
    template: PodFactory
    step: int = 0
    created: list[str] = field(default_factory=list)  # the pods' keys
    deleted_init: list[str] = field(default_factory=list)  # none: the Churn interface

    def run_step(self) -> None:
        meta = self.store.create(self.template(self.names, self.step))["metadata"]
        self.created.append(f"{meta['namespace']}/{meta['name']}")
        self.step += 1


class ExactSchedule:
    """When the phase takes the exact count: once the ledger's estimate reaches the goal,
    and otherwise every ``interval_s``; but while the estimate climbs, with ``patient``,
    only after it has stood still for ``interval_s``, or ``BACKSTOP`` intervals since the
    last exact count (an estimate that moves all the time may still be off)."""

    BACKSTOP = 5

    def __init__(self, interval_s: float, now: float, *, patient: bool) -> None:
        self.interval_s = interval_s
        self.patient = patient
        self._counted = now
        self._next = now
        self._estimate: int | None = None

    def due(self, now: float, estimate: int, goal: int) -> bool:
        if self.patient and estimate != self._estimate:
            backstop = self._counted + self.BACKSTOP * self.interval_s
            self._next = min(max(self._next, now + self.interval_s), backstop)
            self._estimate = estimate
        return estimate >= goal or now >= self._next

    def counted(self, now: float) -> None:
        self._counted = now
        self._next = now + self.interval_s


@dataclass
class PhaseResult:
    start: float  # monotonic time the first measured pod was created
    end: float
    created_rv: dict[str, int]
    outcome: str  # "complete", "stalled", "timeout"
    after: object  # whatever the caller's checkpoint function returned at completion


@dataclass
class MeasuredPhase:
    client: redis.Redis
    keys: Keys
    store: Store
    pods: Sequence[Obj]
    pod_keys: Sequence[str]
    rate: float  # pods/s; 0 = all at once
    timeout_s: float
    stall_s: float
    checkpoint: Callable[[], object]
    check_alive: Callable[[], None]
    churn: Churn | CreateChurn | None = None
    churn_interval_s: float = 0.25
    baseline_bound: int = 0
    target: int | None = None  # measured pods bound that complete the phase (None: all)
    chunk: int = CREATE_CHUNK  # measured pods per store write
    # How often the exact count is taken once every pod is created. The ledger's running
    # estimate (bound records - the init pods) cannot reach the goal when pods leave the
    # ledger (preemption victims): such runs count exactly at every progress tick, or the
    # phase would end up to EXACT_INTERVAL_S after the last binding.
    exact_interval_s: float = EXACT_INTERVAL_S

    def _ledger_bound(self) -> int:
        pipe = self.client.pipeline(transaction=False)
        pipe.hlen(self.keys.ledger_pods)
        pipe.zcard(self.keys.ledger_assumed)
        records, assumed = pipe.execute()
        return int(records) - int(assumed)

    def run(self, tracker: BindTracker) -> PhaseResult:
        total = len(self.pods)
        created_rv: dict[str, int] = {}
        with Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            console=err_console,
            transient=False,
        ) as progress:
            bar = progress.add_task("bound", total=total, rate="")
            return self._loop(tracker, created_rv, progress, bar)

    def _create_due(self, created_rv: dict[str, int], start: float, now: float) -> None:
        done = len(created_rv)
        if self.rate > 0:
            due = min(len(self.pods), int((now - start) * self.rate) + 1) - done
        else:
            due = len(self.pods) - done
        due = min(due, self.chunk)
        if due <= 0:
            return
        created = self.store.create_many(self.pods[done : done + due])
        for key, obj in zip(self.pod_keys[done : done + due], created, strict=True):
            created_rv[key] = int(obj["metadata"]["resourceVersion"])

    def _loop(
        self, tracker: BindTracker, created_rv: dict[str, int], progress: Progress, bar: TaskID
    ) -> PhaseResult:
        total = len(self.pods)
        goal = total if self.target is None else self.target
        start = time.monotonic()
        next_progress = start
        # Churn moves the estimate both ways, and a run counted at every tick (preemption)
        # must end at its last binding: those keep the fixed interval.
        patient = self.churn is None and self.exact_interval_s > PROGRESS_INTERVAL_S
        exact = ExactSchedule(self.exact_interval_s, start, patient=patient)
        next_churn = start + self.churn_interval_s
        last_count, last_change = 0, start
        while True:
            now = time.monotonic()
            if len(created_rv) < total:
                self._create_due(created_rv, start, now)
            if self.churn is not None and now >= next_churn:
                self.churn.run_step()
                next_churn += self.churn_interval_s
            if now >= next_progress:
                self.check_alive()
                estimate = self._ledger_bound() - self.baseline_bound
                if self.churn is not None:
                    estimate += len(self.churn.deleted_init)
                estimate = max(tracker.bound, min(estimate, total))
                elapsed = max(now - start, 1e-6)
                progress.update(bar, completed=estimate, rate=f"{estimate / elapsed:,.0f}/s")
                next_progress = now + PROGRESS_INTERVAL_S
                if len(created_rv) == total and exact.due(now, estimate, goal):
                    after = self.checkpoint()
                    count = tracker.poll()
                    progress.update(bar, completed=count)
                    exact.counted(time.monotonic())
                    if count >= goal:
                        return PhaseResult(start, time.monotonic(), created_rv, "complete", after)
                    if count != last_count:
                        last_count, last_change = count, now
                    elif now - last_change > self.stall_s:
                        return PhaseResult(start, now, created_rv, "stalled", after)
                    if now - start > self.timeout_s:
                        return PhaseResult(start, now, created_rv, "timeout", after)
            pause = 0.002 if self.rate > 0 and len(created_rv) < total else 0.01
            time.sleep(pause)
