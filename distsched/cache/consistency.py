"""The DESIGN invariant "the ledger equals the sum of requests of assumed + bound pods".

:func:`ledger_differences` compares what the ledger keeps per node (requested amounts and
the count of host-port fields in its usage record, host-port holders, pod membership) with
what its pod records add up to, and each node's copy of its allocatable in cache:capacity
with its hash. The data comes from one atomic read (see
``Ledger.check_consistency``).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from distsched.cache.ledger_types import (
    Difference,
    decode_record,
    decode_requests,
    encode_ports,
)
from distsched.redis_text import as_text


def _usage_fields(usage: Any) -> tuple[int, dict[str, int]]:
    """Host-port fields in use and requested amounts of a usage record (none: nothing)."""
    if usage is None:
        return 0, {}
    _, ports, items = as_text(usage).split("|", 2)
    return int(ports), {res: amt for res, amt in decode_requests(items).items() if amt}


def _capacity_difference(
    name: str, node_hash: Mapping[Any, Any], live: bool, capacity: Any
) -> list[Difference]:
    """The node's entry in cache:capacity against its hash: a live node's allocatable, or
    none for a ghost. A live node without one is not a difference: a ledger written
    before cache:capacity existed has none until its node is set again (reservations read
    the hash meanwhile)."""
    if capacity is None:
        return []
    if not live:
        return [Difference(name, "capacity of a node that is not live", 1, 0)]
    alloc = ((as_text(f), as_text(v)) for f, v in node_hash.items())
    want = ",".join(sorted(f"{f[6:]}={v}" for f, v in alloc if f.startswith("alloc:")))
    if as_text(capacity) != want:
        return [Difference(name, f"capacity {as_text(capacity)!r}, allocatable {want!r}", 1, 0)]
    return []


def ledger_differences(
    nodes: Mapping[str, tuple[Mapping[Any, Any], Any, Mapping[Any, Any], Iterable[Any], Any]],
    raw_pods: Mapping[Any, Any],
    assumed: Iterable[Any],
    aapods: Mapping[Any, Any],
) -> list[Difference]:
    """``nodes``: name -> (node hash, usage record or None, ports hash, pod set, entry in
    cache:capacity or None); ``raw_pods``: the pods hash; ``assumed``: members of the
    assumed zset; ``aapods``: the anti-affinity pods hash."""
    records = {as_text(k): decode_record(as_text(k), v, None) for k, v in raw_pods.items()}
    by_node: dict[str, list[str]] = defaultdict(list)
    for key, rec in records.items():
        by_node[rec.node].append(key)

    diffs: list[Difference] = []
    for name, (node_hash, usage, ports_hash, members, capacity) in sorted(nodes.items()):
        live = any(as_text(f) == "live" and as_text(v) == "1" for f, v in node_hash.items())
        diffs += _capacity_difference(name, node_hash, live, capacity)
        port_fields, requested = _usage_fields(usage)
        want_req: Counter[str] = Counter()
        want_ports: Counter[str] = Counter()
        for key in by_node.get(name, []):
            rec = records[key]
            want_req.update(rec.requests)
            for port in rec.ports:
                want_ports[f"{port.protocol}|{port.port}"] += 1
                want_ports[encode_ports([port])] += 1
        for res in sorted(set(requested) | set(want_req)):
            if requested.get(res, 0) != want_req[res]:
                diffs.append(Difference(name, res, requested.get(res, 0), want_req[res]))
        have_ports = {as_text(k): int(v) for k, v in ports_hash.items()}
        for field in sorted(set(have_ports) | set(want_ports)):
            have = have_ports.get(field, 0)
            if have != want_ports[field]:
                diffs.append(Difference(name, f"port {field}", have, want_ports[field]))
        if port_fields >= 0 and port_fields != len(have_ports):
            diffs.append(Difference(name, "host-port fields in use", port_fields, len(have_ports)))
        have_members = {as_text(m) for m in members}
        want_members = set(by_node.get(name, []))
        for key in sorted(have_members ^ want_members):
            diffs.append(
                Difference(
                    name, f"member {key}", int(key in have_members), int(key in want_members)
                )
            )
        if not live and not have_members:
            diffs.append(Difference(name, "ghost node without pods", 1, 0))

    for name in sorted(set(by_node) - set(nodes)):
        for key in by_node[name]:
            diffs.append(Difference(name, f"member {key}", 0, 1))
    for key in sorted({as_text(k) for k in assumed} - set(records)):
        diffs.append(Difference("", f"assumed {key}", 1, 0))
    want_aa = {key: rec.node for key, rec in records.items() if rec.anti_affinity_keys}
    have_aa = {as_text(k): as_text(v) for k, v in aapods.items()}
    for key in sorted(set(want_aa) | set(have_aa)):
        if want_aa.get(key) != have_aa.get(key):
            node = want_aa.get(key) or have_aa.get(key) or ""
            diffs.append(
                Difference(node, f"anti-affinity {key}", int(key in have_aa), int(key in want_aa))
            )
    return diffs
