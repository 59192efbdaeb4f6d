"""Plugin interfaces: kube-scheduler's extension points, vectorized over nodes.

A plugin is a class deriving from the extension-point bases it implements; the framework
finds them with ``isinstance``. Filter, PreScore and Score take ``indices``, an int64
array of snapshot slots, and answer for all of them at once: a Filter returns a
``FilterResult`` whose masks are aligned with ``indices``, a Score an int64 array aligned
with ``indices``.

Every plugin module exposes ``NAME``, ``EVENTS`` (see events.py) and
``new(args: dict, handle: Handle) -> plugin``; ``registry.py`` lists them.

Plugins raise ``PluginError`` for internal failures; the framework turns that into a
Status with Code.ERROR naming the plugin.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from distsched.framework.cycle_state import CycleState
from distsched.framework.events import ClusterEvent
from distsched.framework.listers import Listers
from distsched.framework.status import Status
from distsched.model.objects import Pod

if TYPE_CHECKING:
    from distsched.framework.diagnosis import Diagnosis
    from distsched.framework.podinfo import PodInfo
    from distsched.framework.snapshot import Snapshot

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0
# Permit plugins may not ask a pod to wait longer than this (kube's maxTimeout).
MAX_PERMIT_TIMEOUT_SECONDS = 15 * 60.0


@dataclass(frozen=True, slots=True)
class Handle:
    """What a plugin factory gets besides its args: the worker's shared facilities."""

    snapshot: Snapshot | None = None
    # Writes the binding (pod -> node); returns "bound" or "already-bound", raises on failure.
    bind_pod: Callable[[Pod, str], str] | None = None
    # The cluster data plugins read besides the snapshot (kube's informer listers), the
    # same object for the Handle's whole life: a scheduling worker's informer feeds it.
    listers: Listers = field(default_factory=Listers)
    # Binds a pod's volumes for its node (the binder's, VolumeBinding's PreBind): (pod,
    # node, [(pv, claim name)] to bind, [claim name] to provision); raises when refused.
    bind_volumes: Callable[[Pod, str, list[tuple[str, str]], list[str]], None] | None = None


class QueueSortItem(Protocol):
    """What QueueSort compares: the pod and when it entered the queue."""

    @property
    def pod(self) -> Pod: ...

    @property
    def timestamp(self) -> float: ...


@dataclass(frozen=True, slots=True)
class PreFilterResult:
    """PreFilter may narrow the nodes worth filtering; ``None`` node_names means all nodes."""

    node_names: frozenset[str] | None = None

    def all_nodes(self) -> bool:
        return self.node_names is None

    def merge(self, other: PreFilterResult | None) -> PreFilterResult:
        if other is None or other.all_nodes():
            return self
        if self.all_nodes():
            return other
        assert self.node_names is not None and other.node_names is not None
        return PreFilterResult(self.node_names & other.node_names)


@dataclass(frozen=True, slots=True)
class PostFilterResult:
    nominated_node_name: str = ""


@dataclass(frozen=True, slots=True)
class Failure:
    """Candidates (``mask`` over the filter's ``indices``) rejected for one reason."""

    reason: str
    mask: np.ndarray
    unresolvable: bool = False


class FilterResult:
    """A Filter plugin's answer for all candidates: which fail and why.

    A candidate passes unless some failure's mask covers it. A candidate may carry several
    reasons from one plugin ("Insufficient cpu" and "Insufficient memory"); its code is
    UnschedulableAndUnresolvable when any of its failures is, else Unschedulable.
    """

    __slots__ = ("failures",)

    def __init__(self, failures: list[Failure] | None = None) -> None:
        self.failures: list[Failure] = failures if failures is not None else []

    @classmethod
    def all_pass(cls) -> FilterResult:
        return cls()

    @classmethod
    def of(cls, reason: str, mask: np.ndarray, *, unresolvable: bool = False) -> FilterResult:
        """One failure class; passes everything when ``mask`` selects nothing."""
        if not mask.any():
            return cls()
        return cls([Failure(reason, mask, unresolvable)])

    @classmethod
    def reject_all(cls, n: int, reason: str, *, unresolvable: bool = False) -> FilterResult:
        return cls([Failure(reason, np.ones(n, dtype=bool), unresolvable)])

    def add(self, reason: str, mask: np.ndarray, *, unresolvable: bool = False) -> None:
        if mask.any():
            self.failures.append(Failure(reason, mask, unresolvable))

    def failed_mask(self, n: int) -> np.ndarray:
        failures = self.failures
        if not failures:
            return np.zeros(n, dtype=bool)
        mask = failures[0].mask.copy()
        for failure in failures[1:]:
            mask |= failure.mask
        return mask

    def passed(self, n: int) -> np.ndarray:
        return ~self.failed_mask(n)


