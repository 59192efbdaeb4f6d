"""An independent invariant checker: reads the store, the queue and the ledger and lists
every broken invariant (an empty list means all hold).

It decodes objects with :mod:`distsched.model` and evaluates every rule with the helpers
of :mod:`distsched.bench.selectors`, never with the scheduler's plugins. Run it on a
drained system (no pod in flight); what it checks:

* no node over its allocatable (each resource the node's pods request, pods included);
* no host port (protocol, port, overlapping IP) taken twice on a node;
* nodeSelector and required node affinity, NoSchedule/NoExecute taints tolerated;
* required pod anti-affinity: no two bound pods where one's term selects the other and
  their nodes share the term's topology value (both directions are checked);
* required pod affinity: each term selects some pod in the pod's domain; the pod itself
  counts (this accepts kube's "first pod of a group" case without looking for it);
* DoNotSchedule topology spread, approximated on the final state: for each group of pods
  sharing a namespace, constraint and node filter, the matching pods counted per domain
  of the eligible nodes must differ by at most maxSkew. kube checks each placement
  instead; the two agree as long as no matching pod was deleted and every matching pod
  carried the constraint (true for the bench workloads);
* a pod bound at most once (bind events in the event stream, per uid);
* every pod in ``expect_bound`` bound;
* gangs: no PodGroup has some but fewer than its minimum of members bound or reserved (a
  record in the ledger), unless a member bound before (the event stream shows it) was
  lost since: deleted, or replaced by a pod of the same name;
* volumes: no ReadWriteOncePod claim used by two bound pods; a bound pod's claims' PVs
  in the pod's node's zone and region (VolumeZone's labels) and admitting the node
  (the PV's node affinity); per node, no more CSI volumes of a driver than its CSINode
  allows (claims bound to CSI PVs, counted once per volume handle);
* the ledger consistent with itself (``Ledger.check_consistency``) and with the store's
  bound pods; nothing left inflight or assumed; every pending default-scheduler pod in
  exactly one sub-queue and no bound pod in any.
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import cast

import redis

from distsched.bench.selectors import (
    node_selection_violations,
    port_clashes,
    selector_matches,
    term_matches,
    tolerates,
    untolerated_hard_taints,
)
from distsched.cache.ledger import Ledger
from distsched.cache.ledger_types import decode_record
from distsched.clock import SYSTEM_CLOCK, Clock
from distsched.keys import Keys
from distsched.model import (
    DEFAULT_SCHEDULER_NAME,
    LabelSelector,
    LabelSelectorRequirement,
    Node,
    Pod,
    PodAffinityTerm,
    TopologySpreadConstraint,
    pod_host_ports,
    pod_requests,
)
from distsched.model.nodeaffinity import term_matches_node
from distsched.model.podgroups import PodGroup, group_of, group_of_object
from distsched.model.volumes import (
    GA_LABEL,
    READ_WRITE_ONCE_POD,
    ZONE_LABELS,
    CSINode,
    PersistentVolume,
    PersistentVolumeClaim,
    claim_from_dict,
    csi_node_from_dict,
    decoded_by_key,
    volume_from_dict,
    zones_of_label,
)
from distsched.redis_text import as_text
from distsched.store import ObjectRef, Store, decode_stream, trim
from distsched.store.codec import STREAM_PAGE

MAX_PER_KIND = 20
QUEUE_PLACES = ("active", "backoff", "unschedulable", "gated", "inflight", "dead")


@dataclass
class Violations:
    """Violation messages by kind, capped at ``limit`` messages per kind."""

    limit: int = MAX_PER_KIND
    by_kind: dict[str, list[str]] = field(default_factory=dict)
    counts: Counter[str] = field(default_factory=Counter)

    def add(self, kind: str, message: str) -> None:
        self.counts[kind] += 1
        if self.counts[kind] <= self.limit:
            self.by_kind.setdefault(kind, []).append(f"{kind}: {message}")

    def messages(self) -> list[str]:
        out: list[str] = []
        for kind, messages in self.by_kind.items():
            out += messages
            extra = self.counts[kind] - len(messages)
            if extra > 0:
                out.append(f"{kind}: ... and {extra} more")
        return out


@dataclass
class Cluster:
    nodes: dict[str, Node]
    bound: dict[str, Pod]  # pod key -> pod with spec.nodeName
    pending: dict[str, Pod]
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)  # name -> labels
    pod_groups: dict[str, PodGroup] = field(default_factory=dict)  # ns/name -> PodGroup
    claims: dict[str, PersistentVolumeClaim] = field(default_factory=dict)  # ns/name
    volumes: dict[str, PersistentVolume] = field(default_factory=dict)  # by name
    csi_nodes: dict[str, CSINode] = field(default_factory=dict)  # by node name


def read_cluster(client: redis.Redis, keys: Keys) -> Cluster:
    snap = Store(client, keys).snapshot(
        [
            "Node",
            "Pod",
            "Namespace",
            "PodGroup",
            "PersistentVolumeClaim",
            "PersistentVolume",
            "CSINode",
        ]
    )
    nodes = {name: Node.from_dict(obj) for name, obj in snap.objects["Node"].items()}
    bound: dict[str, Pod] = {}
    pending: dict[str, Pod] = {}
    for key, obj in snap.objects["Pod"].items():
        pod = Pod.from_dict(obj)
        (bound if pod.spec.node_name else pending)[key] = pod
    namespaces = {
        name: dict(obj["metadata"].get("labels") or {})
        for name, obj in snap.objects["Namespace"].items()
    }
    pod_groups = {}
    for obj in snap.objects["PodGroup"].values():
        group = PodGroup.from_dict(obj)
        pod_groups[group.key] = group
    return Cluster(
        nodes,
        bound,
        pending,
        namespaces,
        pod_groups,
        claims=decoded_by_key(snap.objects["PersistentVolumeClaim"].values(), claim_from_dict),
        volumes=decoded_by_key(snap.objects["PersistentVolume"].values(), volume_from_dict),
        csi_nodes=decoded_by_key(snap.objects["CSINode"].values(), csi_node_from_dict),
    )


# --------------------------------------------------------------------------- node-local


def check_nodes(cluster: Cluster, out: Violations) -> None:
    by_node: dict[str, list[Pod]] = defaultdict(list)
    for pod in cluster.bound.values():
        by_node[pod.spec.node_name].append(pod)
    for name, pods in sorted(by_node.items()):
        node = cluster.nodes.get(name)
        if node is None:
            continue  # the node was deleted after its pods were bound (kube allows it)
        used: Counter[str] = Counter({"pods": len(pods)})
        ports = []
        for pod in pods:
            used.update(pod_requests(pod))
            ports += [(pod.key, port) for port in pod_host_ports(pod)]
            for problem in node_selection_violations(pod, node):
                out.add("node-affinity", f"{pod.key} on {name}: {problem}")
            for taint in untolerated_hard_taints(pod, node):
                out.add("taint", f"{pod.key} on {name}: {taint.key}={taint.value}:{taint.effect}")
        allocatable = node.status.allocatable
        for resource, amount in sorted(used.items()):
            if amount > allocatable.get(resource, 0):
                out.add(
                    "overcommit",
                    f"node {name}: {resource} requested {amount} > allocatable "
                    f"{allocatable.get(resource, 0)}",
                )
        for a, b, (ip, proto, port) in port_clashes(ports):
            out.add("host-port", f"node {name}: {a} and {b} both use {proto}/{ip}:{port}")


# --------------------------------------------------------------------------- inter-pod


class DomainIndex:
    """Bound pods per topology domain, grouped by (namespace, labels) so that a selector
    is evaluated once per distinct group rather than once per pod."""

    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster
        self._by_key: dict[str, dict[str, dict[tuple, list[Pod]]]] = {}

    def _index(self, topology_key: str) -> dict[str, dict[tuple, list[Pod]]]:
        index = self._by_key.get(topology_key)
        if index is None:
            index = {}
            for pod in self._cluster.bound.values():
                node = self._cluster.nodes.get(pod.spec.node_name)
                value = node.metadata.labels.get(topology_key) if node else None
                if value is None:
                    continue
                group = (pod.metadata.namespace, tuple(sorted(pod.metadata.labels.items())))
                index.setdefault(value, {}).setdefault(group, []).append(pod)
            self._by_key[topology_key] = index
        return index

    def matching(self, term: PodAffinityTerm, owner: Pod, value: str) -> Iterable[Pod]:
        for pods in self._index(term.topology_key).get(value, {}).values():
            if term_matches(term, owner, pods[0], self._cluster.namespaces):
                yield from pods


def _domain_of(cluster: Cluster, pod: Pod, topology_key: str) -> str | None:
    node = cluster.nodes.get(pod.spec.node_name)
    return node.metadata.labels.get(topology_key) if node else None


def check_inter_pod(cluster: Cluster, out: Violations) -> None:
    index = DomainIndex(cluster)
    reported: set[tuple[str, str]] = set()
    for pod in sorted(cluster.bound.values(), key=lambda p: p.key):
        affinity = pod.spec.affinity
        if affinity is None:
            continue
        if affinity.pod_anti_affinity is not None:
            for term in affinity.pod_anti_affinity.required:
                value = _domain_of(cluster, pod, term.topology_key)
                if value is None:
                    continue
                for other in index.matching(term, pod, value):
                    pair = tuple(sorted((pod.key, other.key)))
                    if other.key == pod.key or pair in reported:
                        continue
                    reported.add(pair)  # type: ignore[arg-type]
                    out.add(
                        "anti-affinity",
                        f"{pod.key} on {pod.spec.node_name} and {other.key} on "
                        f"{other.spec.node_name} share {term.topology_key}={value}",
                    )
        if affinity.pod_affinity is not None:
            for term in affinity.pod_affinity.required:
                value = _domain_of(cluster, pod, term.topology_key)
                if value is None:
                    out.add(
                        "affinity",
                        f"{pod.key}: node {pod.spec.node_name} has no {term.topology_key} label",
                    )
                elif next(iter(index.matching(term, pod, value)), None) is None:
                    out.add(
                        "affinity",
                        f"{pod.key}: no pod matching its term in {term.topology_key}={value}",
                    )


def _spread_selector(pod: Pod, constraint: TopologySpreadConstraint) -> LabelSelector | None:
    """The constraint's selector with matchLabelKeys folded in (key In [pod's value])."""
    selector = constraint.label_selector
    extra = tuple(
        LabelSelectorRequirement(key, "In", (pod.metadata.labels[key],))
        for key in constraint.match_label_keys
        if key in pod.metadata.labels
    )
    if selector is None or not extra:
        return selector
    return LabelSelector(dict(selector.match_labels), (*selector.match_expressions, *extra))


def _eligible(pod: Pod, node: Node, constraint: TopologySpreadConstraint, keys: set[str]) -> bool:
    labels = node.metadata.labels
    if any(key not in labels for key in keys):
        return False
    if constraint.node_affinity_policy != "Ignore" and node_selection_violations(pod, node):
        return False
    if constraint.node_taints_policy == "Honor":
        hard = [t for t in node.spec.taints if t.effect in ("NoSchedule", "NoExecute")]
        if any(not any(tolerates(tol, t) for tol in pod.spec.tolerations) for t in hard):
            return False
    return True


def check_topology_spread(cluster: Cluster, out: Violations) -> None:
    seen: set[str] = set()
    for pod in sorted(cluster.bound.values(), key=lambda p: p.key):
        hard = [
            c
            for c in pod.spec.topology_spread_constraints
            if c.when_unsatisfiable == "DoNotSchedule"
        ]
        keys = {c.topology_key for c in hard}
        for constraint in hard:
            selector = _spread_selector(pod, constraint)
            affinity = pod.spec.affinity.node_affinity if pod.spec.affinity else None
            node_filter = (pod.spec.node_selector, affinity, pod.spec.tolerations)
            signature = repr(
                (pod.metadata.namespace, constraint, selector, sorted(keys), node_filter)
            )
            if signature in seen:
                continue
            seen.add(signature)
            eligible = {
                name: node.metadata.labels[constraint.topology_key]
                for name, node in cluster.nodes.items()
                if _eligible(pod, node, constraint, keys)
            }
            counts: Counter[str] = Counter({value: 0 for value in eligible.values()})
            for other in cluster.bound.values():
                value = eligible.get(other.spec.node_name)
                if (
                    value is not None
                    and other.metadata.namespace == pod.metadata.namespace
                    and selector_matches(selector, other.metadata.labels)
                ):
                    counts[value] += 1
            if not counts:
                continue
            low = min(counts.values())
            if constraint.min_domains is not None and len(counts) < constraint.min_domains:
                low = 0
            skew = max(counts.values()) - low
            if skew > constraint.max_skew:
                out.add(
                    "topology-spread",
                    f"pods like {pod.key} over {constraint.topology_key}: "
                    f"{dict(sorted(counts.items()))} skew {skew} > maxSkew {constraint.max_skew}",
                )


# --------------------------------------------------------------------------- history, queue


class BindHistory:
    """Every binding the store's event stream shows, read in order as an informer reads it:
    (pod key, uid) -> times bound, and the pods it shows moved from one node to another. A
    binding entry carries no object; its pod (uid, previous node) is the one the earlier
    entries left (uid "" when those were trimmed).

    The workers trim the stream below what its readers have read (:mod:`distsched.store.
    trim`). A history that must see a whole run registers as a reader from its start
    (``hold=True``): :meth:`hold` keeps that registration alive without reading (cheap,
    for a benchmark's loop; at least once a minute), :meth:`advance` reads what is new."""

    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        *,
        hold: bool = False,
        reader: str = "checker-history",
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._client, self._keys, self._clock = client, keys, clock
        self._reader = reader if hold else None
        self.binds: Counter[tuple[str, str]] = Counter()
        self.groups: dict[tuple[str, str], str] = {}  # (key, uid) bound -> its pod group
        self.moved: list[str] = []
        self._copies: dict[tuple[str, str], ObjectRef] = {}
        self._next = "-"
        self._rv = 0
        self.hold()

    def hold(self) -> None:
        """Keep the stream from being trimmed past what this history has read."""
        if self._reader is not None:
            trim.report_position(
                self._client, self._keys, self._reader, self._rv, self._clock.now_ms()
            )

    def release(self) -> None:
        if self._reader is not None:
            trim.forget_reader(self._client, self._keys, self._reader)
            self._reader = None

    def advance(self) -> BindHistory:
        """Read the entries added since the last call."""
        while True:
            page = cast(
                list[tuple[bytes, dict[bytes, bytes]]],
                self._client.xrange(self._keys.events, min=self._next, max="+", count=STREAM_PAGE),
            )
            for event in decode_stream(page, self._copies):
                if event.kind != "Pod" or event.type != "MODIFIED":
                    continue
                old = event.old or {}
                new_node = event.node
                old_node = (old.get("spec") or {}).get("nodeName") or ""
                if new_node and not old_node:
                    uid = str((old.get("metadata") or {}).get("uid", ""))
                    pod = old
                    if not event.binding:
                        pod = event.obj
                        uid = str(event.obj["metadata"].get("uid", ""))
                    self.binds[(event.key, uid)] += 1
                    group = group_of_object(pod) if pod else ""
                    if group:
                        self.groups[(event.key, uid)] = group
                elif old_node and new_node != old_node:
                    self.moved.append(f"{event.key} from {old_node} to {new_node or '(none)'}")
            if page:
                last = as_text(page[-1][0])
                ms, seq = last.split("-")
                self._next = f"{ms}-{int(seq) + 1}"
                self._rv = int(ms)
                self.hold()
            if len(page) < STREAM_PAGE:
                return self

    def per_pod(self) -> dict[str, int]:
        """Pod key -> times bound (all incarnations)."""
        counts: dict[str, int] = {}
        for (key, _uid), n in self.binds.items():
            counts[key] = counts.get(key, 0) + n
        return counts


@contextlib.contextmanager
def held_history(client: redis.Redis, keys: Keys, reader: str) -> Iterator[BindHistory]:
    """A :class:`BindHistory` that holds the stream from now until the block ends (a
    thread renews the hold every 10 s), so that a run's checker judges every binding."""
    history = BindHistory(client, keys, hold=True, reader=reader)
    done = threading.Event()

    def renew() -> None:
        while not done.wait(10.0):
            with contextlib.suppress(redis.RedisError):
                history.hold()

    thread = threading.Thread(target=renew, name="history-hold", daemon=True)
    thread.start()
    try:
        yield history
    finally:
        done.set()
        thread.join()
        with contextlib.suppress(redis.RedisError):
            history.release()


def bind_events(client: redis.Redis, keys: Keys) -> tuple[Counter[tuple[str, str]], list[str]]:
    """(pod key, uid) -> number of times the event stream shows it bound; and pods the
    stream shows moved from one node to another (:class:`BindHistory`, read once)."""
    history = BindHistory(client, keys).advance()
    return history.binds, history.moved


def check_history(history: BindHistory, out: Violations) -> None:
    binds, moved = history.advance().binds, history.moved
    for (key, uid), count in sorted(binds.items()):
        if count > 1:
            out.add("double-bind", f"{key} (uid {uid}) bound {count} times")
    for message in moved:
        out.add("double-bind", f"{message}")


def _queue_members(client: redis.Redis, keys: Keys) -> dict[str, list[str]]:
    pipe = client.pipeline(transaction=True)
    for place in QUEUE_PLACES:
        pipe.zrange(getattr(keys, place), 0, -1)
    pipe.zrange(keys.ledger_assumed, 0, -1)
    replies = pipe.execute()
    members: dict[str, list[str]] = {}
    for place, reply in zip((*QUEUE_PLACES, "assumed"), replies, strict=True):
        names = [as_text(m) for m in reply]
        if place == "active":
            names = [m.split("|", 1)[1] if "|" in m else m for m in names]
        members[place] = names
    return members


def check_queue(client: redis.Redis, keys: Keys, cluster: Cluster, out: Violations) -> None:
    members = _queue_members(client, keys)
    for place in ("inflight", "assumed"):
        for key in members[place]:
            out.add("not-drained", f"{key} still {place}")
    places: dict[str, list[str]] = defaultdict(list)
    for place, names in members.items():
        for key in names:
            places[key].append(place)
    for key, pod in sorted(cluster.pending.items()):
        if pod.spec.scheduler_name != DEFAULT_SCHEDULER_NAME:
            continue
        where = places.get(key, [])
        if not where:
            out.add("lost-pod", f"pending pod {key} is in no sub-queue")
        elif len(where) > 1:
            out.add("lost-pod", f"pending pod {key} is in {', '.join(where)} at once")
    for key in sorted(cluster.bound):
        queued = [p for p in places.get(key, []) if p not in ("assumed", "dead")]
        if queued:
            out.add("lost-pod", f"bound pod {key} is still in {', '.join(queued)}")


def check_ledger(client: redis.Redis, keys: Keys, cluster: Cluster, out: Violations) -> None:
    ledger = Ledger(client, keys, SYSTEM_CLOCK)
    for diff in ledger.check_consistency():
        out.add(
            "ledger",
            f"node {diff.node or '-'} {diff.item}: ledger has {diff.ledger}, "
            f"its pods add up to {diff.expected}",
        )
    records = ledger_records(client, keys)
    for key, pod in sorted(cluster.bound.items()):
        node = records.get(key)
        if node is None:
            out.add("ledger", f"bound pod {key} on {pod.spec.node_name} has no ledger record")
        elif node != pod.spec.node_name:
            out.add("ledger", f"{key} is bound to {pod.spec.node_name}, ledger says {node}")
    for key in sorted(set(records) - set(cluster.bound) - set(cluster.pending)):
        out.add("ledger", f"ledger holds {key}, which is not in the store")


def ledger_records(client: redis.Redis, keys: Keys) -> dict[str, str]:
    """Pod key -> node of every ledger record (a reserved or bound pod)."""
    return {
        as_text(k): decode_record(as_text(k), v, None).node
        for k, v in client.hgetall(keys.ledger_pods).items()
    }


def check_gangs(
    cluster: Cluster,
    records: Mapping[str, str],
    out: Violations,
    history: BindHistory | None = None,
) -> None:
    """The gang invariant: each PodGroup has none or at least its minimum of members bound
    or reserved. A gang is excused when ``history`` shows a member of it bound that is no
    longer there (deleted, or its name now another pod): lost after admission."""
    if not cluster.pod_groups:
        return
    placed: dict[str, list[str]] = defaultdict(list)
    uids: dict[str, str] = {}
    for key, pod in (*cluster.bound.items(), *cluster.pending.items()):
        uids[key] = pod.metadata.uid
        group = group_of(pod)
        if group and (key in cluster.bound or key in records):
            placed[group].append(key)
    lost: set[str] = set()
    if history is not None:
        for (key, uid), group in history.groups.items():
            if uid and uids.get(key) != uid:
                lost.add(group)
    for name, pod_group in sorted(cluster.pod_groups.items()):
        members = sorted(placed.get(name, []))
        if 0 < len(members) < pod_group.min_member and name not in lost:
            shown = ", ".join(members[:5]) + (", ..." if len(members) > 5 else "")
            out.add(
                "gang",
                f"{name} has {len(members)} of its minimum {pod_group.min_member} members "
                f"bound or reserved: {shown}",
            )


# --------------------------------------------------------------------------- volumes
def check_volumes(cluster: Cluster, out: Violations) -> None:
    users: dict[str, list[str]] = defaultdict(list)
    attached: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for key, pod in sorted(cluster.bound.items()):
        node = cluster.nodes.get(pod.spec.node_name)
        for volume in pod.spec.volumes:
            name = volume.claim_for(pod.metadata.name)
            claim = cluster.claims.get(f"{pod.metadata.namespace}/{name}") if name else None
            if claim is None:
                continue
            if READ_WRITE_ONCE_POD in claim.access_modes:
                users[claim.key].append(key)
            pv = cluster.volumes.get(claim.volume_name) if claim.volume_name else None
            if pv is None or node is None:
                continue
            if pv.csi is not None:
                attached[node.metadata.name][pv.csi.driver].add(pv.csi.volume_handle)
            wrong = _zone_mismatch(pv, node)
            if wrong:
                out.add("volume-zone", f"{key} on {node.metadata.name}: PV {pv.key} {wrong}")
            if pv.node_affinity is not None and not any(
                term_matches_node(t, node) for t in pv.node_affinity
            ):
                out.add(
                    "volume-node-affinity",
                    f"{key} on {node.metadata.name}: PV {pv.key}'s node affinity excludes it",
                )
    for claim_key, pods in users.items():
        if len(pods) > 1:
            out.add("read-write-once-pod", f"claim {claim_key} used by {', '.join(pods)}")
    for node_name, drivers in sorted(attached.items()):
        csi = cluster.csi_nodes.get(node_name)
        limits = csi.limits() if csi is not None else {}
        for driver, handles in sorted(drivers.items()):
            if driver in limits and len(handles) > limits[driver]:
                out.add(
                    "volume-limit",
                    f"{node_name}: {len(handles)} {driver} volumes, allocatable {limits[driver]}",
                )


def _zone_mismatch(pv: PersistentVolume, node: Node) -> str:
    """Why the PV's zone/region labels exclude the node ("" when they do not)."""
    labels = node.metadata.labels
    if not any(key in labels for key in ZONE_LABELS):
        return ""
    for key in ZONE_LABELS:
        value = pv.metadata.labels.get(key)
        zones = zones_of_label(value) if value is not None else None
        if zones is None:
            continue
        have = labels.get(key, labels.get(GA_LABEL.get(key, key)))
        if have not in zones:
            return f"is in {key}={value}, the node in {have or 'none'}"
    return ""


def check_expected(cluster: Cluster, expect_bound: Iterable[str], out: Violations) -> None:
    for key in sorted(expect_bound):
        if key in cluster.bound:
            continue
        state = "pending" if key in cluster.pending else "missing from the store"
        out.add("unbound", f"{key} is {state}")


def check(
    client: redis.Redis,
    keys: Keys,
    *,
    expect_bound: set[str] | None = None,
    limit_per_kind: int = MAX_PER_KIND,
    history: BindHistory | None = None,
) -> list[str]:
    """Every broken invariant as one message (``kind: details``); [] when all hold.
    ``client`` must return bytes (decode_responses=False). ``history``: the run's
    :class:`BindHistory` when it held the stream from the start (else the stream is read
    as it is now, and bindings trimmed from it are not judged)."""
    out = Violations(limit_per_kind)
    cluster = read_cluster(client, keys)
    check_nodes(cluster, out)
    check_inter_pod(cluster, out)
    check_topology_spread(cluster, out)
    check_volumes(cluster, out)
    history = history or BindHistory(client, keys)
    check_history(history, out)
    check_queue(client, keys, cluster, out)
    check_ledger(client, keys, cluster, out)
    check_gangs(cluster, ledger_records(client, keys), out, history)
    if expect_bound is not None:
        check_expected(cluster, expect_bound, out)
    return out.messages()
