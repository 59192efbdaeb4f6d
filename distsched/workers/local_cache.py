"""A scheduling worker's local picture of the cluster.

The informer feeds nodes and assigned pods into the numpy snapshot; pod objects are
parsed once per resourceVersion (a bind reuses the parse of the unbound pod); the
ledger's change feed keeps every node's requested resources, pod count, host ports and
scoring's non-zero requests equal to the ledger's absolute values (other workers' assumed
pods included), and pod lists are synced lazily, only for decisions that depend on other
pods.

Bound pods are not parsed when their event arrives: the snapshot holds them deferred
(``Snapshot.defer_pod``) and parses them when a reader needs the pods of their node
(preemption's victims) or of every node (a pod with pod affinity or topology spread
constraints: the PodIndex's label queries). A worker scheduling pods without inter-pod
rules thus never decodes the pods other workers bind. Pods declaring pod (anti-)affinity
are parsed at once, because every decision checks their terms (the InterPodAffinity
filter tests existing pods' anti-affinity against any incoming pod); they are told from
the undecoded blob (``ObjectRef.may_contain``), which almost never needs a decode.

The informer also feeds the listers plugins read through their Handle
(framework/listers.py): the nominator from pod events, the PodDisruptionBudgets and the
Namespace objects' labels. The worker hands in the Listers its profiles' Handle carries,
so each worker's plugins see what its own informer saw.

What a decision tells the ledger it saw (topology-domain and anti-affinity generations,
see :mod:`distsched.cache.ledger`) comes from here, by the ledger's rule: a single-node
domain's generation as read with the node's pod list, a multi-node domain's as read by
the last refresh, before the pod lists synced after it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import replace

import redis

from distsched.cache.ledger import DomainGenerations, Ledger
from distsched.cache.ledger_types import NodeState, UsageTail, parse_usage_record
from distsched.framework.listers import (
    DisruptionBudgets,
    Listers,
    NamespaceLabels,
    VolumeObjects,
)
from distsched.framework.snapshot import DeferredPod, Snapshot
from distsched.keys import Keys
from distsched.model import LABEL_HOSTNAME, Node, Pod
from distsched.model.decode import spec_with_node_name
from distsched.model.volumes import VOLUME_KINDS
from distsched.store import FuncHandler, Informer, ObjectRef, Store
from distsched.store.informer import MethodHandler

Obj = dict

log = logging.getLogger(__name__)

_POD_AFFINITY_KEYS = (b"podAffinity", b"podAntiAffinity")
_CLAIM_KEYS = (b"persistentVolumeClaim",)
# Either of the above in a blob: one scan tells that a bound pod may be deferred.
_PARSE_NOW = re.compile(b"|".join(re.escape(k) for k in (*_POD_AFFINITY_KEYS, *_CLAIM_KEYS)))


def _left_to_others(blob: bytes) -> bool:
    """Whether a pending pod may be left out of a worker's informer (``leave_pending``):
    one without pod affinity, anti-affinity or claims, which no other pod's decision
    needs to see while it is bound (the snapshot parses those at once)."""
    return _PARSE_NOW.search(blob) is None


def declares_pod_affinity(ref: ObjectRef) -> bool:
    """Whether the pod has ``spec.affinity.podAffinity`` or ``podAntiAffinity`` (what
    makes ``PodInfo.has_affinity`` true), looking at the raw blob first: without those
    names in its bytes it has neither, and nothing is decoded."""
    if not ref.may_contain(*_POD_AFFINITY_KEYS):
        return False
    affinity = (ref.source().get("spec") or {}).get("affinity") or {}
    return affinity.get("podAffinity") is not None or affinity.get("podAntiAffinity") is not None


def uses_claims(ref: ObjectRef) -> bool:
    """Whether the pod has a persistentVolumeClaim volume, told from the raw blob first
    (as :func:`declares_pod_affinity`)."""
    if not ref.may_contain(*_CLAIM_KEYS):
        return False
    volumes = (ref.source().get("spec") or {}).get("volumes") or ()
    return any(isinstance(v, dict) and v.get("persistentVolumeClaim") for v in volumes)


def _same_but_binding(old: Obj, new: Obj) -> bool:
    """Whether ``new`` is ``old`` plus a binding: same metadata but resourceVersion, same
    spec but nodeName (status may differ: the scheduler reads none of it but the
    nominated node, which a bind leaves alone)."""
    old_meta = {k: v for k, v in old.get("metadata", {}).items() if k != "resourceVersion"}
    new_meta = {k: v for k, v in new.get("metadata", {}).items() if k != "resourceVersion"}
    if old_meta != new_meta:
        return False
    new_spec = {k: v for k, v in new.get("spec", {}).items() if k != "nodeName"}
    old_status = old.get("status", {}).get("nominatedNodeName", "")
    new_status = new.get("status", {}).get("nominatedNodeName", "")
    return new_spec == old.get("spec", {}) and old_status == new_status


def namespace_handler(namespaces: NamespaceLabels) -> FuncHandler:
    """Namespace objects' labels into ``namespaces``, for namespaceSelector."""

    def labels_of(obj: Obj) -> tuple[str, dict[str, str]]:
        meta = obj.get("metadata") or {}
        return str(meta.get("name")), dict(meta.get("labels") or {})

    return FuncHandler(
        add=lambda obj, _initial: namespaces.set(*labels_of(obj)),
        update=lambda _old, new: namespaces.set(*labels_of(new)),
        delete=lambda obj, _unknown: namespaces.set(labels_of(obj)[0], None),
    )


