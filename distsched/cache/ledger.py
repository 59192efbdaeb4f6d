"""The authoritative reservation ledger in Redis, shared by all scheduling workers.

Workers schedule on local snapshots and then reserve optimistically: one Lua script call
checks a whole batch of decisions against the ledger and records the winners as assumed
pods. Whatever the number of racing workers, no node goes over its allocatable and no host
port is taken twice, because every check and every write of a reservation happen inside one
script and Redis runs scripts one at a time.

The ledger's keys (``T:cache:*``: per-node hashes of allocatable, host ports and pods, one
usage record per node (its generation and requested amounts), the pod records, the
assumed set with deadlines, domain and anti-affinity generations, the change feed) are
listed with their layout in :mod:`distsched.keys`; everything is readable with redis-cli.

Fencing: a decision carries the lease epoch of the pop that gave the worker the pod. It is
reserved only while the pod is still in the queue's inflight zset and the queue info's
``e`` equals that epoch; otherwise the result is :class:`Stale` and nothing is written
(the lease expired and another worker may own the pod now). On success the pod leaves
inflight and its info says ``w = "assumed"``; the reservation token is the epoch.

Inter-pod constraints cannot be evaluated in Lua. Instead, every reservation or release on
a node bumps the generation of each of the node's topology domains (its ``topo:`` values,
including ``kubernetes.io/hostname=<node>``) whose topology key some constrained pod
watches (``cache:topokeys``; :meth:`Ledger.watch_topology_keys`). Keys nobody watches keep
no generation, so a workload without inter-pod constraints writes none. A pod with
affinity, anti-affinity or spread constraints sends, for the chosen node's domains of the
keys it uses, the generations that the data it decided on reflects; any change since is
a conflict. What "reflects" means is the whole protocol: a worker must never send a
generation that counts a reservation its data does not hold.

- A single-node domain (``hostname=<node>``, or any domain the node is alone in): the
  generation read with the node's pod list, atomically (:meth:`Ledger.node_state`).
- A multi-node domain (a zone): the generation read before the pod lists of the domain's
  nodes (:meth:`Ledger.changes_since` with domains, then :meth:`Ledger.node_state` for the
  nodes that changed): generations first, data second, so every reservation counted is in
  the data; one made after the read bumps the generation and is refused.
- Registration before both: a reservation made before a key was watched did not bump,
  but it is in the data the worker reads after registering.

A release elsewhere can still lower a spread constraint's global minimum, exactly as a
pod deletion can in kube-scheduler.

The symmetric case needs more: pod Q with required anti-affinity against P is reserved by
worker A; worker B, whose snapshot does not have Q yet, places P (no constraints of its
own, so no domain checks) into Q's domain. Checking every domain generation on every
decision would close it, but then any two reservations in one zone would conflict. So the
ledger keeps a second, narrower generation: when a pod whose own required anti-affinity
terms use topology key K is reserved (or added bound) on a node with K=v, ``aagen[K=v]``
goes up by one (a departure cannot create a violation, so releases leave it alone).
Every decision carries the sum of ``aagen`` over the chosen node's domains as its worker
saw it (:attr:`NodeState.anti_affinity_gen`); the script recomputes the sum and rejects on
any difference. The generations only grow, so an unchanged sum means no anti-affinity pod
arrived in any of the node's domains; pods without anti-affinity (the common case) never
bump it, so unrelated reservations do not conflict. A counter of such pods would miss a
release followed by another arrival; a generation does not. The domains of a node must
include every label key pods use as a topologyKey (passing all node labels is always right).

The anti-affinity sum follows the same rule per domain: a single-node domain's
anti-affinity generation comes with the node's pod list, a multi-node domain's from a
read that precedes the pod lists.

Scoring's non-zero requests are summed per node too (the ``+cpu`` / ``+memory``
pseudo-resources of :mod:`distsched.cache.ledger_types`), so a worker's snapshot scores
nodes without the pod objects of the pods on them.

Binding: a binder claims a job's reservations (:meth:`Ledger.claim`: still assumed under
the token? then a fresh deadline, in one script) before a binding cycle with plugins or a
Permit wait; the store's bind script checks the reservation itself and confirms it in the
same call; :meth:`Ledger.confirm_bound` does it for pods bound by a bind plugin. A binder
failure releases under the token and then requeues through the queue's failure handler,
which accepts an assumed pod. The per-pod records of the queue and the ledger change hands
only inside these scripts, through ``lua/lib/queue_record.lua`` and
``lua/lib/ledger_record.lua``; no caller touches the ledger's keys.

Crash safety: an assumed pod has a deadline (``assume_ttl_ms``); :meth:`Ledger.
reap_expired_assumed` releases expired ones and puts them back into backoffQ in one script,
so a worker or binder killed after reserving loses no pod. Its deliveries stay counted, so
a pod that keeps killing binders ends up dead-lettered by the queue's pop.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import cast

import redis

from distsched import replication
from distsched.cache.ledger_reads import DomainGenerations, LedgerReader, outlived_its_pod
from distsched.cache.ledger_types import (
    Decision,
    Difference,
    HostPort,
    Invalid,
    LedgerConfig,
    NodeState,
    PodRecord,
    Rejected,
    Reserved,
    ReserveResult,
    Stale,
    check_count,
    check_domain,
    check_name,
    decode_record,
    encode_anti_affinity_keys,
    encode_ports,
    encode_record,
    encode_requests,
    nonzero_extra_requests,
    normalize_ports,
    normalize_requests,
)
from distsched.clock import Clock
from distsched.keys import Keys
from distsched.lua import ScriptSet
from distsched.model.objects import LABEL_HOSTNAME, Node
from distsched.queue_types import WAKE_CAP, QueueConfig
from distsched.redis_text import as_text
from distsched.scan import hash_pages

_RETRIES = 8
MAX_BATCH = 1000  # cache_reserve unpacks one argument per pod in its bulk reads and writes


_REQUEST_TEXTS: dict[tuple[tuple[tuple[str, int], ...], tuple[int, int] | None], str] = {}
_REQUEST_TEXTS_KEPT = 256


def _requests_text(requests: Mapping[str, int], nonzero: tuple[int, int] | None) -> str:
    """cache_reserve's requests text of a decision, checked; pods of one template send the
    same requests, so each distinct (requests, non-zero) is checked and encoded once."""
    items = tuple(requests.items())
    key = (items, nonzero)
    # Only exact ints are kept: a bool equals 1 and hashes alike, and must be checked.
    kept = all(type(amount) is int for _, amount in items)
    text = _REQUEST_TEXTS.get(key) if kept else None
    if text is None:
        text = encode_requests(normalize_requests(nonzero_extra_requests(requests, nonzero)))
        if kept:
            if len(_REQUEST_TEXTS) >= _REQUEST_TEXTS_KEPT:
                _REQUEST_TEXTS.clear()
            _REQUEST_TEXTS[key] = text
    return text


def _encode_decision(d: Decision) -> list[str | int]:
    """One decision's ARGV items for cache_reserve (the node index, item 3, is set by the
    caller); ValueError when it cannot be sent as given."""
    check_name("pod key", d.pod_key, " ")
    check_name("node name", d.node, ": ")
    if not isinstance(d.uid, str):
        raise ValueError(f"uid must be a string: {d.uid!r}")
    encoded: list[str | int] = [
        d.pod_key,
        d.uid,
        check_count("epoch", d.epoch),
        0,
        _requests_text(d.requests, d.nonzero),
        encode_ports(normalize_ports(d.host_ports)) if d.host_ports else "",
        encode_anti_affinity_keys(d.anti_affinity_keys) if d.anti_affinity_keys else "",
        check_count("anti_affinity_gen", d.anti_affinity_gen),
        check_count("seen_pods", d.seen_pods + 1) if d.seen_pods >= 0 else 0,
        len(d.domain_checks),
    ]
    for dom, gen in d.domain_checks.items():
        encoded += [check_domain(dom), check_count(f"generation of {dom}", gen)]
    return encoded


class Ledger:
    """The cache ledger of one scheduler deployment (see the module docstring)."""

    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        clock: Clock,
        config: LedgerConfig | None = None,
        *,
        queue_config: QueueConfig | None = None,
    ) -> None:
        self._r = client
        self._keys = keys
        self._clock = clock
        self.config = config or LedgerConfig()
        # The reaper requeues released pods with the queue's backoff (one backoff config).
        self.queue_config = queue_config or QueueConfig()
        self._scripts = ScriptSet(client)
        self.pods_key = keys.ledger_pods
        self.assumed_key = keys.ledger_assumed
        self.nodes_key = keys.ledger_nodes
        self.domgen_key = keys.ledger_domain_gen
        self.aagen_key = keys.ledger_anti_affinity_gen
        self.aapods_key = keys.ledger_anti_affinity_pods
        self.topokeys_key = keys.ledger_topology_keys
        self.capacity_key = keys.ledger_capacity
        # The read side (ledger_reads.py), under the same names.
        self.reader = reader = LedgerReader(client, keys, self._scripts)
        self.feed_keys = reader.feed_keys
        self.node_keys = reader.node_keys
        self.changes_since = reader.changes_since
        self.usage_records_since = reader.usage_records_since
        self.node_names = reader.node_names
        self.node_state = reader.node_state
        self.pod = reader.pod
        self.pod_nodes = reader.pod_nodes
        self.deleted_pods_on = reader.deleted_pods_on
        self.assumed_pods = reader.assumed_pods
        self.anti_affinity_pods = reader.anti_affinity_pods
        self.check_consistency = reader.check_consistency

    # --- nodes ---------------------------------------------------------------------------
    def set_node(
        self, name: str, allocatable: Mapping[str, int], domains: Mapping[str, str] | None = None
    ) -> bool:
        """Add or update a node; ``domains`` maps topology keys to the node's values (the
        hostname domain is added). Returns True when the node was new or removed before."""
        check_name("node name", name, ":")
        alloc = {check_name("resource", r, ":"): check_count(r, v) for r, v in allocatable.items()}
        doms = {LABEL_HOSTNAME: name, **(domains or {})}
        for key, value in doms.items():
            check_name("topology key", key, "=,")
            if not isinstance(value, str):
                raise ValueError(f"topology value of {key} must be a string: {value!r}")
        node_key, ports_key, pods_key = self.node_keys(name)
        keys = [
            self.nodes_key,
            self.domgen_key,
            self.aagen_key,
            node_key,
            pods_key,
            self.aapods_key,
            ports_key,
            self.capacity_key,
            *self.feed_keys,
        ]
        args = [name, json.dumps(alloc), json.dumps(doms)]
        return bool(self._scripts.get("cache_node_set")(keys=keys, args=args))

    def set_node_from(self, node: Node) -> bool:
        """:meth:`set_node` for a Node object: its allocatable, and all its labels as
        topology domains (every label key may serve as a topologyKey)."""
        return self.set_node(node.metadata.name, node.status.allocatable, node.metadata.labels)

    def remove_node(self, name: str) -> list[str]:
        """Remove a node: it takes no more reservations, its assumed pods are released and
        requeued (returned), its bound pods stay until deleted."""
        keys = [
            self.nodes_key,
            self.domgen_key,
            self.assumed_key,
            *self.node_keys(name),
            self.capacity_key,
            *self.feed_keys,
        ]
        assumed = self._scripts.get("cache_node_remove")(keys=keys, args=[name])
        if not assumed:
            return []
        wanted = {as_text(k) for k in assumed}
        return [k for k in self.reap_expired_assumed(self._clock.now_ms()) if k in wanted]

    # --- reservations --------------------------------------------------------------------
    def reserve(self, decision: Decision) -> ReserveResult:
        return self.reserve_batch([decision])[0]

    def reserve_batch(
        self,
        decisions: Sequence[Decision],
        *,
        groups: Sequence[int] | None = None,
    ) -> list[ReserveResult]:
        """Check and reserve the decisions in order, in one script call (see module doc).
        A decision that cannot be sent as given (a request beyond MAX_AMOUNT) is
        :class:`Invalid` and left out; the others are reserved as if it were not there.
        ``groups`` (sizes of consecutive groups, adding up to the decisions) makes each
        group of more than one a gang: all of its decisions are reserved, or none is, and
        each one that would have passed is :class:`Rejected` with the first refusal's
        reason; later decisions are checked as if a refused gang had not been there."""
        if not decisions:
            return []
        if len(decisions) > MAX_BATCH:
            raise ValueError(f"at most {MAX_BATCH} decisions per batch, got {len(decisions)}")
        sizes = list(groups) if groups is not None else [1] * len(decisions)
        if sum(sizes) != len(decisions) or min(sizes) < 1:
            raise ValueError(f"group sizes {sizes} do not divide {len(decisions)} decisions")
        results: list[ReserveResult | None] = [None] * len(decisions)
        sent: list[tuple[Decision, list[str | int]]] = []
        sent_index: list[int] = []
        sent_sizes: list[int] = []
        first = 0
        for size in sizes:
            span = range(first, first + size)
            encoded: list[tuple[int, list[str | int]]] = []
            for i in span:
                try:
                    encoded.append((i, _encode_decision(decisions[i])))
                except ValueError as exc:
                    results[i] = Invalid(str(exc))
            bad = [i for i in span if results[i] is not None]
            if bad and size > 1:
                # A gang with a member that cannot be sent: none of it is.
                invalid = results[bad[0]]
                assert isinstance(invalid, Invalid)
                why = f"gang member {decisions[bad[0]].pod_key}: {invalid.reason}"
                for i in span:
                    if results[i] is None:
                        results[i] = Rejected(why, None)
            else:
                sent += [(decisions[i], e) for i, e in encoded]
                sent_index += [i for i, _ in encoded]
                if encoded:
                    sent_sizes.append(len(encoded))
            first += size
        if sent:
            for i, result in zip(sent_index, self._reserve_encoded(sent, sent_sizes), strict=True):
                results[i] = result
        return [r for r in results if r is not None]

    def _reserve_encoded(
        self, sent: Sequence[tuple[Decision, list[str | int]]], sizes: Sequence[int]
    ) -> list[ReserveResult]:
        index: dict[str, int] = {}
        per_pod: list[str | int] = []
        for d, encoded in sent:
            encoded[3] = index.setdefault(d.node, len(index) + 1)
            per_pod += encoded
        decisions = [d for d, _ in sent]
        deadline = self._clock.now_ms() + self.config.assume_ttl_ms
        keys = [
            self._keys.inflight,
            self._keys.info,
            self.pods_key,
            self.assumed_key,
            self.domgen_key,
            self.aagen_key,
            self.aapods_key,
            self.topokeys_key,
            self.capacity_key,
        ]
        for name in index:
            keys += self.node_keys(name)
        keys += self.feed_keys
        spec = "0" if all(n == 1 for n in sizes) else "g:" + ",".join(map(str, sizes))
        args: list[str | int] = [deadline, spec, len(index), *index, *per_pod]
        raw = self._scripts.get("cache_reserve")(keys=keys, args=args)
        flat = [as_text(x) for x in raw]  # kind, detail of each decision in turn
        kinds = list(zip(flat[::2], flat[1::2], strict=True))
        if any(kind == "R" for kind, _ in kinds):
            # The binder acts on these tokens: they must survive a failover first.
            replication.acknowledge(self._r, self._keys.ack, "reservation")
        pairs = list(zip(decisions, kinds, strict=True))
        rejected_nodes = {d.node for d, (kind, _) in pairs if kind == "X"}
        states = self.node_state(rejected_nodes) if rejected_nodes else {}
        results: list[ReserveResult] = []
        for d, (kind, detail) in pairs:
            if kind == "R":
                results.append(Reserved(detail))
            elif kind == "S":
                results.append(Stale(detail))
            elif kind == "I":
                results.append(Invalid(detail))
            else:
                results.append(Rejected(detail, states.get(d.node)))
        return results

    def confirm_bound(self, pod_key: str, token: str) -> bool:
        """The binder bound the pod: assumed -> bound (the ledger keeps its requests).
        False when the reservation under ``token`` no longer exists."""
        return self.confirm_bound_many([(pod_key, token)])[0]

    def confirm_bound_many(self, bound: Iterable[tuple[str, str]]) -> list[bool]:
        """:meth:`confirm_bound` for many ``(pod_key, token)`` pairs in one script call."""
        args = [item for pair in bound for item in pair]
        if not args:
            return []
        keys = [self.pods_key, self.assumed_key, self._keys.info]
        return [bool(x) for x in self._scripts.get("cache_confirm")(keys=keys, args=args)]

    def claim(self, reservations: Sequence[tuple[str, str]]) -> list[str]:
        """A binder takes (pod key, token) reservations before its binding cycle: each one
        still assumed under its token gets a fresh assume deadline in the same script
        ("claimed"); one already bound under it is a "duplicate" (the job ran before); one
        gone or re-reserved is "stale" (see cache_claim.lua)."""
        if not reservations:
            return []
        deadline = self._clock.now_ms() + self.config.assume_ttl_ms
        args: list[str | int] = [deadline]
        for key, token in reservations:
            args += [key, token]
        raw = self._scripts.get("cache_claim")(keys=[self.pods_key, self.assumed_key], args=args)
        return [as_text(status) for status in raw]

    def renew(self, pod_keys: Sequence[str]) -> list[str]:
        """Push the assume deadline of reservations a binder still holds (a pod waiting on
        Permit). A reservation released meanwhile (the pod was deleted, or the reaper took
        it) is not re-added (ZADD XX); returns those keys, in order."""
        if not pod_keys:
            return []
        deadline = self._clock.now_ms() + self.config.assume_ttl_ms
        pipe = self._r.pipeline(transaction=True)
        pipe.zmscore(self.assumed_key, list(pod_keys))
        pipe.zadd(self.assumed_key, dict.fromkeys(pod_keys, deadline), xx=True)
        scores, _ = pipe.execute()
        return [key for key, score in zip(pod_keys, scores, strict=True) if score is None]

    def watch_topology_keys(self, topology_keys: Iterable[str]) -> None:
        """Keep generations for the domains of these topology keys from now on. A caller
        that reads generations to send them in :class:`Decision.domain_checks` must have
        registered their keys first (see the module docstring)."""
        watched = sorted({check_name("topology key", k, "=") for k in topology_keys})
        if watched:
            self._r.sadd(self.topokeys_key, *watched)

    def release(self, pod_key: str, token: str | None = None) -> bool:
        """Unreserve / forget an assumed pod (only under ``token`` when given). Idempotent:
        False when there was nothing to release. The caller requeues the pod."""
        return bool(self._release("forget", [pod_key], token=token or ""))

    def pod_deleted(self, pod_key: str, uid: str = "") -> bool:
        """The pod was deleted: release it whether assumed or bound (with ``uid``: only a
        record of that uid, not one of a pod re-created under the same name since)."""
        return bool(self._release("delete", [pod_key], token=uid))

    def pods_deleted(self, items: Sequence[tuple[str, str]]) -> list[bool]:
        """:meth:`pod_deleted` of each (pod key, uid), in order, in two round trips: one
        read of their records, then one release of them all (each only under its own
        uid), which reads each node once and writes the feed once: a preemptor's victims
        are deleted together. A batch naming a pod twice is released one by one."""
        if not items:
            return []
        pod_keys = [key for key, _ in items]
        if len(set(pod_keys)) < len(pod_keys):
            return [self.pod_deleted(key, uid) for key, uid in items]
        pairs = [text for pair in items for text in pair]
        gone = set(self._release("delete_each", pod_keys, pod_args=pairs))
        return [key in gone for key in pod_keys]

    def release_orphans(
        self, seen: Mapping[str, str], *, scan_count: int = 500
    ) -> tuple[list[str], dict[str, str]]:
        """The consistency sweep's half for the ledger: release every reservation, assumed
        or bound, whose pod the store no longer has (no pod under its name, or one of
        another uid). Nothing should leave one, but one that is left would hold its room
        for good. A record found so is released only when the previous sweep saw the same
        record so too (``seen``: key -> record): a pod whose deletion the handlers are
        about to handle is theirs. Returns the keys released and the records seen so now
        (the next sweep's ``seen``). Each release checks the store again in its script."""
        released: list[str] = []
        suspects: dict[str, str] = {}
        meta_key = self._keys.store_meta("Pod")
        for chunk in hash_pages(self._r, self.pods_key, scan_count):
            keys = [as_text(k) for k in chunk]
            records = [as_text(v) for v in chunk.values()]
            metas = self._r.hmget(meta_key, keys)
            due = []
            for key, raw, meta in zip(keys, records, metas, strict=True):
                if not outlived_its_pod(key, raw, meta):
                    continue
                if seen.get(key) == raw:
                    due.append(key)
                else:
                    suspects[key] = raw
            if due:
                released += self._release("orphan", due)
        return released, suspects

    def reap_expired_assumed(self, now_ms: int | None = None) -> list[str]:
        """Release the assumed pods whose deadline passed and requeue them (backoffQ for
        the backoff of their attempts). Returns their keys."""
        now = self._clock.now_ms() if now_ms is None else check_count("now_ms", now_ms)
        reaped: list[str] = []
        while True:
            due = self._r.zrangebyscore(
                self.assumed_key, "-inf", now, start=0, num=self.config.reap_batch
            )
            if not due:
                return reaped
            released = self._release(
                "expire", [as_text(k) for k in cast(list[bytes], due)], now=now
            )
            if not released:
                return reaped
            reaped += released

    def _release(
        self,
        mode: str,
        pod_keys: list[str],
        *,
        token: str = "",
        now: int | None = None,
        pod_args: list[str] | None = None,
    ) -> list[str]:
        """One cache_release call for ``pod_keys`` on the nodes their records name (again
        when a record moved meanwhile: MOVED); ``pod_args``: the script's pod arguments
        when they are not the keys alone (delete_each's key/uid pairs)."""
        now = self._clock.now_ms() if now is None else now
        for _ in range(_RETRIES):
            raw_records = self._r.hmget(self.pods_key, pod_keys)
            nodes = sorted(
                {
                    decode_record(key, raw, None).node
                    for key, raw in zip(pod_keys, raw_records, strict=True)
                    if raw is not None
                }
            )
            keys, args = self._release_call(mode, pod_args or pod_keys, nodes, token, now)
            status, *released = self._scripts.get("cache_release")(keys=keys, args=args)
            if as_text(status) == "OK":
                return [as_text(k) for k in released]
        raise RuntimeError(f"cache_release kept seeing pods move between nodes: {pod_keys}")

    def _release_call(
        self, mode: str, pod_keys: list[str], nodes: list[str], token: str, now: int
    ) -> tuple[list[str], list[str | int]]:
        """KEYS and ARGV of a cache_release call for ``pod_keys`` on ``nodes``."""
        backoff = self.queue_config
        keys = [
            self.pods_key,
            self.assumed_key,
            self.domgen_key,
            self.aapods_key,
            self.nodes_key,
            self._keys.info,
            self._keys.backoff,
            self._keys.active,
            self._keys.wake,
            self.topokeys_key,
        ]
        for name in nodes:
            keys += self.node_keys(name)
        keys += [self._keys.store_meta("Pod"), *self.feed_keys]
        args: list[str | int] = [
            now,
            mode,
            token,
            backoff.initial_backoff_ms,
            backoff.max_backoff_ms,
            WAKE_CAP,
            len(nodes),
            *nodes,
            *pod_keys,
        ]
        return keys, args

    def add_bound_pod(
        self,
        pod_key: str,
        uid: str,
        node: str,
        req: Mapping[str, int],
        ports: Iterable[HostPort] = (),
        *,
        anti_affinity_keys: Iterable[str] = (),
        nonzero: tuple[int, int] | None = None,
    ) -> str:
        """Record a pod already bound to ``node`` (informer sync); idempotent. A record of
        another uid or node under the same name is replaced. Returns "added", "confirmed"
        (it was assumed there), "present", or "gone" when the store no longer has this pod
        (``uid``) bound to ``node``: nothing is recorded then, since the pod's deletion may
        already have been handled. ``nonzero``: as in :class:`Decision`."""
        check_name("pod key", pod_key, " ")
        check_name("node name", node, ": ")
        record = encode_record(
            node=node,
            uid=uid,
            requests=normalize_requests(nonzero_extra_requests(req, nonzero)),
            ports=normalize_ports(ports),
            token="bound",
            anti_affinity_keys=anti_affinity_keys,
        )
        keys = [
            self.pods_key,
            self.assumed_key,
            self.domgen_key,
            self.aagen_key,
            self.aapods_key,
            self.nodes_key,
            self._keys.info,
            self.topokeys_key,
            *self.node_keys(node),
            self._keys.store_meta("Pod"),
            *self.feed_keys,
        ]
        for _ in range(_RETRIES):
            script = self._scripts.get("cache_add_bound")
            outcome = as_text(script(keys=keys, args=[pod_key, node, record]))
            if outcome != "conflict":
                return outcome
            self._release("delete", [pod_key])
        raise RuntimeError(f"add_bound_pod kept finding another record of {pod_key}")


__all__ = [
    "Decision",
    "Difference",
    "DomainGenerations",
    "Ledger",
    "LedgerConfig",
    "NodeState",
    "PodRecord",
    "Rejected",
    "ReserveResult",
    "Reserved",
    "Stale",
]