class Plugin:
    """Base of every plugin; ``name`` is the registry name (the module's NAME)."""

    name: str = ""


class SignPlugin(Plugin):
    """kube's SignPlugin: a PreFilter/Filter/PreScore/Score plugin that can say which facts
    of a pod its answers depend on, so that the framework may reuse them for equal pods
    (``framework/batching.py``). A pod is signed only when every such plugin of the
    profile signs it.

    ``sign_pod`` returns a hashable fragment, or None when it cannot sign this pod. By
    returning a fragment the plugin promises, for any two pods with equal fragments:

    - PreFilter and PreScore give the same result, status, Skip and CycleState writes
      (for PreScore: for any non-empty ``indices``), as long as the snapshot's resource
      columns are the same;
    - Filter's pass/fail and Score's raw (pre-NormalizeScore) score for node N are the
      same while node N's slot is untouched (``Snapshot.generation``);
    - NormalizeScore depends only on the scores it is given.

    Anything cluster-wide an answer depends on goes into the fragment (ImageLocality's
    image spread); a plugin whose answer for node N depends on other nodes' pods
    (inter-pod affinity, topology spread) returns None for the pods it constrains.
    """

    def sign_pod(self, pod: Pod, info: PodInfo, snapshot: Snapshot) -> Hashable | None:
        raise NotImplementedError


class PreEnqueuePlugin(Plugin):
    def pre_enqueue(self, pod: Pod) -> Status | None:
        raise NotImplementedError

    def admits_object(self, obj: Mapping[str, Any]) -> bool:
        """Optional fast path: True when ``pre_enqueue`` surely succeeds for the pod that
        the raw store object ``obj`` parses to (or when it does not parse: such a pod is
        not gated), told from the object alone. Every new or updated pending pod passes
        through PreEnqueue, and parsing it (validation, tens of µs) only to read one
        field was the worker's largest cost. False means "cannot tell": the framework
        parses the pod and calls ``pre_enqueue``. The default never tells; a plugin
        overrides it only with a check that never answers True for a pod it rejects."""
        return False


class QueueSortPlugin(Plugin):
    def less(self, a: QueueSortItem, b: QueueSortItem) -> bool:
        raise NotImplementedError


class PreFilterExtensions(Protocol):
    """Incremental updates of a plugin's PreFilter state when preemption simulates
    adding or removing pods on a node (``state`` is a clone)."""

    def add_pod(
        self,
        state: CycleState,
        pod: Pod,
        pod_info_to_add: PodInfo,
        node_index: int,
        snapshot: Snapshot,
    ) -> Status | None: ...

    def remove_pod(
        self,
        state: CycleState,
        pod: Pod,
        pod_info_to_remove: PodInfo,
        node_index: int,
        snapshot: Snapshot,
    ) -> Status | None: ...


class PreFilterPlugin(Plugin):
    def pre_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status | None]:
        """Status Skip means: this pod needs nothing from my Filter (it is not called)."""
        raise NotImplementedError

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None