def volume_handler(volumes: VolumeObjects, kind: str) -> FuncHandler:
    """One storage kind's objects into ``volumes``, for the volume plugins."""
    return FuncHandler(
        add=lambda obj, _initial: volumes.set(kind, obj),
        update=lambda _old, new: volumes.set(kind, new),
        delete=lambda obj, _unknown: volumes.delete(kind, obj),
    )


def budget_handler(budgets: DisruptionBudgets) -> FuncHandler:
    """PodDisruptionBudgets into ``budgets``, for DefaultPreemption."""
    return FuncHandler(
        add=lambda obj, _initial: budgets.set(obj),
        update=lambda _old, new: budgets.set(new),
        delete=lambda obj, _unknown: budgets.delete(obj),
    )


class ClusterView:
    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        *,
        store: Store,
        ledger: Ledger,
        listers: Listers,
        informer_client: redis.Redis | None = None,
        lazy_pods: bool = True,
        reader: str | None = None,
        leave_others_pods: bool = False,
    ) -> None:
        self.store = store
        self.ledger = ledger
        # False: parse every bound pod when its event arrives (the reference of the tests).
        self.lazy_pods = lazy_pods
        self.snapshot = Snapshot(capacity=1024, usage_from_ledger=True)
        # What the profiles' plugins read besides the snapshot (their Handle carries the
        # same object): this view's informer feeds it.
        self.listers = listers
        self.nominator = listers.nominator
        self.informer = Informer(
            informer_client or client,
            keys,
            # PodGroups: the resync gives the queue their minimums (the queue, not a
            # lister, holds them: eventhandlers keep them up to date).
            ("Pod", "Node", "Namespace", "PodDisruptionBudget", "PodGroup", *VOLUME_KINDS),
            reader=reader,
            clock=store.clock,
            leave_pending=_left_to_others if leave_others_pods and lazy_pods else None,
        )
        node_handler = FuncHandler(
            add=self._on_node_add, update=self._on_node_update, delete=self._on_node_delete
        )
        pod_handler = MethodHandler(
            self._on_pod_add, self._on_pod_update, self._on_pod_delete, self._on_pod_batch
        )
        self.informer.add_handler("Node", node_handler)
        # Lazy: most pod events are pending pods, which only the nominator may care about.
        self.informer.add_handler("Pod", pod_handler, lazy=True)
        self.informer.add_handler("Namespace", namespace_handler(listers.namespaces))
        self.informer.add_handler("PodDisruptionBudget", budget_handler(listers.budgets))
        for kind in VOLUME_KINDS:
            self.informer.add_handler(kind, volume_handler(listers.volumes, kind))
        self._parsed: dict[str, tuple[str, Obj, Pod]] = {}
        self.node_states: dict[str, NodeState] = {}
        # node -> (what it was computed from, domains, values by key): node_topology
        self._topology: dict[str, tuple[object, list[str], dict[str, str]]] = {}
        # node -> (generation, the rest of its usage record) as the ledger's feed last said
        self._usage: dict[str, tuple[int, UsageTail]] = {}
        # Nodes whose usage changed since their pod list was last synced.
        self._pods_dirty: set[str] = set()
        self._pods_generation: dict[str, int] = {}
        self.feed_version = 0
        # Generations of the multi-node domains as the last refresh read them, and the
        # snapshot label version whose domains they are.
        self.multi_node_generations = DomainGenerations({}, {})
        self._multi_node_domains: list[str] = []
        self._domains_label_version = -1

    def pod_from(self, obj: Obj) -> Pod:
        """The typed pod of a store object, parsed once per resourceVersion. A bind only
        sets spec.nodeName (and status), so a bound pod reuses its parsed unbound self."""
        meta = obj.get("metadata", {})
        key = f"{meta.get('namespace', 'default')}/{meta.get('name')}"
        rv = str(meta.get("resourceVersion", ""))
        cached = self._parsed.get(key)
        if cached is not None:
            cached_rv, cached_obj, cached_pod = cached
            # The rv alone is not enough: after Redis lost its data the store counts
            # resourceVersions from 0 again, and an old rv may name a new object.
            if cached_rv == rv and rv and (cached_obj is obj or cached_obj == obj):
                return cached_pod
            node = obj.get("spec", {}).get("nodeName", "")
            if node and not cached_pod.spec.node_name and _same_but_binding(cached_obj, obj):
                pod = Pod(
                    cached_pod.metadata,
                    spec_with_node_name(cached_pod.spec, node),
                    cached_pod.status,
                )
                self._parsed[key] = (rv, obj, pod)
                return pod
        pod = Pod.from_dict(obj)
        self._parsed[key] = (rv, obj, pod)
        return pod

    def pod(self, key: str) -> Pod | None:
        return self.pods([key])[key]

    def pods(self, keys: list[str]) -> dict[str, Pod | None]:
        """The typed pods of ``keys`` (None: no such pod)."""
        objs = self.pod_objects(keys)
        return {key: None if obj is None else self.pod_from(obj) for key, obj in objs.items()}

    def pod_objects(self, keys: list[str]) -> dict[str, Obj | None]:
        """The store objects of ``keys`` (None: no such pod). A pod the informer has not
        seen yet (the store's create script queues a pod at once, so a worker may pop it
        before its informer reads the event) is read from the store: all in one call; an
        informer that leaves pods out (:meth:`hold_every_pod`) holds it from then on."""
        objs: dict[str, Obj | None] = {key: self.informer.get("Pod", key) for key in keys}
        missing = [key for key, obj in objs.items() if obj is None]
        if missing:
            hold = None if self.informer.holds_every_pod else self.informer.hold
            for key, obj in zip(missing, self.store.get_many("Pod", missing), strict=True):
                objs[key] = obj
                if hold is not None and obj is not None:
                    hold(key, obj)
        return objs

    # ------------------------------------------------------------------ others' pods
    @property
    def holds_every_pod(self) -> bool:
        """False while the informer leaves out other workers' plain pods (pending ones
        without pod affinity, anti-affinity or claims, and their bindings): a decision
        that reads no pod list needs nothing of them, their usage comes from the ledger."""
        return self.informer.holds_every_pod

    def hold_every_pod(self, why: str) -> None:
        """From now on hold and follow every pod (a relist: the snapshot gets every bound
        pod): before a decision that may read other pods' lists."""
        if self.informer.holds_every_pod:
            return
        log.info("following every pod of the cluster from now on: %s", why)
        self.informer.hold_all()

    def nominate(self, pod: Pod, node: str) -> None:
        """Count ``pod`` as nominated to ``node`` now (its nominatedNodeName is in the
        store). The informer runs in the scheduling thread, between batches, so the
        pod's later events (bound, deleted, renominated) come after this and supersede it."""
        status = replace(pod.status, nominated_node_name=node)
        self.nominator.add(replace(pod, status=status))

    # ------------------------------------------------------------------ informer -> snapshot
    def _usable_node(self, obj: Obj) -> Node | None:
        """The typed node, or None (logged) when it is unusable: it does not parse, e.g.
        an allocatable amount beyond what the ledger can account in an object that
        reached the store without ``apply``. The snapshot then does not have it."""
        try:
            node = Node.from_dict(obj)
            self.snapshot.check_node(node)
        except ValueError as exc:
            name = (obj.get("metadata") or {}).get("name")
            log.warning("node %s is unusable: %s", name, exc)
            if isinstance(name, str) and self.snapshot.get_index(name) is not None:
                self._on_node_delete(obj, False)
            return None
        return node

    def _on_node_add(self, obj: Obj, _initial: bool) -> None:
        node = self._usable_node(obj)
        if node is not None:
            self._add_node(node)

    def _add_node(self, node: Node) -> None:
        index = self.snapshot.add_node(node)
        known = self._usage.get(node.metadata.name)
        if known is not None:
            usage = known[1]
            self.snapshot.set_usage(index, usage.requested, (), usage.nonzero_extra)
            self._pods_generation.pop(node.metadata.name, None)
            self._pods_dirty.add(node.metadata.name)

    def _on_node_update(self, _old: Obj, new: Obj) -> None:
        node = self._usable_node(new)
        if node is None:
            return
        if self.snapshot.get_index(node.metadata.name) is None:  # it was unusable
            self._add_node(node)
        else:
            self.snapshot.update_node(node)

    def _on_node_delete(self, obj: Obj, _unknown: bool) -> None:
        name = obj["metadata"]["name"]
        self.snapshot.remove_node(name)
        self.node_states.pop(name, None)
        self._topology.pop(name, None)
        self._pods_generation.pop(name, None)

    def _on_pod_add(self, ref: ObjectRef, _initial: bool) -> None:
        self._on_pod_batch([(None, ref)])

    def _on_pod_update(self, old: ObjectRef, new: ObjectRef) -> None:
        self._on_pod_batch([(old, new)])

    def _on_pod_batch(self, pairs: list[tuple[ObjectRef | None, ObjectRef]]) -> None:
        """Pods added or updated, in order (``previous``: the informer's copy before; all
        the pods of a batch entry of the stream come in one call). A pending pod is not
        decoded: it only leaves the nominator, unless nominated. A bound pod is deferred
        (:meth:`Snapshot.defer_pods`, one call for a run of them) unless it must be
        parsed at once, or is this worker's own assumed pod bound: parsed from that very
        copy and changed in nothing but its binding, it is in the snapshot already (kube's
        cache confirms an assumed pod)."""
        nominator = self.nominator if len(self.nominator) else None
        parsed, holds_as, load, deferrable, lazy = (
            self._parsed,
            self.snapshot.holds_as,
            self._load,
            self._deferrable,
            self.lazy_pods,
        )
        deferred: list[tuple[str, str, Callable[[], Pod | None]]] = []
        for previous, ref in pairs:
            try:
                key, node = ref.key, ref.node
                if not node:
                    if not ref.nominated:
                        if nominator is not None:
                            nominator.delete(key)
                        continue
                elif lazy:
                    if nominator is not None:
                        nominator.delete(key)
                    # Only this worker's own pods were parsed (another worker's binding
                    # is told by one lookup, before any method call).
                    cached = parsed.get(key)
                    if (
                        cached is not None
                        and previous is not None
                        and ref.is_binding_of(previous)
                        and cached[1] is previous.decoded_object
                        and holds_as(key, node, cached[2])
                    ):
                        continue
                    if deferrable(ref):
                        deferred.append((key, node, DeferredPod(load, ref)))
                        continue
                if deferred:  # in order: this pod may be one of them
                    self.snapshot.defer_pods(deferred)
                    deferred = []
                self._parse_pod(ref)
            except Exception:
                log.exception("pod event of %s failed", ref.key)
        if deferred:
            try:
                self.snapshot.defer_pods(deferred)
            except Exception:
                log.exception("bound pods %s... not placed", deferred[0][0])

    def _parse_pod(self, ref: ObjectRef) -> None:
        """A pod parsed at once: bound (eager views; a pod with pod affinity or claims,
        which the snapshot's indexes count as it is placed), or nominated."""
        node = ref.node
        if node:
            self.nominator.delete(ref.key)
            self.snapshot.add_pod(self.pod_from(ref.get()))
        elif ref.nominated:
            self.nominator.add(self.pod_from(ref.get()))
        else:
            self.nominator.delete(ref.key)

    @staticmethod
    def _deferrable(ref: ObjectRef) -> bool:
        blob = ref.blob()
        if blob is not None and _PARSE_NOW.search(blob) is None:
            return True  # the common case, told by one scan of the undecoded bytes
        return not declares_pod_affinity(ref) and not uses_claims(ref)

    def _load(self, ref: ObjectRef) -> Pod | None:
        """A deferred bound pod, parsed now (None, logged, if it does not parse: the
        handler of an eager view would have failed on it the same way)."""
        try:
            return self.pod_from(ref.get())
        except Exception:
            log.exception("cannot parse bound pod %s", ref.key)
            return None

    def _on_pod_delete(self, ref: ObjectRef, _unknown: bool) -> None:
        self.snapshot.remove_pod(ref.key)
        self.nominator.delete(ref.key)
        self._parsed.pop(ref.key, None)

    # ------------------------------------------------------------------ ledger → snapshot
    def refresh_from_ledger(self) -> int:
        """Mirror the ledger's absolute usage of every node that changed since the last
        refresh, and read the generations of the multi-node domains (before any pod list
        synced after). Pod lists follow lazily (:meth:`sync_pod_lists`): only decisions
        that depend on other pods need other workers' assumed pods."""
        version, records, generations = self.ledger.usage_records_since(
            self.feed_version, self.multi_node_domains()
        )
        self.multi_node_generations = generations
        with_ports = []
        indices: list[int] = []
        requested: list[dict[str, int]] = []
        extras: list[tuple[int, int]] = []
        seen, dirty, slot_of = self._pods_generation, self._pods_dirty, self.snapshot.get_index
        usage = self._usage
        for name, record in records.items():
            generation, parsed = parse_usage_record(record)
            usage[name] = (generation, parsed)
            if seen.get(name) != generation:
                dirty.add(name)
            index = slot_of(name)
            if index is None:
                continue
            if parsed.host_ports != 0:
                with_ports.append(name)
            else:
                indices.append(index)
                requested.append(parsed.requested)
                extras.append(parsed.nonzero_extra)
        self.snapshot.set_usages(indices, requested, extras)
        if with_ports:
            self.apply_states(self.ledger.node_state(with_ports))
        self.feed_version = version
        return len(records)

    def forget_ledger(self) -> None:
        """Redis lost its data: the ledger starts over (its feed version and node
        generations count from 0 again). Forget what was mirrored of the old one, so that
        the next refresh reads the whole feed, and count every node empty until the
        ledger says otherwise."""
        self.feed_version = 0
        self._parsed.clear()  # parsed per rv, and the rvs start over too
        self._usage.clear()
        self.node_states.clear()
        self._topology.clear()
        self._pods_generation.clear()
        self._pods_dirty.clear()
        self.multi_node_generations = DomainGenerations({}, {})
        indices = [int(i) for i in self.snapshot.node_indices()]
        self.snapshot.set_usages(indices, [{}] * len(indices), [(0, 0)] * len(indices))

    def multi_node_domains(self) -> list[str]:
        """Topology domains ("key=value") that two or more nodes of the snapshot share."""
        if self._domains_label_version != self.snapshot.label_version:
            self._multi_node_domains = sorted(
                f"{key}={value}"
                for key in self.snapshot.label_keys()
                for value, slots in self.snapshot.label_values(key).items()
                if len(slots) > 1
            )
            self._domains_label_version = self.snapshot.label_version
        return self._multi_node_domains

    def anti_affinity_in_multi_node_domains(self) -> bool:
        """Whether some pod with required anti-affinity over a multi-node domain (a zone)
        is assumed or bound somewhere: then every decision depends on other pods."""
        return any(self.multi_node_generations.anti_affinity.values())

    def node_domains(self, node: str) -> list[str]:
        """The node's topology domains as the ledger has them (its labels and hostname)."""
        return self.node_topology(node)[0]

    def node_topology(self, node: str) -> tuple[list[str], dict[str, str]]:
        """The node's domains ("key=value") and its topology values by key, as the
        ledger has them; kept until the node's ledger state or any node label changes
        (every decision asks)."""
        state = self.node_states.get(node)
        source: object = state if state is not None else self.snapshot.label_version
        cached = self._topology.get(node)
        if cached is not None and (cached[0] is source or cached[0] == source):
            return cached[1], cached[2]
        if state is not None:
            by_key = dict(state.domains)
        else:
            by_key = {LABEL_HOSTNAME: node, **self.snapshot.node_by_name(node).metadata.labels}
        domains = [f"{k}={v}" for k, v in by_key.items()]
        self._topology[node] = (source, domains, by_key)
        return domains, by_key

    def seen_generation(self, node: str, domain: str) -> int:
        """The generation of one of the node's domains that this view's data reflects."""
        multi = self.multi_node_generations.checks
        if domain in multi:
            return multi[domain]
        state = self.node_states.get(node)
        return state.domain_gens.get(domain, 0) if state is not None else 0

    def seen_anti_affinity_gen(self, node: str) -> int:
        """The sum of the anti-affinity generations of the node's domains that this view's
        data reflects (what every decision for the node carries)."""
        multi = self.multi_node_generations.anti_affinity
        state = self.node_states.get(node)
        own = state.anti_affinity_gens if state is not None else {}
        if not own and not any(multi.values()):
            return 0
        return sum(multi[d] if d in multi else own.get(d, 0) for d in self.node_domains(node))

    def sync_pod_lists(self) -> None:
        """Bring every node's pod list (assumed + bound, all workers) up to the ledger's."""
        stale = [
            name
            for name in self._pods_dirty
            if self._pods_generation.get(name) != self._usage[name][0]
            and self.snapshot.get_index(name) is not None
        ]
        self._pods_dirty.clear()
        for i in range(0, len(stale), 500):
            self.apply_states(self.ledger.node_state(stale[i : i + 500]))

    def apply_states(self, states: dict[str, NodeState]) -> None:
        for name, state in states.items():
            self.node_states[name] = state
            index = self.snapshot.get_index(name)
            if index is not None:
                self._apply_state(index, state)

    def _apply_state(self, index: int, state: NodeState) -> None:
        """Usage and pod list of one node as the ledger has them (assumed + bound)."""
        self._pods_generation[state.name] = state.generation
        self.snapshot.set_usage(index, dict(state.requested), state.ports, state.nonzero_extra)
        want = set(state.pods)
        have = set(self.snapshot.pods_on(index))
        for key in have - want:
            self.snapshot.remove_pod(key)
        for key in want - have:
            pod = self.pod(key)
            if pod is not None:
                self.snapshot.add_pod(pod, state.name)
