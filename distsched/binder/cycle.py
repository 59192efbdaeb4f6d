"""The binding cycle (kube's bindingCycle), run by a binder process for a batch of pods.

For each job: claim → WaitOnPermit → PreBind → Bind → PostBind → confirm.

- Claim: a binding is acted on only while the ledger still holds its reservation under the
  job's token, assumed (not yet bound). Bindings that go through plugins or wait on Permit
  are claimed first (:meth:`Ledger.claim`, one script: the assume deadline is pushed in the
  same step that checks it, so the reaper cannot release a reservation while its binding
  cycle runs). A job whose reservation is already bound under the same token is a
  duplicate (the same job run twice); one whose reservation is gone is stale (the reaper
  requeued the pod after its deadline, or the pod was deleted) and binds nothing: the pod
  belongs to a newer attempt. Bindings of a profile whose only binding plugin is
  DefaultBinder need no claim: the store's bind script makes the same check and the bind
  in one step.
- WaitOnPermit: Permit ran in the worker; a pod a plugin asked to wait is held here until
  every waiting plugin allowed it, a plugin rejected it or that plugin's own deadline
  passed (:mod:`distsched.framework.permit`); its reservation is renewed meanwhile. The
  job's other pods bind first: a waiting pod holds only itself.
- PreBind, Bind, PostBind: the profile's plugins, with the scheduling cycle's CycleState
  (its plain-data entries travel with the binding, see ``CycleState.to_wire``). A profile
  whose only binding plugin is DefaultBinder (the default) binds the whole batch with one
  store script call; the store bind is idempotent for the same node and refused for
  another node, a deleted pod or a uid mismatch. Other profiles run their plugins pod by pod.
- Confirm: the ledger turns the assumed pod into a bound one and the queue forgets it (in
  the store's bind script for batch binds, :meth:`Ledger.confirm_bound_many` otherwise).

Any failure goes through the failure handler both cycles share
(:mod:`distsched.framework.failure`): Unreserve, forget the assumed pod in the ledger,
requeue the pod (backoff), and move pods that the freed capacity may help. The binder's
writes to the cluster (bindings, events) go through a
:class:`~distsched.framework.cluster_writer.ClusterWriter`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis

from distsched import metrics
from distsched.binder.jobs import BIND_FUNCTION, Binding
from distsched.cache.ledger import Ledger, LedgerConfig
from distsched.clock import SYSTEM_CLOCK, Clock
from distsched.connection import infrastructure_error
from distsched.event_log import scheduled
from distsched.explain_record import forget_explanations
from distsched.faults import pause_at
from distsched.framework.cluster_writer import ClusterWriter
from distsched.framework.cycle_state import CycleState
from distsched.framework.failure import BINDING, Failure, FailureHandler
from distsched.framework.interface import Handle, PluginSpec
from distsched.framework.permit import wait_on_permit
from distsched.framework.plugins.default_binder import binding_answer
from distsched.framework.profile import SchedulerConfig, build_profiles, default_config
from distsched.framework.registry import IN_TREE_REGISTRY
from distsched.framework.status import PluginError
from distsched.keys import Keys
from distsched.kube.mode import KubeMode
from distsched.model import Pod, PodRef
from distsched.queue_redis import RedisQueue
from distsched.queue_types import backoff_config
from distsched.store import Store
from distsched.store.writer import StoreWriter

log = logging.getLogger(__name__)


@dataclass
class BindOutcome:
    bound: list[str] = field(default_factory=list)
    duplicate: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


class Binder:
    """Everything one binder process needs, built once per (connection, scheduler)."""

    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        *,
        clock: Clock = SYSTEM_CLOCK,
        config: SchedulerConfig | None = None,
        registry: Mapping[str, PluginSpec] = IN_TREE_REGISTRY,
        ledger_config: LedgerConfig | None = None,
        writer: ClusterWriter | None = None,
    ) -> None:
        self.client = client
        self.keys = keys
        self.clock = clock
        self.store = Store(client, keys, clock=clock)
        # Standalone, the store is the cluster; a bridge to an API server brings its own.
        self.writer: ClusterWriter = writer if writer is not None else StoreWriter(self.store)
        config = config or default_config(registry)
        queue_config = backoff_config(config)  # the one backoff, as the workers'
        self.ledger = Ledger(client, keys, clock, ledger_config, queue_config=queue_config)
        self.queue = RedisQueue(client, keys, config=queue_config)
        self.profiles = build_profiles(
            config,
            registry=registry,
            handle=Handle(bind_pod=self._bind_pod, bind_volumes=self._bind_volumes),
        )
        self.failures = FailureHandler(
            client, keys, self.queue, self.ledger, self.writer, self.profiles, clock
        )

    # ------------------------------------------------------------------ the cycle
    def bind(self, bindings: Sequence[Binding]) -> BindOutcome:
        started = time.perf_counter()
        outcome = BindOutcome()
        claimed = self.claim(bindings, outcome)
        pause_at("bind-claimed", [b.pod_key for b in claimed])
        # Pods no Permit plugin holds bind first: a waiting pod holds only itself (kube
        # runs each pod's binding cycle on its own goroutine), not the rest of the job.
        ready = [b for b in claimed if not b.permit_plugins]
        waiting = [b for b in claimed if b.permit_plugins]
        self._bind_claimed(ready, ready, outcome)
        if waiting:
            permitted = self._wait_on_permit(waiting, outcome)
            self._bind_claimed(permitted, waiting, outcome)
        self._observe(bindings, outcome, time.perf_counter() - started)
        return outcome

    def _bind_claimed(
        self, permitted: list[Binding], claimed: list[Binding], outcome: BindOutcome
    ) -> None:
        """PreBind → Bind → PostBind → confirm for ``permitted``; the failures among
        ``claimed`` (Permit's included) go through the one failure path."""
        batched = [b for b in permitted if self._batch_bindable(b)]
        by_plugins = [b for b in permitted if not self._batch_bindable(b)]
        stored: list[Binding] = []
        if batched:
            results = self.writer.bind_many(
                [(b.pod_key, b.uid, b.node) for b in batched],
                reservations={b.pod_key: b.token for b in batched},
                scheduled_by={b.pod_key: b.profile for b in batched},
            )
            for binding, result in zip(batched, results, strict=True):
                self._record(binding, str(result), outcome, stored)
        waited = [b for b in claimed if b.permit_plugins]
        pods = self._pods(by_plugins + waited) if by_plugins or waited else {}
        # The scheduling cycle's CycleState (its plain-data part) goes on into binding.
        states = {b.pod_key: CycleState.from_wire(b.state) for b in claimed}
        for binding in by_plugins:
            self._bind_with_plugins(binding, pods, states[binding.pod_key], outcome, stored)
        pause_at("bind-stored", [b.pod_key for b in stored])
        # The batch bind script confirmed its reservations itself; pods bound through bind
        # plugins still need the ledger's confirm (which also drops their queue info).
        plugin_keys = {b.pod_key for b in by_plugins}
        plugin_bound = [b for b in stored if b.pod_key in plugin_keys]
        if plugin_bound:
            pairs = [(b.pod_key, b.token) for b in plugin_bound]
            for binding, ok in zip(
                plugin_bound, self.ledger.confirm_bound_many(pairs), strict=True
            ):
                if not ok:  # only after a stall longer than the claim; the bind event adds it
                    log.warning("reservation of %s vanished before its confirm", binding.pod_key)
        forget_explanations(self.client, self.keys, [b.pod_key for b in stored])
        self._scheduled_events(plugin_bound, outcome)  # the batch's came with its binding
        failed = [b for b in claimed if b.pod_key in outcome.failed]
        if failed:
            self.failures.handle(
                [
                    Failure(
                        PodRef(b.pod_key, b.uid),
                        b.epoch,
                        b.profile,
                        f"binding to {b.node} failed: {outcome.failed[b.pod_key]}",
                        cycle=BINDING,
                        reserved_on=b.node,
                        token=b.token,
                        parsed=pods.get(b.pod_key),
                        state=states.get(b.pod_key),
                    )
                    for b in failed
                ]
            )
        for binding in by_plugins:
            pod = pods.get(binding.pod_key)
            fw = self.profiles.get(binding.profile)
            if pod is not None and fw is not None and binding.pod_key in outcome.bound:
                fw.run_post_bind_plugins(states[binding.pod_key], pod, binding.node)

    def _wait_on_permit(self, claimed: list[Binding], outcome: BindOutcome) -> list[Binding]:
        """WaitOnPermit: hold pods a Permit plugin asked to wait until every such plugin
        allowed them; a rejection or a plugin's own deadline fails them (outcome.failed)."""
        waiting: dict[str, tuple[Sequence[str], int | Mapping[str, int]]] = {
            b.pod_key: (b.permit_plugins, b.permit_deadlines()) for b in claimed if b.permit_plugins
        }
        if not waiting:
            return claimed

        verdicts = wait_on_permit(
            self.client, self.keys, waiting, self.clock, keep_alive=self.ledger.renew
        )
        for key, status in verdicts.items():
            if not status.is_success():
                outcome.failed[key] = f"permit: {status.message()}"
        return [b for b in claimed if b.pod_key not in outcome.failed]

    def claim(self, bindings: Sequence[Binding], outcome: BindOutcome) -> list[Binding]:
        """The bindings whose reservation is still assumed under their token, claimed (the
        assume deadline renewed) where the binding cycle needs time; the others go to
        ``outcome`` as duplicate or stale. A binding the store's bind script checks and
        performs in one step (DefaultBinder only, no Permit wait) is not claimed."""
        direct = [b for b in bindings if self._binds_in_one_step(b)]
        rest = [b for b in bindings if not self._binds_in_one_step(b)]
        if not rest:
            return direct
        claimed = set(direct)
        statuses = self.ledger.claim([(b.pod_key, b.token) for b in rest])
        for binding, status in zip(rest, statuses, strict=True):
            if status == "claimed":
                claimed.add(binding)
            elif status == "duplicate":
                outcome.duplicate.append(binding.pod_key)
            else:
                outcome.stale.append(binding.pod_key)
        return [b for b in bindings if b in claimed]

    def _batch_bindable(self, binding: Binding) -> bool:
        fw = self.profiles.get(binding.profile)
        # An unknown profile: the store write is all a binding can be.
        return fw is None or fw.batch_bindable(CycleState.from_wire(binding.state))

    def _binds_in_one_step(self, binding: Binding) -> bool:
        return (
            self.writer.checks_reservations
            and not binding.permit_plugins
            and self._batch_bindable(binding)
        )

    def _scheduled_events(self, stored: list[Binding], outcome: BindOutcome) -> None:
        """kube's "Scheduled" event for each pod this job bound."""
        bound = set(outcome.bound)
        self.writer.record_events(
            [
                scheduled(binding.pod_key, binding.uid, binding.node, binding.profile)
                for binding in stored
                if binding.pod_key in bound
            ]
        )

    def _record(
        self, binding: Binding, result: str, outcome: BindOutcome, stored: list[Binding]
    ) -> None:
        if result == "bound":
            outcome.bound.append(binding.pod_key)
        elif result == "already-bound":
            outcome.duplicate.append(binding.pod_key)
        elif result == "unreserved":
            # The reaper took the reservation while this binder stalled: the pod is back
            # in the queue under a new lease, and nothing was written.
            outcome.stale.append(binding.pod_key)
            return
        else:
            outcome.failed[binding.pod_key] = result
            return
        stored.append(binding)

    # ------------------------------------------------------------------ plugins
    def _pods(self, bindings: Sequence[Binding]) -> dict[str, Pod]:
        """The pods as the store has them now (a binding included: the blob alone may
        predate it)."""
        keys = [b.pod_key for b in bindings]
        objs = self.store.get_many("Pod", keys)
        return {k: Pod.from_dict(o) for k, o in zip(keys, objs, strict=True) if o is not None}

    def _bind_pod(self, pod: Pod, node: str) -> str:
        """DefaultBinder's bind function: the writer's bind ("bound" or "already-bound";
        raises when refused)."""
        return self.writer.bind(pod.ref(), node)

    def _bind_volumes(
        self, pod: Pod, node: str, static: list[tuple[str, str]], provision: list[str]
    ) -> None:
        """VolumeBinding's PreBind: the writer binds the PVs and marks the claims to
        provision (a refusal raises, and the binding fails)."""
        try:
            self.writer.bind_volumes(pod.ref(), node, static=static, provision=provision)
        except Exception as exc:
            if infrastructure_error(exc):
                raise
            raise PluginError(f"binding volumes of {pod.key} on {node}: {exc}") from exc

    def _bind_with_plugins(
        self,
        binding: Binding,
        pods: dict[str, Pod],
        state: CycleState,
        outcome: BindOutcome,
        stored: list[Binding],
    ) -> None:
        pod = pods.get(binding.pod_key)
        fw = self.profiles[binding.profile]
        if pod is None or pod.metadata.uid != binding.uid:
            outcome.failed[binding.pod_key] = "not-found"
            return
        status = fw.run_pre_bind_plugins(state, pod, binding.node)
        if status.is_success():
            status = fw.run_bind_plugins(state, pod, binding.node)
        if not status.is_success():
            outcome.failed[binding.pod_key] = status.message() or "no bind plugin bound the pod"
            return
        self._record(binding, binding_answer(status), outcome, stored)

    # ------------------------------------------------------------------ metrics
    def _observe(self, bindings: Sequence[Binding], outcome: BindOutcome, elapsed: float) -> None:
        now_ms = self.clock.now_ms()
        per_pod = elapsed / max(1, len(bindings))
        bound = set(outcome.bound)
        for binding in bindings:
            if binding.pod_key in outcome.failed:
                metrics.binding_duration.labels("failed").observe(per_pod)
                continue
            metrics.binding_duration.labels("bound").observe(per_pod)
            if binding.initial_attempt_ms and binding.pod_key in bound:
                sli = max(0.0, (now_ms - binding.initial_attempt_ms) / 1000)
                attempts = str(min(binding.attempts, 10))
                metrics.pod_scheduling_sli_duration.labels(attempts).observe(sli)
        metrics.bindings.labels("bound").inc(len(outcome.bound))
        metrics.bindings.labels("duplicate").inc(len(outcome.duplicate))
        metrics.bindings.labels("stale").inc(len(outcome.stale))
        metrics.bindings.labels("failed").inc(len(outcome.failed))
        if outcome.stale:
            log.info("%d stale bindings skipped: %s", len(outcome.stale), outcome.stale[:5])


# ---------------------------------------------------------------------- the rq job


@dataclass(frozen=True)
class BinderSettings:
    """Per-process settings of the job function (set once by the pool child)."""

    config: SchedulerConfig | None = None
    ledger_config: LedgerConfig | None = None
    kube: KubeMode | None = None  # a real cluster: bind through its API server


_settings = BinderSettings()
_binders: dict[tuple[int, str], Binder] = {}


def configure(settings: BinderSettings) -> None:
    global _settings
    _settings = settings
    _binders.clear()


def bind_batch(scheduler: str, wire_bindings: list[list[object]]) -> dict[str, int]:
    """The rq job function: bind a batch. Runs inside a binder process."""
    from rq import get_current_job

    job = get_current_job()
    if job is None:  # pragma: no cover - only rq calls this
        raise RuntimeError("bind_batch runs inside an rq job")
    cache_key = (id(job.connection), scheduler)
    binder = _binders.get(cache_key)
    if binder is None:
        keys = Keys(scheduler)
        writer = None
        if _settings.kube is not None:
            config = _settings.config or default_config()
            name = config.profiles[0].scheduler_name if config.profiles else "default-scheduler"
            writer = _settings.kube.writer(Store(job.connection, keys), scheduler_name=name)
        binder = _binders[cache_key] = Binder(
            job.connection,
            keys,
            config=_settings.config,
            ledger_config=_settings.ledger_config,
            writer=writer,
        )
    outcome = binder.bind([Binding.from_wire(item) for item in wire_bindings])
    return {
        "bound": len(outcome.bound),
        "duplicate": len(outcome.duplicate),
        "stale": len(outcome.stale),
        "failed": len(outcome.failed),
    }


JOB_FUNCTIONS: dict[str, Callable[..., Any]] = {BIND_FUNCTION: bind_batch}
"""The only functions a binder process runs (see :mod:`distsched.binder.safety`)."""