class FilterPlugin(Plugin):
    # True when a node's verdict reads only that node (its labels, taints, resources,
    # ports and its own pods): pods added to or taken off other nodes cannot change it,
    # so what-if edits on many nodes may be judged in one run (framework/what_if.py).
    reads_only_its_node: bool = False
    # True when, besides, a node's pods matter to its verdict only through the node's free
    # resources (``snapshot.free``), never through which pods they are: a dry run may then
    # change the free resources alone instead of moving pods (DefaultPreemption).
    reads_only_its_node_usage: bool = False

    def filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, indices: np.ndarray
    ) -> FilterResult:
        raise NotImplementedError


class PostFilterPlugin(Plugin):
    def post_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, diagnosis: Diagnosis
    ) -> tuple[PostFilterResult | None, Status | None]:
        """Runs when no node fits (preemption). Success ends the PostFilter phase."""
        raise NotImplementedError


class PreScorePlugin(Plugin):
    def pre_score(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, indices: np.ndarray
    ) -> Status | None:
        """Status Skip means: my Score has nothing to add for this pod."""
        raise NotImplementedError


class ScorePlugin(Plugin):
    # True when the plugin's (normalized) scores lie in [0, 100] by construction; the
    # framework then skips its range check (an in-tree optimisation, kube checks always).
    scores_in_range: bool = False

    def score(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, indices: np.ndarray
    ) -> np.ndarray:
        """int64 scores aligned with ``indices``; after ``normalize_score`` they must lie
        in [MIN_NODE_SCORE, MAX_NODE_SCORE]."""
        raise NotImplementedError

    def normalize_score(self, state: CycleState, pod: Pod, scores: np.ndarray) -> np.ndarray:
        """kube's ScoreExtensions.NormalizeScore; the default leaves scores unchanged."""
        return scores


class ReservePlugin(Plugin):
    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        raise NotImplementedError

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        """Must be idempotent: it runs for every reserve plugin on any later failure."""
        raise NotImplementedError


class PermitPlugin(Plugin):
    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status | None, float]:
        """(status, timeout seconds); the timeout matters only with Code.WAIT."""
        raise NotImplementedError


class PreBindPlugin(Plugin):
    def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        raise NotImplementedError


class BindPlugin(Plugin):
    def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        """Status Skip hands the pod to the next bind plugin."""
        raise NotImplementedError


class PostBindPlugin(Plugin):
    def post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
        raise NotImplementedError


PluginFactory = Callable[[dict[str, Any], Handle], Plugin]


QueueingHint = Callable[[ClusterEvent, Pod, Any, Any, Handle], bool | None]
"""kube's QueueingHintFn: (event, the unschedulable pod, old object, new object, the
profile's Handle) -> True (Queue: the event may make the pod schedulable), False
(QueueSkip), or None (no hint for this event: the seed's behaviour, interest plus the
event handlers' pre-check). The objects are typed (Node / Pod); old is None for an add,
new is None for a delete. The Handle gives what kube's hint, a method of its plugin,
reads through the plugin: the listers."""


@dataclass(frozen=True, slots=True)
class PluginSpec:
    """A registry entry: a plugin module's NAME, ``new``, EVENTS and, where the plugin has
    one, its ``queueing_hint``."""

    name: str
    factory: PluginFactory
    events: tuple[ClusterEvent, ...] | None
    hint: QueueingHint | None = None


class PluginArgsError(ValueError):
    """Bad plugin args; ``field`` is the dotted path inside the args that is wrong."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message
        self.plugin = ""  # filled in by the framework that called the factory


# Extension point name (as in KubeSchedulerConfiguration) -> interface.
EXTENSION_POINTS: dict[str, type[Plugin]] = {
    "preEnqueue": PreEnqueuePlugin,
    "queueSort": QueueSortPlugin,
    "preFilter": PreFilterPlugin,
    "filter": FilterPlugin,
    "postFilter": PostFilterPlugin,
    "preScore": PreScorePlugin,
    "score": ScorePlugin,
    "reserve": ReservePlugin,
    "permit": PermitPlugin,
    "preBind": PreBindPlugin,
    "bind": BindPlugin,
    "postBind": PostBindPlugin,
}
