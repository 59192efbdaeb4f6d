"""The DESIGN invariant "the ledger equals the sum of requests of assumed + bound pods".

:func:`ledger_differences` compares what the ledger keeps per node (requested amounts,
host-port holders, pod membership) with what its pod records add up to. The data comes
from one atomic read (see ``Ledger.check_consistency``).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from distsched.cache.ledger_types import Difference, decode_record, encode_ports
from distsched.redis_text import as_text


def _node_fields(node_hash: Mapping[Any, Any]) -> tuple[bool, dict[str, int]]:
    live = False
    requested: dict[str, int] = {}
    for field, value in node_hash.items():
        field, value = as_text(field), as_text(value)
        if field == "live":
            live = value == "1"
        elif field.startswith("req:"):
            requested[field[4:]] = int(value)
    return live, requested


def ledger_differences(
    nodes: Mapping[str, tuple[Mapping[Any, Any], Mapping[Any, Any], Iterable[Any]]],
    raw_pods: Mapping[Any, Any],
    assumed: Iterable[Any],
    aapods: Mapping[Any, Any],
) -> list[Difference]:
    """``nodes``: name -> (node hash, ports hash, pod set); ``raw_pods``: the pods hash;
    ``assumed``: members of the assumed zset; ``aapods``: the anti-affinity pods hash."""
    records = {as_text(k): decode_record(as_text(k), v, None) for k, v in raw_pods.items()}
    by_node: dict[str, list[str]] = defaultdict(list)
    for key, rec in records.items():
        by_node[rec.node].append(key)

    diffs: list[Difference] = []
    for name, (node_hash, ports_hash, members) in sorted(nodes.items()):
        live, requested = _node_fields(node_hash)
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
