"""Periodic queue and cache maintenance, run by whichever worker holds a short lock.

kube-scheduler runs these as goroutines in its one active scheduler; here every worker
offers to run each task on its interval, and a ``SET NX PX`` lock per task makes one of
them do it per interval. Besides the queue's flushes and the reapers, the consistency
sweep (:class:`ConsistencySweep`) repairs whatever record a missed event left out of step
with the store, so that no future race can hold room or lose a pod for good.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import redis

from distsched import metrics
from distsched.cache.ledger import Ledger
from distsched.clock import Clock
from distsched.explain_record import forget_explanations_of_deleted_pods
from distsched.keys import Keys
from distsched.queue_redis import RedisQueue
from distsched.store import trim
from distsched.workers.eventhandlers import GROUP

log = logging.getLogger(__name__)


@dataclass
class Task:
    name: str
    interval_s: float
    run: Callable[[], object]
    next_at: float = field(default=0.0)


class Periodic:
    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self._client = client
        self._keys = keys
        self._token = uuid.uuid4().hex
        self._tasks: list[Task] = []

    def every(self, name: str, interval_s: float, run: Callable[[], object]) -> None:
        self._tasks.append(Task(name, interval_s, run))

    def tick(self) -> None:
        """Run every task that is due here and whose lock this worker wins."""
        now = time.monotonic()
        for task in self._tasks:
            if now < task.next_at:
                continue
            task.next_at = now + task.interval_s
            lock_ms = max(1, int(task.interval_s * 1000 * 0.9))
            if self._client.set(self._keys.lock(task.name), self._token, nx=True, px=lock_ms):
                try:
                    result = task.run()
                except redis.ConnectionError:
                    raise
                except Exception:
                    log.exception("periodic task %s failed", task.name)
                    continue
                if result:
                    log.debug("periodic %s: %s", task.name, result)


def trim_event_streams(client: redis.Redis, keys: Keys, now_ms: int) -> int:
    """Trim the store's event stream below its readers' positions and the queue handlers'
    stream below their consumer group's progress (:mod:`distsched.store.trim`)."""
    trimmed = trim.trim_store_events(client, keys, now_ms=now_ms)
    return trimmed + trim.trim_queue_events(client, keys, GROUP)


REPAIR_KINDS = {"orphan": "queue-orphan", "bound": "queue-bound", "lost": "queue-lost"}


class ConsistencySweep:
    """Finds and repairs the records that nothing should leave behind, each checked against
    the store inside the script that repairs it: ledger reservations (assumed or bound) of
    pods the store no longer has, queue records of deleted or bound pods, pods in no
    sub-queue, explain records and gang memberships of deleted pods. A record is repaired
    only when two sweeps in a row found it so, unchanged: what the handlers are about to
    do (a deletion just made) stays theirs, so every repair counted
    (``consistency_repairs_total{kind}``, logged) is a record that something really left
    behind."""

    def __init__(
        self, client: redis.Redis, keys: Keys, *, ledger: Ledger, queue: RedisQueue, clock: Clock
    ) -> None:
        self._client = client
        self._keys = keys
        self._ledger = ledger
        self._queue = queue
        self._clock = clock
        self._reservations: dict[str, str] = {}
        self._records: dict[str, str] = {}
        self._explanations: set[str] = set()
        self._gang_members: set[str] = set()

    def run(self) -> int:
        """One sweep; returns the number of records repaired."""
        found: dict[str, list[str]] = {}
        found["reservation"], self._reservations = self._ledger.release_orphans(self._reservations)
        repair = self._queue.repair(self._records, now_ms=self._clock.now_ms())
        self._records = repair.suspects
        for verdict, pods in repair.repaired.items():
            if verdict == "unreadable":
                log.warning(
                    "sweep: %d unreadable queue records, left as they are: %s",
                    len(pods),
                    pods[:5],
                )
                continue
            found[REPAIR_KINDS[verdict]] = pods
        found["explain"], self._explanations = forget_explanations_of_deleted_pods(
            self._client, self._keys, self._explanations
        )
        found["gang-member"], self._gang_members = self._queue.forget_gang_members_of_deleted_pods(
            self._gang_members
        )
        total = 0
        for kind, pods in found.items():
            if not pods:
                continue
            total += len(pods)
            metrics.consistency_repairs.labels(kind).inc(len(pods))
            # A leaked reservation or a lost pod is a bug; the others are also left by an
            # event handled late (an attempt that ended after its pod's deletion).
            level = logging.WARNING if kind in ("reservation", "queue-lost") else logging.INFO
            log.log(level, "sweep: repaired %d %s record(s): %s", len(pods), kind, pods[:5])
        return total
