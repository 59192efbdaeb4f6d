"""The framework of one profile: its plugins per extension point and the code that runs them.

Plugin ordering and weights follow kube's frameworkImpl: plugins enabled explicitly at
an extension point and also listed under multiPoint keep their explicit position first,
then the multiPoint plugins implementing that point, then the remaining explicit ones.
A score weight set at the ``score`` point wins over the multiPoint one; 0 means 1.
"""

from __future__ import annotations

import functools
import logging
import random
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, cast

import numpy as np

from distsched import metrics
from distsched.framework.cycle_state import CycleState
from distsched.framework.diagnosis import Diagnosis, SchedulingError
from distsched.framework.events import WILDCARD_EVENT, ClusterEvent
from distsched.framework.interface import (
    MAX_NODE_SCORE,
    MAX_PERMIT_TIMEOUT_SECONDS,
    MIN_NODE_SCORE,
    BindPlugin,
    FilterPlugin,
    Handle,
    PermitPlugin,
    Plugin,
    PluginArgsError,
    PluginSpec,
    PostBindPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueueingHint,
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
    SignPlugin,
)
from distsched.framework.status import Code, PluginError, Status, is_success
from distsched.model.objects import Pod

if TYPE_CHECKING:
    from distsched.framework.podinfo import PodInfo
    from distsched.framework.snapshot import Snapshot

log = logging.getLogger(__name__)

P = TypeVar("P", bound=Plugin)
F = TypeVar("F", bound=Callable[..., Any])

_EMPTY_POSITIONS = np.zeros(0, dtype=np.int64)


@dataclass(frozen=True, slots=True)
class PluginRef:
    name: str
    weight: int = 0


@dataclass(slots=True)
class PluginSet:
    enabled: list[PluginRef] = field(default_factory=list)
    disabled: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Profile:
    """One resolved scheduling profile (what KubeSchedulerProfile holds after defaulting).

    ``plugins`` maps an extension point name ("multiPoint", "filter", "score", ...) to its
    plugin set; ``plugin_args`` maps a plugin name to the args its factory receives.
    """

    scheduler_name: str
    plugins: dict[str, PluginSet] = field(default_factory=dict)
    plugin_args: dict[str, dict] = field(default_factory=dict)
    percentage_of_nodes_to_score: int | None = None


@dataclass(slots=True)
class FilterVerdict:
    """One filter plugin's rejections, as positions into the evaluated candidates."""

    plugin: str
    failed: np.ndarray
    reasons: list[tuple[str, bool, np.ndarray]]  # (reason, unresolvable, positions)


@dataclass(slots=True)
class FilterOutcome:
    passed: np.ndarray  # ascending positions into the candidates that passed every filter
    verdicts: list[FilterVerdict]


class FrameworkError(ValueError):
    """The profile cannot be built (unknown plugin, double registration, bad args)."""


_STATUS_LABELS = {code: code.name.title().replace("_", "") for code in Code}
_histograms: dict[tuple[str, str, str], Any] = {}


def _status_label(result: object) -> str:
    """The Status code a run_* method returned (first Status of a tuple); Success if none."""
    if isinstance(result, Status):
        return _STATUS_LABELS[result.code]
    if isinstance(result, tuple):
        for item in result:
            if isinstance(item, Status):
                return _STATUS_LABELS[item.code]
    return "Success"


