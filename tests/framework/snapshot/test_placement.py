"""PodPlacement: what placing a pod charges and tells, and pods following their node."""

from __future__ import annotations

from distsched.framework.podinfo import PodInfo
from distsched.framework.snapshot import CPU_COL, NodeTable, PodPlacement, Usage
from distsched.model.objects import Affinity, PodAffinity, PodAffinityTerm
from tests.framework.builders import make_node, make_pod

ANTI = Affinity(pod_anti_affinity=PodAffinity(required=(PodAffinityTerm("zone"),)))


def placement(*, from_ledger: bool) -> tuple[NodeTable, PodPlacement, list[tuple[int, str, int]]]:
    table = NodeTable(capacity=2)
    table.add(make_node("a"))
    pods = PodPlacement(table, None if from_ledger else Usage(table))
    told: list[tuple[int, str, int]] = []
    pods.pod_observers.append(lambda index, info, sign: told.append((index, info.key, sign)))
    return table, pods, told


def test_with_usage_from_the_ledger_placing_charges_nothing_but_feeds_the_lists() -> None:
    table, pods, told = placement(from_ledger=True)
    pods.add_pod(make_pod("p", node_name="a", requests={"cpu": 100}, affinity=ANTI))
    assert not table.requested.any()
    assert list(pods.pods_on(0)) == ["default/p"] and set(pods.pods_with_affinity) == {"default/p"}
    assert told == [(0, "default/p", 1)] and table.generation[0] == table.version


def test_pods_are_parked_with_their_node_and_charged_again_when_it_returns() -> None:
    table, pods, told = placement(from_ledger=False)
    pods.add_pod(make_pod("p", node_name="a", requests={"cpu": 100}))
    pods.defer_pod("default/q", "a", lambda: make_pod("q", node_name="a", requests={"cpu": 50}))
    assert table.requested[0, CPU_COL] == 100  # the deferred pod counts once parsed
    pods.node_removed(0, "a")
    assert not table.requested[0].any()  # refunded: the table may zero the slot
    assert pods.pod_node_index("default/p") is None and not pods.has_deferred
    assert told == [(0, "default/p", 1), (0, "default/p", -1)]
    table.remove("a")
    b = table.add(make_node("b"))
    pods.node_added(b, "b")  # not theirs: they stay parked
    assert pods.pods_on(b) == {}
    table.remove("b")
    index = table.add(make_node("a"))
    pods.node_added(index, "a")
    assert table.requested[index, CPU_COL] == 100 and pods.has_deferred
    assert [key for _, key, _ in told[2:]] == ["default/p"]
    assert [p.key for p in pods.pods_on(index).values()] == ["default/p", "default/q"]
    info = pods.pod_info("default/q")
    assert isinstance(info, PodInfo) and table.requested[index, CPU_COL] == 150
    assert told[-1] == (index, "default/q", 1)
