"""Periodic queue and cache maintenance, run by whichever worker holds a short lock.

kube-scheduler runs these as goroutines in its one active scheduler; here every worker
offers to run each task on its interval, and a ``SET NX PX`` lock per task makes one of
them do it per interval.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import redis

from distsched.keys import Keys

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