def _timed(point: str) -> Callable[[F], F]:
    """Record framework_extension_point_duration_seconds for one extension point."""

    def wrap(method: F) -> F:
        @functools.wraps(method)
        def timed(self: Framework, *args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            result = method(self, *args, **kwargs)
            key = (point, _status_label(result), self.profile_name)
            child = _histograms.get(key)
            if child is None:
                child = _histograms[key] = metrics.framework_extension_point_duration.labels(*key)
            child.observe(time.perf_counter() - start)
            return result

        return timed  # type: ignore[return-value]

    return wrap


class Framework:
    def __init__(
        self,
        profile: Profile,
        registry: Mapping[str, PluginSpec],
        *,
        handle: Handle | None = None,
        rng: random.Random | None = None,
        percentage_of_nodes_to_score: int | None = None,
    ) -> None:
        self.profile_name = profile.scheduler_name
        self.handle = handle if handle is not None else Handle()
        self.rng = rng if rng is not None else random.Random()
        # The profile's own setting wins over the global one; 0/None means adaptive.
        self.percentage_of_nodes_to_score = (
            profile.percentage_of_nodes_to_score
            if profile.percentage_of_nodes_to_score is not None
            else percentage_of_nodes_to_score
        )
        # Where the next Filter pass starts (kube's nextStartNodeIndex).
        self.next_start_node_index = 0

        self.plugins: dict[str, Plugin] = {}
        self._events: dict[str, tuple[ClusterEvent, ...] | None] = {}
        self._hints: dict[str, QueueingHint | None] = {}
        for name in _needed_plugins(profile):
            spec = registry.get(name)
            if spec is None:
                raise FrameworkError(f"plugin {name!r} is not registered")
            try:
                plugin = spec.factory(dict(profile.plugin_args.get(name, {})), self.handle)
            except PluginArgsError as exc:
                exc.plugin = name
                raise
            plugin.name = name
            self.plugins[name] = plugin
            self._events[name] = spec.events
            self._hints[name] = spec.hint

        self.pre_enqueue_plugins = self._expand(profile, "preEnqueue", PreEnqueuePlugin)
        queue_sort = self._expand(profile, "queueSort", QueueSortPlugin)
        if len(queue_sort) > 1:
            raise FrameworkError("only one queueSort plugin can be enabled")
        self.queue_sort_plugin: QueueSortPlugin | None = queue_sort[0] if queue_sort else None
        self.pre_filter_plugins = self._expand(profile, "preFilter", PreFilterPlugin)
        self.filter_plugins = self._expand(profile, "filter", FilterPlugin)
        self.post_filter_plugins = self._expand(profile, "postFilter", PostFilterPlugin)
        self.pre_score_plugins = self._expand(profile, "preScore", PreScorePlugin)
        weights = self._score_weights(profile)
        self.score_plugins: list[tuple[ScorePlugin, int]] = [
            (p, weights.get(p.name, 1)) for p in self._expand(profile, "score", ScorePlugin)
        ]
        self.reserve_plugins = self._expand(profile, "reserve", ReservePlugin)
        self.permit_plugins = self._expand(profile, "permit", PermitPlugin)
        self.pre_bind_plugins = self._expand(profile, "preBind", PreBindPlugin)
        self.bind_plugins = self._expand(profile, "bind", BindPlugin)
        self.post_bind_plugins = self._expand(profile, "postBind", PostBindPlugin)
        self._interest_cache: dict[ClusterEvent, frozenset[str]] = {}
        # The plugins a pod signature covers (kube's batchablePlugins), or None when one of
        # them cannot sign: then the profile signs no pod.
        self.signers: list[SignPlugin] | None = _signers(
            [
                *self.pre_filter_plugins,
                *self.filter_plugins,
                *self.pre_score_plugins,
                *(p for p, _ in self.score_plugins),
            ]
        )
        # Plugins that run the framework themselves (DefaultPreemption's dry runs).
        for plugin in self.plugins.values():
            attach = getattr(plugin, "attach_framework", None)
            if attach is not None:
                attach(self)

    # ------------------------------------------------------------------ construction
    def _expand(self, profile: Profile, point: str, iface: type[P]) -> list[P]:
        """The plugins of one extension point, in kube's order (see the module docstring)."""
        explicit = profile.plugins.get(point, PluginSet())
        explicit_names = _dedupe([ref.name for ref in explicit.enabled], point)
        for name in explicit_names:
            if not isinstance(self.plugins[name], iface):
                raise FrameworkError(f"plugin {name!r} does not extend {point}")
        disabled = set(explicit.disabled)
        ordered: list[str] = []
        if "*" not in disabled:
            multi = profile.plugins.get("multiPoint", PluginSet())
            overrides: set[str] = set()
            multi_enabled: list[str] = []
            for ref in multi.enabled:
                if not isinstance(self.plugins[ref.name], iface) or ref.name in disabled:
                    continue
                if ref.name in explicit_names:
                    overrides.add(ref.name)
                    continue
                if ref.name in multi_enabled:
                    raise FrameworkError(f"plugin {ref.name!r} already registered at {point}")
                multi_enabled.append(ref.name)
            ordered = [n for n in explicit_names if n in overrides] + multi_enabled
            ordered += [n for n in explicit_names if n not in overrides]
        else:
            ordered = explicit_names
        return [cast(P, self.plugins[name]) for name in ordered]

    def _score_weights(self, profile: Profile) -> dict[str, int]:
        weights: dict[str, int] = {}
        refs = [
            *profile.plugins.get("score", PluginSet()).enabled,
            *profile.plugins.get("multiPoint", PluginSet()).enabled,
        ]
        for ref in refs:
            if ref.name in weights or not isinstance(self.plugins[ref.name], ScorePlugin):
                continue
            weights[ref.name] = ref.weight or 1
        return weights

    # ------------------------------------------------------------------ queue
    @property
    def has_score_plugins(self) -> bool:
        return bool(self.score_plugins)

    def pre_enqueue_admits_object(self, obj: Mapping[str, Any]) -> bool:
        """Whether every PreEnqueue plugin admits the raw store object without the typed
        pod (:meth:`PreEnqueuePlugin.admits_object`); False: parse the pod and call
        :meth:`run_pre_enqueue_plugins`, which decides. A plugin whose check raises
        cannot tell."""
        for plugin in self.pre_enqueue_plugins:
            try:
                if not plugin.admits_object(obj):
                    return False
            except Exception:
                log.debug("%s: admits_object raised", plugin.name, exc_info=True)
                return False
        return True

    def run_pre_enqueue_plugins(self, pod: Pod) -> Status:
        for plugin in self.pre_enqueue_plugins:
            status = _call(plugin, plugin.pre_enqueue, pod)
            if is_success(status):
                continue
            assert status is not None
            if status.is_rejected():
                return status.with_plugin(plugin.name)
            return _wrap_error("PreEnqueue", plugin.name, status)
        return Status.success()

    def plugins_interested_in(self, event: ClusterEvent) -> frozenset[str]:
        """Names of the plugins whose registered events match ``event``.

        A pod rejected by one of these may become schedulable through ``event``; plugins
        that did not declare EVENTS are interested in everything.
        """
        cached = self._interest_cache.get(event)
        if cached is not None:
            return cached
        names = set()
        for name, registered in self._events.items():
            if registered is None:
                if WILDCARD_EVENT.matches(event):
                    names.add(name)
            elif any(r.matches(event) for r in registered):
                names.add(name)
        result = frozenset(names)
        self._interest_cache[event] = result
        return result

    def queueing_hint(
        self, plugin: str, event: ClusterEvent, pod: Pod, old: Any, new: Any
    ) -> bool | None:
        """The plugin's QueueingHint for ``event`` (None: it has none, use the seed's rule).
        A hint that raises counts as Queue, as in kube."""
        hint = self._hints.get(plugin)
        if hint is None:
            return None
        try:
            return hint(event, pod, old, new, self.handle)
        except Exception:
            log.exception("queueing hint of %s raised for %s; queueing it", plugin, pod.key)
            return True

    # ------------------------------------------------------------------ signing
    def sign_pod(self, pod: Pod, info: PodInfo, snapshot: Snapshot) -> tuple[Hashable, ...] | None:
        """kube's SignPod: the pod's signature for this profile, None when some plugin
        cannot sign it. Pods with equal signatures get the same PreFilter/PreScore results
        and the same verdict and raw score on every node whose state is unchanged (see
        ``SignPlugin``)."""
        signers = self.signers
        if signers is None:
            return None
        fragments: list[Hashable] = []
        for plugin in signers:
            try:
                fragment = plugin.sign_pod(pod, info, snapshot)
            except PluginError:
                log.debug("%s cannot sign %s", plugin.name, pod.key, exc_info=True)
                return None
            if fragment is None:
                return None
            fragments.append(fragment)
        return tuple(fragments)

    # ------------------------------------------------------------------ filtering
    @_timed("PreFilter")
    def run_pre_filter_plugins(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status, list[str]]:
        """(merged result, status, plugins that narrowed the node set).

        On a rejection the list holds the rejecting plugin; Skip statuses mark the plugin's
        Filter as skipped in ``state``.
        """
        result: PreFilterResult | None = None
        narrowing: list[str] = []
        skipped: set[str] = set()
        for plugin in self.pre_filter_plugins:
            outcome = _call(plugin, plugin.pre_filter, state, pod, snapshot)
            if isinstance(outcome, Status):  # an error converted by _call
                return None, outcome, []
            plugin_result, status = outcome
            if status is not None and status.code == Code.SKIP:
                skipped.add(plugin.name)
                continue
            if not is_success(status):
                assert status is not None
                if status.is_rejected():
                    return None, status.with_plugin(plugin.name), [plugin.name]
                return None, _wrap_error("PreFilter", plugin.name, status), []
            if plugin_result is not None and not plugin_result.all_nodes():
                narrowing.append(plugin.name)
            result = plugin_result if result is None else result.merge(plugin_result)
            if result is not None and result.node_names is not None and not result.node_names:
                if len(narrowing) == 1:
                    msg = f"node(s) didn't satisfy plugin {narrowing[0]}"
                else:
                    msg = f"node(s) didn't satisfy plugin(s) {go_list(narrowing)} simultaneously"
                return result, Status.unresolvable(msg), narrowing
        state.skip_filter_plugins = frozenset(skipped)
        return result, Status.success(), narrowing

    @_timed("Filter")
    def run_filter_plugins(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, candidates: np.ndarray
    ) -> FilterOutcome:
        """Run every (non-skipped) filter over ``candidates``; a node stops at the first
        plugin rejecting it, as in kube. Raises SchedulingError on a plugin error."""
        positions: np.ndarray | None = None  # None: all candidates still alive
        alive = candidates
        verdicts: list[FilterVerdict] = []
        skip = state.skip_filter_plugins
        for plugin in self.filter_plugins:
            if plugin.name in skip:
                continue
            try:
                result = plugin.filter(state, pod, snapshot, alive)
            except PluginError as exc:
                raise SchedulingError(
                    f"running {plugin.name!r} filter plugin: {exc}",
                ) from exc
            failures = result.failures
            if not failures:
                continue
            if positions is None:
                positions = np.arange(candidates.size, dtype=np.int64)
            failed = result.failed_mask(alive.size)
            verdicts.append(
                FilterVerdict(
                    plugin.name,
                    positions[failed],
                    [(f.reason, f.unresolvable, positions[f.mask]) for f in failures],
                )
            )
            keep = ~failed
            positions = positions[keep]
            alive = alive[keep]
            if alive.size == 0:
                break
        if positions is None:
            positions = np.arange(candidates.size, dtype=np.int64)
        return FilterOutcome(positions, verdicts)

    @_timed("PostFilter")
    def run_post_filter_plugins(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status]:
        result: PostFilterResult | None = None
        reasons: list[str] = []
        rejector = ""
        for plugin in self.post_filter_plugins:
            outcome = _call(plugin, plugin.post_filter, state, pod, snapshot, diagnosis)
            if isinstance(outcome, Status):
                return None, outcome
            plugin_result, status = outcome
            if is_success(status):
                return plugin_result, Status.success()
            assert status is not None
            if status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return plugin_result, status.with_plugin(plugin.name)
            if not status.is_rejected():
                return None, _wrap_error("PostFilter", plugin.name, status)
            if plugin_result is not None:
                result = plugin_result
            reasons.extend(status.reasons)
            rejector = rejector or plugin.name
        return result, Status(Code.UNSCHEDULABLE, *reasons, plugin=rejector)

    # ------------------------------------------------------------------ scoring
    @_timed("PreScore")
    def run_pre_score_plugins(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, indices: np.ndarray
    ) -> Status:
        skipped: set[str] = set()
        for plugin in self.pre_score_plugins:
            status = _call(plugin, plugin.pre_score, state, pod, snapshot, indices)
            if status is not None and status.code == Code.SKIP:
                skipped.add(plugin.name)
                continue
            if not is_success(status):
                assert status is not None
                return _wrap_error("PreScore", plugin.name, status)
        state.skip_score_plugins = frozenset(skipped)
        return Status.success()

    @_timed("Score")
    def run_score_plugins(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, indices: np.ndarray
    ) -> np.ndarray:
        """Weighted sum of the normalized scores, int64 aligned with ``indices``."""
        total = np.zeros(indices.size, dtype=np.int64)
        skip = state.skip_score_plugins
        for plugin, weight in self.score_plugins:
            if plugin.name in skip:
                continue
            try:
                scores = plugin.score(state, pod, snapshot, indices)
                scores = plugin.normalize_score(state, pod, scores)
            except PluginError as exc:
                raise SchedulingError(f"running Score plugin {plugin.name!r}: {exc}") from exc
            if not plugin.scores_in_range and (
                scores.size and (scores.max() > MAX_NODE_SCORE or scores.min() < MIN_NODE_SCORE)
            ):
                raise SchedulingError(
                    f"plugin {plugin.name!r} returns an invalid score, it should in the range "
                    f"of [{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing"
                )
            if weight == 1:
                total += scores
            else:
                total += scores * weight
        return total

    # ------------------------------------------------------------------ binding cycle
    @_timed("Reserve")
    def run_reserve_plugins_reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        for plugin in self.reserve_plugins:
            status = _call(plugin, plugin.reserve, state, pod, node_name)
            if is_success(status):
                continue
            assert status is not None
            if status.is_rejected():
                return status.with_plugin(plugin.name)
            return _wrap_error("Reserve", plugin.name, status)
        return Status.success()

    def run_reserve_plugins_unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        for plugin in reversed(self.reserve_plugins):
            plugin.unreserve(state, pod, node_name)

    @_timed("Permit")
    def run_permit_plugins(
        self, state: CycleState, pod: Pod, node_name: str
    ) -> tuple[Status, dict[str, float]]:
        """(status, plugin -> wait timeout seconds). Code.WAIT when some plugin asked to
        wait and none rejected."""
        waits: dict[str, float] = {}
        for plugin in self.permit_plugins:
            outcome = _call(plugin, plugin.permit, state, pod, node_name)
            if isinstance(outcome, Status):
                return outcome, {}
            status, timeout = outcome
            if is_success(status):
                continue
            if status.is_rejected():
                return status.with_plugin(plugin.name), {}
            if status.is_wait():
                waits[plugin.name] = min(timeout, MAX_PERMIT_TIMEOUT_SECONDS)
                continue
            return _wrap_error("Permit", plugin.name, status), {}
        if waits:
            name = pod.metadata.name
            msg = f"one or more plugins asked to wait and no plugin rejected pod {name!r}"
            return Status(Code.WAIT, msg), waits
        return Status.success(), {}

    @_timed("PreBind")
    def run_pre_bind_plugins(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        for plugin in self.pre_bind_plugins:
            status = _call(plugin, plugin.pre_bind, state, pod, node_name)
            if is_success(status):
                continue
            assert status is not None
            if status.is_rejected():
                return status.with_plugin(plugin.name)
            return _wrap_error("PreBind", plugin.name, status)
        return Status.success()

    @_timed("Bind")
    def run_bind_plugins(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """The first bind plugin not answering Skip binds; Skip when none is configured.
        A success keeps the plugin's reasons (DefaultBinder's "already-bound")."""
        status: Status | None = Status.skip()
        for plugin in self.bind_plugins:
            status = _call(plugin, plugin.bind, state, pod, node_name)
            if status is not None and status.is_skip():
                continue
            if is_success(status):
                if status is None or not status.reasons:
                    return Status.success()
                return status.with_plugin(plugin.name)
            assert status is not None
            if status.is_rejected():
                return status.with_plugin(plugin.name)
            return _wrap_error("Bind", plugin.name, status)
        return status if status is not None else Status.success()

    def batch_bindable(self, state: CycleState | None = None) -> bool:
        """Whether binding with one store call is exactly what this profile's binding cycle
        would do: DefaultBinder alone, no PostBind plugin, and no Reserve or PreBind plugin
        that needs this pod's binding cycle (then the binder binds a batch in one call,
        and the cycle's state need not travel). A plugin may say, for a pod's ``state``,
        that its binding cycle has nothing to do (``binding_needs_state``: kube's
        PreBindPreFlight returning Skip); without a state, it is assumed to."""
        if [p.name for p in self.bind_plugins] != ["DefaultBinder"] or self.post_bind_plugins:
            return False
        for plugin in (*self.pre_bind_plugins, *self.reserve_plugins):
            needs = getattr(plugin, "binding_needs_state", None)
            if needs is None or state is None or needs(state):
                return False
        return True

    @_timed("PostBind")
    def run_post_bind_plugins(self, state: CycleState, pod: Pod, node_name: str) -> None:
        for plugin in self.post_bind_plugins:
            plugin.post_bind(state, pod, node_name)

    # ------------------------------------------------------------------ algorithm
    def num_feasible_nodes_to_find(self, num_all_nodes: int) -> int:
        """How many feasible nodes Filter looks for before it stops (kube's adaptive rule)."""
        if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
            return num_all_nodes
        percentage = self.percentage_of_nodes_to_score or 0
        if percentage == 0:
            percentage = max(MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND, 50 - num_all_nodes // 125)
        num = num_all_nodes * percentage // 100
        return max(num, MIN_FEASIBLE_NODES_TO_FIND)


MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5


def go_list(names: list[str]) -> str:
    """Go's %v of a []string: ``[a b]``."""
    return "[" + " ".join(names) + "]"


def _needed_plugins(profile: Profile) -> list[str]:
    names: list[str] = []
    for plugin_set in profile.plugins.values():
        for ref in plugin_set.enabled:
            if ref.name not in names:
                names.append(ref.name)
    return names


def _signers(plugins: list[Plugin]) -> list[SignPlugin] | None:
    unique: list[SignPlugin] = []
    for plugin in plugins:
        if not isinstance(plugin, SignPlugin):
            return None
        if plugin not in unique:
            unique.append(plugin)
    return unique


def _dedupe(names: list[str], point: str) -> list[str]:
    seen: list[str] = []
    for name in names:
        if name in seen:
            raise FrameworkError(f"plugin {name!r} already registered at {point}")
        seen.append(name)
    return seen


def _call(plugin: Plugin, method, *args):  # type: ignore[no-untyped-def]
    try:
        return method(*args)
    except PluginError as exc:
        return Status.from_error(exc, plugin=plugin.name)


def _wrap_error(point: str, plugin: str, status: Status) -> Status:
    message = f"running {point} plugin {plugin!r}: {status.message()}"
    return Status(Code.ERROR, message, plugin=plugin, error=status.error)
