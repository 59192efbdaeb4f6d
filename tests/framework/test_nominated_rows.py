"""NominatedRows, the nominations kept as arrays from the nominator's journal, against
the definition it replaces: kube's addGENominatedPods selection walked node by node
(``nominated_to_add``), less the pods the snapshot holds already."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distsched.framework.nominated_rows import NominatedRows
from distsched.framework.nominator import PodNominator, nominated_to_add
from distsched.framework.what_if import _unplaced
from tests.framework.builders import make_node, make_pod, snapshot_of

NODES = [f"n{i}" for i in range(5)]
PODS = [f"p{i}" for i in range(4)]


def nominated_by_node(nominator, pod, priority):
    """kube's selection for every node that has nominated pods (those with none left out)."""
    by_node = {
        name: nominated_to_add(nominator, pod, priority, name) for name in nominator.node_names()
    }
    return {name: infos for name, infos in by_node.items() if infos}


def by_definition(nominator, snapshot, pod, priority):
    found = _unplaced(
        snapshot,
        [
            (snapshot.get_index(name), pods)
            for name, pods in nominated_by_node(nominator, pod, priority).items()
        ],
    )
    return _as_counter(found)


def _as_counter(found):
    if found is None:
        return Counter()
    slots, rows = found
    return Counter((int(s), tuple(int(x) for x in r)) for s, r in zip(slots, rows, strict=True))


def nominated_pod(name, node, priority, cpu, *, uid=None, gpu=0):
    requests = {"cpu": cpu, **({"example.com/gpu": gpu} if gpu else {})}
    p = make_pod(name, requests=requests, priority=priority, nominated=node)
    if uid is not None:
        p = replace(p, metadata=replace(p.metadata, uid=uid))
    return p


nominate = st.tuples(
    st.just("nominate"),
    st.sampled_from(PODS),
    st.sampled_from(NODES),
    st.integers(0, 3),
    st.sampled_from([100, 200]),
    st.sampled_from([False] * 7 + [True]),  # a new resource column, now and then
)
ask = st.tuples(st.just("ask"), st.sampled_from([*PODS, "other"]), st.integers(0, 3))
# Mostly nominations and questions, so that the rows live across many changes; the
# layout changes (nodes, a column) that start the rows again are rarer.
step = st.one_of(
    nominate,
    ask,
    nominate,
    ask,
    st.tuples(st.just("forget"), st.sampled_from(PODS)),
    st.tuples(st.just("place"), st.sampled_from(PODS), st.sampled_from(NODES[:4])),
    st.tuples(st.just("unplace"), st.sampled_from(PODS)),
    st.tuples(st.just("node"), st.sampled_from(NODES), st.integers(0, 2)),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, max_size=50))
def test_rows_agree_with_the_nominations_walked_node_by_node(steps):
    nominator = PodNominator()
    snapshot = snapshot_of([make_node(name, cpu=4000) for name in NODES[:3]])
    for kind, *args in steps:
        if kind == "nominate":
            name, node, priority, cpu, gpu = args
            nominator.add(nominated_pod(name, node, priority, cpu, gpu=int(gpu)))
        elif kind == "forget":
            nominator.delete(f"default/{args[0]}")
        elif kind == "place":
            name, node = args
            if snapshot.table.get_index(node) is not None:
                snapshot.add_pod(make_pod(name, requests={"cpu": 10}, node_name=node))
        elif kind == "unplace":
            snapshot.remove_pod(f"default/{args[0]}")
        elif kind == "node":
            name, roll = args
            if roll:
                continue
            if snapshot.table.get_index(name) is None:
                snapshot.add_node(make_node(name, cpu=4000))
            elif snapshot.num_nodes > 1:
                snapshot.remove_node(name)
        else:
            name, priority = args
            pod = make_pod(name, requests={"cpu": 50})
            rows = NominatedRows.current(nominator, snapshot)
            got = _as_counter(rows.select(snapshot, pod, priority))
            assert got == by_definition(nominator, snapshot, pod, priority)
            by_node = nominated_by_node(nominator, pod, priority)
            want = {
                snapshot.get_index(name): sorted(map(id, infos))
                for name, infos in by_node.items()
                if snapshot.get_index(name) is not None
            }
            by_slot = rows.by_slot(pod, priority)
            assert {slot: sorted(map(id, infos)) for slot, infos in by_slot.items()} == want


def test_the_pod_itself_and_any_pod_with_its_uid_are_left_out():
    nominator = PodNominator()
    snapshot = snapshot_of([make_node("n1"), make_node("n2")])
    nominator.add(nominated_pod("a", "n1", 5, 100))
    nominator.add(nominated_pod("b", "n2", 5, 200, uid="uid-p"))
    nominator.add(nominated_pod("c", "n2", 5, 300))
    rows = NominatedRows.current(nominator, snapshot)
    asking = make_pod("a", priority=5)
    asking = replace(asking, metadata=replace(asking.metadata, uid="uid-p"))
    slots, requested = rows.select(snapshot, asking, 5)
    assert sorted(slots.tolist()) == [snapshot.get_index("n2")]  # not a (itself), not b (uid)
    assert int(requested[0][0]) == 300


def test_a_nomination_counts_once_its_node_is_there_and_not_after_it_left():
    nominator = PodNominator()
    snapshot = snapshot_of([make_node("n1")])
    nominator.add(nominated_pod("a", "n2", 5, 100))
    asking = make_pod("p")
    assert NominatedRows.current(nominator, snapshot).select(snapshot, asking, 0) is None
    snapshot.add_node(make_node("n2"))
    slots, _ = NominatedRows.current(nominator, snapshot).select(snapshot, asking, 0)
    assert slots.tolist() == [snapshot.get_index("n2")]
    snapshot.remove_node("n2")
    assert NominatedRows.current(nominator, snapshot).select(snapshot, asking, 0) is None


def test_a_journal_dropped_before_it_was_read_reads_every_nomination_again(monkeypatch):
    from distsched.framework import nominator as nominator_module

    monkeypatch.setattr(nominator_module, "_JOURNAL_LENGTH", 4)
    nominator = PodNominator()
    snapshot = snapshot_of([make_node("n1"), make_node("n2")])
    nominator.add(nominated_pod("a", "n1", 5, 100))
    rows = NominatedRows.current(nominator, snapshot)
    for i in range(10):  # more changes than the journal keeps
        nominator.add(nominated_pod(f"x{i}", "n2", 5, 100))
        nominator.delete(f"default/x{i}")
    nominator.add(nominated_pod("b", "n2", 5, 200))
    nominator.delete("default/a")
    assert nominator.changed_since(rows.position) is None
    found = NominatedRows.current(nominator, snapshot).select(snapshot, make_pod("p"), 0)
    assert _as_counter(found) == by_definition(nominator, snapshot, make_pod("p"), 0)
    assert len(_as_counter(found)) == 1


def test_rows_grow_past_their_first_capacity_and_reuse_freed_ones():
    nominator = PodNominator()
    snapshot = snapshot_of([make_node("n1", cpu=400_000), make_node("n2", cpu=400_000)])
    asking = make_pod("p")
    for i in range(150):  # the arrays start with room for 64
        nominator.add(nominated_pod(f"x{i}", f"n{1 + i % 2}", 5, 100 + i))
        if i % 3 == 0:
            nominator.delete(f"default/x{i // 2}")
        rows = NominatedRows.current(nominator, snapshot)
        assert _as_counter(rows.select(snapshot, asking, 0)) == by_definition(
            nominator, snapshot, asking, 0
        )
    assert len(rows.keys) > 64
