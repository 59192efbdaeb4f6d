"""An in-process cluster for the scheduling worker's semantics: real Redis, FakeClock.

The real :class:`~distsched.workers.schedule_one.SchedulingWorker` (informer, event handlers,
scheduleOne, preemption, the one failure path) and the real binding cycle
(:class:`~distsched.binder.cycle.Binder`) run in the test's process against the test's
Redis database. Binding jobs are taken off the real rq queue and run here, so a test
decides when binding happens. Periodic work (backoff flush, leftover flush) is run by the
test with the fake clock instead of the worker's wall-clock timer, so a timing assertion
never depends on how fast the machine is.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import redis

from distsched.binder.cycle import Binder, BindOutcome
from distsched.binder.jobs import Binding, bind_queue
from distsched.cache.ledger_types import Decision
from distsched.clock import FakeClock
from distsched.framework.cluster_writer import ClusterWriter
from distsched.framework.interface import PluginSpec
from distsched.framework.profile import SchedulerConfig, build_profiles, default_config
from distsched.framework.registry import IN_TREE_REGISTRY
from distsched.keys import Keys
from distsched.queue_types import QueueConfig, QueuedPod
from distsched.store import Store
from distsched.workers.maintenance import Periodic
from distsched.workers.schedule_one import SchedulingWorker, WorkerConfig

Obj = dict[str, Any]


class InProcessCluster:
    def __init__(
        self,
        r: redis.Redis,
        keys: Keys,
        clock: FakeClock,
        *,
        config: SchedulerConfig | None = None,
        registry: Mapping[str, PluginSpec] = IN_TREE_REGISTRY,
        batch: int = 64,
        queueing_hints: bool = True,
        lazy_pods: bool = True,
        leave_others_pods: bool = True,
        seed: int | None = None,
        worker_client: redis.Redis | None = None,
        writer: ClusterWriter | None = None,
        pop_from_backoff: bool = True,
    ) -> None:
        self.r, self.keys, self.clock = r, keys, clock
        self.queue_config = QueueConfig(pop_from_backoff=pop_from_backoff)
        self.config = config or default_config(registry)
        self.registry = registry
        self.batch = batch
        self.queueing_hints = queueing_hints
        self.lazy_pods = lazy_pods
        self.leave_others_pods = leave_others_pods
        # With a seed, every random choice of the workers (ties between nodes,
        # preemption's first candidate) repeats: worker i draws from seed + i.
        self.seed = seed
        self.writer = writer  # the roles' writes to the cluster (None: the store's)
        self.workers: list[SchedulingWorker] = []
        self.store = Store(r, keys, clock=clock)
        # The first worker may have a client of its own (a test that takes Redis away
        # from the worker alone); everything else here uses ``r``.
        self.worker = self.add_worker(worker_client)
        self.binder = Binder(
            r, keys, clock=clock, config=self.config, registry=registry, writer=writer
        )
        self.bind_queue = bind_queue(r, keys)
        self.queue = self.worker.queue

    def add_worker(self, client: redis.Redis | None = None) -> SchedulingWorker:
        """Another scheduling worker on the same Redis (started: initial list done)."""
        rng = None if self.seed is None else random.Random(self.seed + len(self.workers))
        profiles = build_profiles(self.config, registry=self.registry, rng=rng)
        if self.seed is not None:
            for fw in profiles.values():
                for plugin in fw.post_filter_plugins:  # DefaultPreemption draws its own
                    if isinstance(getattr(plugin, "rng", None), random.Random):
                        seed = 1_000_003 * self.seed + len(self.workers)
                        plugin.rng = random.Random(seed)  # type: ignore[attr-defined]
        worker = SchedulingWorker(
            client or self.r,
            self.keys,
            profiles=profiles,
            clock=self.clock,
            config=WorkerConfig(
                batch=self.batch,
                idle_wait_s=0.01,
                queueing_hints=self.queueing_hints,
                lazy_pods=self.lazy_pods,
                leave_others_pods=self.leave_others_pods,
                # Ties broken as kube breaks them (uniformly; seeded): a worker's share of
                # the nodes hangs on its random name and which workers are live.
                share_ties=False,
            ),
            scheduler_config=self.config,
            queue_config=self.queue_config,
            writer=self.writer,
        )
        # The test runs periodic work itself, on the fake clock (see flush()).
        worker.periodic = Periodic(self.r, self.keys)
        worker.start()
        self.workers.append(worker)
        return worker

    # -- the API server -------------------------------------------------------------------
    def create(self, *objs: Obj) -> None:
        for obj in objs:
            self.store.create(obj)

    def pod(self, name: str, namespace: str = "default") -> Obj:
        obj = self.store.get("Pod", f"{namespace}/{name}")
        assert obj is not None, f"pod {namespace}/{name} does not exist"
        return obj

    def node_of(self, name: str, namespace: str = "default") -> str:
        obj = self.store.get("Pod", f"{namespace}/{name}")
        return "" if obj is None else str((obj.get("spec") or {}).get("nodeName", ""))

    def where(self, name: str, namespace: str = "default") -> str | None:
        return self.queue.where(f"{namespace}/{name}")

    # -- the worker, a piece at a time ------------------------------------------------------
    def handle_events(self) -> None:
        """Informer (local snapshot) and queue event handlers, until both are caught up."""
        while self.worker.informer.poll_once(0):
            pass
        self.handle_queue_events()

    def handle_queue_events(self) -> None:
        """Only the queue side of the events (the snapshot keeps what it had)."""
        while self.worker.consumer.poll(None):
            pass

    def pop(self, n: int = 64) -> list[QueuedPod]:
        return self.queue.pop(n, now_ms=self.clock.now_ms())

    def pop_before_the_handlers(self, n: int = 64) -> list[QueuedPod]:
        """Pop as a worker whose informer has read every event does while its handlers
        have not acted on them yet: the unschedulable pods flushed as leftovers (the
        clock past their limit), the ledger's feed refreshed, then the pop."""
        while self.worker.informer.poll_once(0):
            pass
        self.clock.step(self.queue_config.unschedulable_max_ms + 1)
        self.flush()
        self.worker.view.refresh_from_ledger()
        return self.pop(n)

    def schedule(self, popped: list[QueuedPod]) -> None:
        self.worker.schedule_one_batch(popped)

    def turn(self) -> int:
        """One worker loop turn (events, ledger feed, pop, schedule); returns pods popped."""
        return self.worker.run_once()

    # -- the binder -------------------------------------------------------------------------
    def take_bindings(self) -> list[Binding]:
        """The bindings the worker enqueued since the last call, off the rq queue."""
        bindings: list[Binding] = []
        for job_id in self.bind_queue.get_job_ids():
            job = self.bind_queue.fetch_job(job_id)
            if job is None:
                continue
            _scheduler, wire = job.args
            bindings += [Binding.from_wire(item) for item in wire]
            self.bind_queue.remove(job_id)
            job.delete()
        return bindings

    def bind(self) -> BindOutcome:
        return self.binder.bind(self.take_bindings())

    def settle(self, turns: int = 10) -> None:
        """Worker turns and bindings until a turn pops nothing and nothing is left to bind."""
        for _ in range(turns):
            popped = self.turn()
            outcome = self.bind()
            if not popped and not (outcome.bound or outcome.failed):
                self.handle_events()
                return
        self.handle_events()

    # -- periodic work, on the fake clock -------------------------------------------------
    def flush(self) -> None:
        now = self.clock.now_ms()
        self.queue.flush_backoff_completed(now_ms=now)
        self.queue.flush_unschedulable_leftover(now_ms=now)

    def explain(self, name: str, namespace: str = "default") -> dict[str, Any]:
        raw = self.r.hget(self.keys.explain, f"{namespace}/{name}")
        return {} if raw is None else dict(json.loads(raw))


