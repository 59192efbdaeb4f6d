"""LedgerReader, the ledger's read side: standalone, it sees everything and writes nothing."""

from __future__ import annotations

import redis

from distsched.cache.ledger_reads import LedgerReader
from distsched.cache.ledger_types import domain, parse_usage_tail
from distsched.clock import FakeClock
from distsched.keys import Keys
from distsched.lua import ScriptSet
from distsched.model import LABEL_HOSTNAME
from tests.cache.ledger_helpers import (
    SMALL,
    ZONE,
    add_bound,
    decision,
    make_ledger,
    pop_like_queue,
    snapshot_db,
)


def test_the_reader_sees_every_part_of_the_ledger_and_writes_nothing(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    ledger = make_ledger(r, keys, clock)
    ledger.set_node("n1", SMALL, {ZONE: "a"})
    ledger.set_node("n2", SMALL, {ZONE: "a"})
    pop_like_queue(r, keys, "ns/p1", epoch=1, now_ms=clock.now_ms())
    anti = decision("ns/p1", "n1", ports=[("", "", 80)], anti_affinity_keys=[ZONE])
    assert [type(x).__name__ for x in ledger.reserve_batch([anti])] == ["Reserved"]
    assert add_bound(ledger, r, keys, "ns/b1", "uid-b1", "n2", {"cpu": 200}) == "added"
    reader = LedgerReader(r, keys, ScriptSet(r))
    before = snapshot_db(r)

    version, usages, generations = reader.changes_since(0, [domain(ZONE, "a")])
    assert version > 0 and set(usages) == {"n1", "n2"}
    assert usages["n2"].requested["cpu"] == 200
    assert generations.anti_affinity[domain(ZONE, "a")] == 1  # the one anti-affinity pod
    assert reader.changes_since(version)[1] == {}
    # the same read, the records as the ledger wrote them: "<gen>|<ports>|<requests>"
    same_version, records, same_generations = reader.usage_records_since(0, [domain(ZONE, "a")])
    assert (same_version, same_generations) == (version, generations)
    assert set(records) == {"n1", "n2"}
    for name, record in records.items():
        gen, _, tail = record.partition("|")
        parsed = parse_usage_tail(tail)
        assert int(gen) == usages[name].generation
        assert parsed.requested == usages[name].requested
        assert parsed.host_ports == usages[name].host_ports
        assert (parsed.host_ports > 0) == (name == "n1")  # n1 holds the port
        assert parsed.nonzero_extra == usages[name].nonzero_extra
    assert reader.usage_records_since(version)[1] == {}
    assert reader.node_names() == ["n1", "n2"]
    states = reader.node_state(["n1", "gone"])
    assert states["n1"].live and states["n1"].pods == ("ns/p1",)
    assert states["n1"].ports == (("0.0.0.0", "TCP", 80),)
    assert states["n1"].domain_gens[domain(ZONE, "a")] == generations.checks[domain(ZONE, "a")]
    assert domain(LABEL_HOSTNAME, "n1") in states["n1"].domain_gens
    assert not states["gone"].live
    record = reader.pod("ns/p1")
    assert record is not None and record.node == "n1" and record.deadline_ms is not None
    assert reader.pod_nodes(["ns/p1", "ns/b1", "ns/none"]) == {"ns/p1": "n1", "ns/b1": "n2"}
    assert list(reader.assumed_pods()) == ["ns/p1"]
    assert reader.anti_affinity_pods() == {"ns/p1": "n1"}
    assert reader.check_consistency() == []
    assert reader.node_keys("n1") == ledger.node_keys("n1")
    assert reader.feed_keys == ledger.feed_keys

    assert snapshot_db(r) == before


def test_deleted_pods_on_a_node_are_those_the_store_no_longer_has_under_their_uid(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    ledger = make_ledger(r, keys, clock)
    ledger.set_node("n1", SMALL)
    ledger.set_node("n2", SMALL)
    for name in ("stays", "deleted", "recreated"):
        assert add_bound(ledger, r, keys, f"ns/{name}", f"uid-{name}", "n1", {"cpu": 100}) == (
            "added"
        )
    assert add_bound(ledger, r, keys, "ns/elsewhere", "uid-e", "n2", {"cpu": 100}) == "added"
    assert ledger.deleted_pods_on("n1") == []
    r.hdel(keys.store_meta("Pod"), "ns/deleted", "ns/elsewhere")
    r.hset(keys.store_meta("Pod"), "ns/recreated", "9|||uid-new")  # same name, new pod
    assert ledger.deleted_pods_on("n1") == ["ns/deleted", "ns/recreated"]
    assert ledger.deleted_pods_on("n2") == ["ns/elsewhere"]
    assert ledger.deleted_pods_on("unknown") == []
    ledger.pods_deleted([("ns/deleted", "uid-deleted"), ("ns/recreated", "uid-recreated")])
    assert ledger.deleted_pods_on("n1") == []
