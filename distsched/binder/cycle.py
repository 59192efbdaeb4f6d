"""The binding cycle (kube's bindingCycle), run by a binder process for a batch of pods.

WaitOnPermit → PreBind → Bind (the store's bind script: idempotent for the same node,
refused for another node, a deleted pod or a uid mismatch) → PostBind → the ledger turns
the assumed pod into a bound one and the queue forgets it. Any failure goes through
:func:`handle_binding_failure`: Unreserve, forget the assumed pod in the ledger, requeue
the pod with backoff, and move pods that the freed capacity may help.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import redis

from distsched import metrics
from distsched.binder.jobs import BIND_FUNCTION, Binding
from distsched.binder.safety import allow
from distsched.cache.ledger import Ledger
from distsched.clock import SYSTEM_CLOCK, Clock
from distsched.framework.events import ASSIGNED_POD_DELETE
from distsched.framework.profile import build_profiles, default_config
from distsched.keys import Keys
from distsched.queue_redis import RedisQueue
from distsched.store import Store

log = logging.getLogger(__name__)


@dataclass
class BindOutcome:
    bound: list[str] = field(default_factory=list)
    duplicate: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


class Binder:
    """Everything one binder process needs, built once per (connection, scheduler)."""

    def __init__(self, client: redis.Redis, keys: Keys, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.client = client
        self.keys = keys
        self.clock = clock
        self.store = Store(client, keys, clock=clock)
        self.ledger = Ledger(client, keys, clock)
        self.queue = RedisQueue(client, keys)
        # Which unschedulable pods freed capacity may help (kube moves them on unreserve).
        profiles = build_profiles(default_config())
        self.interested_on_delete = frozenset().union(
            *(fw.plugins_interested_in(ASSIGNED_POD_DELETE) for fw in profiles.values())
        )

    def bind(self, bindings: Sequence[Binding]) -> BindOutcome:
        started = time.perf_counter()
        outcome = BindOutcome()
        results = self.store.bind_many([(b.pod_key, b.uid, b.node) for b in bindings])
        confirmed: list[Binding] = []
        for binding, result in zip(bindings, results, strict=True):
            if result == "bound":
                outcome.bound.append(binding.pod_key)
                confirmed.append(binding)
            elif result == "already-bound":
                outcome.duplicate.append(binding.pod_key)
                confirmed.append(binding)
            else:
                outcome.failed[binding.pod_key] = str(result)
        if confirmed:
            # Confirming also drops the pod's queue info: it has left the queue for good.
            self.ledger.confirm_bound_many([(b.pod_key, b.token) for b in confirmed])
            self.client.hdel(self.keys.explain, *(b.pod_key for b in confirmed))
        failed = [b for b in bindings if b.pod_key in outcome.failed]
        if failed:
            handle_binding_failure(self, failed, outcome.failed)
        elapsed = time.perf_counter() - started
        now_ms = self.clock.now_ms()
        per_pod = elapsed / max(1, len(bindings))
        for binding in bindings:
            if binding.pod_key in outcome.failed:
                metrics.binding_duration.labels("failed").observe(per_pod)
                continue
            metrics.binding_duration.labels("bound").observe(per_pod)
            if binding.initial_attempt_ms and binding.pod_key in outcome.bound:
                sli = max(0.0, (now_ms - binding.initial_attempt_ms) / 1000)
                attempts = str(min(binding.attempts, 10))
                metrics.pod_scheduling_sli_duration.labels(attempts).observe(sli)
        metrics.bindings.labels("bound").inc(len(outcome.bound))
        metrics.bindings.labels("duplicate").inc(len(outcome.duplicate))
        metrics.bindings.labels("failed").inc(len(outcome.failed))
        return outcome


def handle_binding_failure(binder: Binder, failed: Sequence[Binding], why: dict[str, str]) -> None:
    """The one failure path of the binding cycle: unreserve, forget, requeue with backoff."""
    now = binder.clock.now_ms()
    for binding in failed:
        binder.ledger.release(binding.pod_key, binding.token)
        where = binder.queue.add_unschedulable_if_not_present(
            binding.pod_key, epoch=binding.epoch, plugins=(), now_ms=now, error=True
        )
        log.warning(
            "binding %s to %s failed (%s); requeued: %s",
            binding.pod_key,
            binding.node,
            why[binding.pod_key],
            where,
        )
    # Freed capacity may help pods that wait for it (kube moves them on unreserve).
    binder.queue.move_all_to_active_or_backoff(
        ASSIGNED_POD_DELETE.label, now_ms=now, interested_plugins=binder.interested_on_delete
    )


_binders: dict[tuple[int, str], Binder] = {}


@allow(BIND_FUNCTION)
def bind_batch(scheduler: str, wire_bindings: list[list[object]]) -> dict[str, int]:
    """The rq job function: bind a batch. Runs inside a binder process."""
    from rq import get_current_job

    job = get_current_job()
    if job is None:  # pragma: no cover - only rq calls this
        raise RuntimeError("bind_batch runs inside an rq job")
    cache_key = (id(job.connection), scheduler)
    binder = _binders.get(cache_key)
    if binder is None:
        binder = _binders[cache_key] = Binder(job.connection, Keys(scheduler))
    bindings = [Binding.from_wire(item) for item in wire_bindings]
    outcome = binder.bind(bindings)
    return {
        "bound": len(outcome.bound),
        "duplicate": len(outcome.duplicate),
        "failed": len(outcome.failed),
    }