def decide_while_the_other_holds(
    first: SchedulingWorker,
    first_pop: list[QueuedPod],
    second: SchedulingWorker,
    second_pop: list[QueuedPod],
) -> tuple[bool, bool]:
    """Two workers deciding at once: ``first`` starts, its reservation held back until
    ``second`` had 0.5 s to reserve; returns whether ``second`` reserved meanwhile (a lock
    both need keeps it from doing so) and whether it reserved at all. Both batches are
    finished on return."""
    go = threading.Event()
    second_reserved = threading.Event()
    reserve_first, reserve_second = first.ledger.reserve_batch, second.ledger.reserve_batch

    def first_waits(decisions: Sequence[Decision], *, groups: Sequence[int] | None = None) -> Any:
        assert go.wait(10)
        return reserve_first(decisions, groups=groups)

    def second_notes(decisions: Sequence[Decision], *, groups: Sequence[int] | None = None) -> Any:
        second_reserved.set()
        return reserve_second(decisions, groups=groups)

    first.ledger.reserve_batch = first_waits  # type: ignore[method-assign]
    second.ledger.reserve_batch = second_notes  # type: ignore[method-assign]
    a = threading.Thread(target=first.schedule_one_batch, args=(first_pop,))
    b = threading.Thread(target=second.schedule_one_batch, args=(second_pop,))
    a.start()
    time.sleep(0.2)  # the first holds its locks, deciding
    b.start()
    reserved_meanwhile = second_reserved.wait(0.5)
    go.set()
    a.join(10)
    b.join(10)
    first.ledger.reserve_batch = reserve_first  # type: ignore[method-assign]
    second.ledger.reserve_batch = reserve_second  # type: ignore[method-assign]
    return reserved_meanwhile, second_reserved.is_set()
