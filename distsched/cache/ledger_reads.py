"""Reading the ledger: the change feed, node states, pod records, the consistency check.

The read side of :mod:`distsched.cache.ledger` (whose docstring is the protocol): what a
worker's local cache mirrors (``changes_since``, ``node_state``, ``anti_affinity_pods``),
what the CLI, the checker and the tests look at. Nothing here writes. ``Ledger`` builds
one and offers its methods under the same names; the write side uses ``node_keys`` and
``feed_keys`` to name a node's keys and the change feed's in its scripts' KEYS order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import redis

from distsched.cache.consistency import ledger_differences
from distsched.cache.ledger_types import (
    Difference,
    HostPort,
    NodeState,
    NodeUsage,
    PodRecord,
    check_domain,
    decode_ports,
    decode_record,
)
from distsched.keys import Keys
from distsched.lua import ScriptSet
from distsched.redis_text import as_text
from distsched.store.codec import parse_meta


def outlived_its_pod(pod_key: str, record: Any, meta: Any) -> bool:
    """Whether a ledger record (``record``) belongs to a pod the store no longer has:
    ``meta``, the store's meta of that name, is None (no such pod) or names another uid
    (the pod was deleted and re-created under the name)."""
    return meta is None or parse_meta(meta).uid != decode_record(pod_key, record, None).uid


@dataclass(frozen=True, slots=True)
class DomainGenerations:
    """Generations of some topology domains as :meth:`LedgerReader.changes_since` read
    them: domain -> generation (``checks``) and domain -> anti-affinity generation."""

    checks: dict[str, int]
    anti_affinity: dict[str, int]


class LedgerReader:
    def __init__(self, client: redis.Redis, keys: Keys, scripts: ScriptSet) -> None:
        self._r = client
        self._keys = keys
        self._scripts = scripts
        # The generation floor and the change feed's usage hash, log and version counter:
        # the last four KEYS of every script that changes a node's usage.
        self.feed_keys = [
            keys.ledger_generation_floor,
            keys.ledger_usage,
            keys.ledger_feed,
            keys.ledger_feed_version,
        ]

    def node_keys(self, name: str) -> list[str]:
        """The node hash, ports hash and pod set of one node, in script KEYS order."""
        keys = self._keys
        return [keys.ledger_node(name), keys.ledger_ports(name), keys.ledger_node_pods(name)]

    # --- nodes ---------------------------------------------------------------------------
    def changes_since(
        self, version: int, domains: Sequence[str] = ()
    ) -> tuple[int, dict[str, NodeUsage], DomainGenerations]:
        """Nodes whose ledger usage changed after ``version`` with their absolute usage,
        the version to ask from next time, and the current generations of ``domains``,
        all read in one step (one script call). A change racing with this call is seen now
        or next time, never lost; a node may come back twice, which is harmless since the
        values are absolute. Generations read here precede any pod list read after, as
        :meth:`Decision` checks on multi-node domains need (see the ledger's docstring)."""
        current, records, generations = self.usage_records_since(version, domains)
        usages = {name: NodeUsage.parse(name, record) for name, record in records.items()}
        return current, usages, generations

    def usage_records_since(
        self, version: int, domains: Sequence[str] = ()
    ) -> tuple[int, dict[str, str], DomainGenerations]:
        """:meth:`changes_since` with each node's usage record left as the ledger wrote
        it (``""`` for a node it has none of; :class:`NodeUsage` parses one): a worker
        mirrors a record per pod any worker places, so it parses only what it uses."""
        k = self._keys
        keys = [
            k.ledger_feed_version,
            k.ledger_feed,
            k.ledger_usage,
            k.ledger_domain_gen,
            k.ledger_anti_affinity_gen,
        ]
        domains = [check_domain(d) for d in domains]
        current, changes, gens, aagens = self._scripts.get("cache_changes")(
            keys=keys, args=[version, *domains]
        )
        names, records = changes[0::2], changes[1::2]
        if names and isinstance(names[0], bytes):
            names = [name.decode() for name in names]
            records = [record.decode() if record else "" for record in records]
        else:
            records = [as_text(record) if record else "" for record in records]
        generations = DomainGenerations(
            checks={d: int(g or 0) for d, g in zip(domains, gens, strict=True)},
            anti_affinity={d: int(g or 0) for d, g in zip(domains, aagens, strict=True)},
        )
        return int(current), dict(zip(names, records, strict=True)), generations

    def node_names(self) -> list[str]:
        return sorted(as_text(n) for n in self._r.smembers(self._keys.ledger_nodes))

    def node_state(self, names: Iterable[str]) -> dict[str, NodeState]:
        """The current state of the named nodes, read atomically (unknown nodes: not live)."""
        names = list(dict.fromkeys(names))
        if not names:
            return {}
        k = self._keys
        keys = [k.ledger_domain_gen, k.ledger_anti_affinity_gen, k.ledger_usage]
        for name in names:
            keys += self.node_keys(name)
        raw = self._scripts.get("cache_node_state")(keys=keys, args=names)
        out = {}
        for name, (flat, ports, pods, doms, gens, aagens, record) in zip(names, raw, strict=True):
            live, alloc, topo = _parse_node_hash(flat)
            usage = NodeUsage.parse(name, as_text(record))
            doms = [as_text(d) for d in doms]
            out[name] = NodeState(
                name=name,
                live=live,
                generation=usage.generation,
                allocatable=alloc,
                requested={k: v for k, v in usage.requested.items() if v},
                ports=_parse_ports(ports),
                domains=topo,
                domain_gens={d: int(g) for d, g in zip(doms, gens, strict=True)},
                anti_affinity_gens={d: int(g) for d, g in zip(doms, aagens, strict=True)},
                pods=tuple(sorted(as_text(p) for p in pods)),
                nonzero_extra=usage.nonzero_extra,
            )
        return out

    # --- pods ----------------------------------------------------------------------------
    def pod(self, pod_key: str) -> PodRecord | None:
        pipe = self._r.pipeline(transaction=True)
        pipe.hget(self._keys.ledger_pods, pod_key)
        pipe.zscore(self._keys.ledger_assumed, pod_key)
        raw, deadline = pipe.execute()
        return None if raw is None else decode_record(pod_key, raw, deadline)

    def pod_nodes(self, pod_keys: Sequence[str]) -> dict[str, str]:
        """ns/name -> node of the pods the ledger holds (assumed or bound), one HMGET."""
        if not pod_keys:
            return {}
        raws = self._r.hmget(self._keys.ledger_pods, list(pod_keys))
        out: dict[str, str] = {}
        for key, raw in zip(pod_keys, raws, strict=True):
            if raw is not None:
                out[key] = decode_record(key, raw, None).node
        return out

    def deleted_pods_on(self, node: str) -> list[str]:
        """The pods the ledger still holds on ``node`` (assumed or bound) that the store no
        longer has: no pod of the name, or one of another uid. Their deletions are in the
        store's stream and the handlers release them next (the consistency sweep, should a
        release ever be lost): until then their room is counted as taken. Sorted."""
        held = sorted(as_text(k) for k in self._r.smembers(self._keys.ledger_node_pods(node)))
        if not held:
            return []
        pipe = self._r.pipeline(transaction=False)
        pipe.hmget(self._keys.ledger_pods, held)
        pipe.hmget(self._keys.store_meta("Pod"), held)
        records, metas = pipe.execute()
        return [
            key
            for key, raw, meta in zip(held, records, metas, strict=True)
            if raw is not None and outlived_its_pod(key, raw, meta)
        ]

    def assumed_pods(self) -> dict[str, int]:
        """ns/name -> assume deadline (ms)."""
        entries = cast(
            list[tuple[Any, float]],
            self._r.zrange(self._keys.ledger_assumed, 0, -1, withscores=True),
        )
        return {as_text(key): int(deadline) for key, deadline in entries}

    def anti_affinity_pods(self) -> dict[str, str]:
        """Assumed and bound pods carrying required anti-affinity terms: ns/name -> node.
        A worker rejected for an anti-affinity generation change reads these (and the pod
        objects from the store) to bring its snapshot up to date."""
        aapods = self._r.hgetall(self._keys.ledger_anti_affinity_pods)
        return {as_text(k): as_text(v) for k, v in aapods.items()}

    # --- consistency ---------------------------------------------------------------------
    def check_consistency(self) -> list[Difference]:
        """Where the ledger differs from the sum of its assumed + bound pods (empty = none)."""
        while True:
            try:
                return self._check_consistency_once()
            except redis.WatchError:
                continue

    def _check_consistency_once(self) -> list[Difference]:
        k = self._keys
        with self._r.pipeline(transaction=True) as pipe:
            pipe.watch(k.ledger_nodes)
            names = sorted(as_text(n) for n in pipe.smembers(k.ledger_nodes))
            pipe.multi()
            for name in names:
                node_key, ports_key, pods_key = self.node_keys(name)
                pipe.hgetall(node_key)
                pipe.hgetall(ports_key)
                pipe.smembers(pods_key)
            pipe.hmget(k.ledger_usage, names or ["-"])  # (HMGET needs a field)
            pipe.hmget(k.ledger_capacity, names or ["-"])
            pipe.hgetall(k.ledger_pods)
            pipe.zrange(k.ledger_assumed, 0, -1)
            pipe.hgetall(k.ledger_anti_affinity_pods)
            *per_node, usages, capacities, raw_pods, assumed, aapods = pipe.execute()

        nodes = {
            name: (
                dict(per_node[3 * i]),
                usages[i],
                dict(per_node[3 * i + 1]),
                per_node[3 * i + 2],
                capacities[i],
            )
            for i, name in enumerate(names)
        }
        return ledger_differences(nodes, raw_pods, assumed, aapods)


def _pairs(flat: Sequence[Any]) -> Iterable[tuple[str, str]]:
    return ((as_text(flat[i]), as_text(flat[i + 1])) for i in range(0, len(flat), 2))


def _parse_node_hash(flat: Sequence[Any]) -> tuple[bool, dict[str, int], dict[str, str]]:
    """live, allocatable and topology of a node hash (its usage is in its usage record)."""
    live = False
    alloc: dict[str, int] = {}
    topo: dict[str, str] = {}
    for field, value in _pairs(flat):
        kind, _, name = field.partition(":")
        if field == "live":
            live = value == "1"
        elif kind == "alloc":
            alloc[name] = int(value)
        elif kind == "topo":
            topo[name] = value
    return live, alloc, topo


def _parse_ports(flat: Sequence[Any]) -> tuple[HostPort, ...]:
    used = [field for field, value in _pairs(flat) if field.count("|") == 2 and int(value) > 0]
    return decode_ports(",".join(sorted(used)))
