"""Usage: charged pod by pod or mirrored from the ledger, and which of its writes are
changes of the node (a new generation) and which the caller's."""

from __future__ import annotations

from distsched.framework.podinfo import PodInfo
from distsched.framework.snapshot import CPU_COL, PODS_COL, NodeTable, Snapshot, Usage
from distsched.model import HostPort
from tests.framework.builders import host_port, make_node, make_pod

PORT = HostPort("0.0.0.0", "TCP", 80)


def table_and_usage() -> tuple[NodeTable, Usage, int]:
    table = NodeTable(capacity=2)
    index = table.add(make_node("a", cpu=1000))
    return table, Usage(table), index


def test_charge_and_refund_leave_nothing_and_bump_no_generation() -> None:
    table, usage, index = table_and_usage()
    info = PodInfo.of(make_pod(requests={"cpu": 100}, ports=[host_port("TCP/0.0.0.0/80")]))
    usage.charge(index, info, 1)
    assert table.requested[index, CPU_COL] == 100 and table.free[index, CPU_COL] == 900
    assert table.requested[index, PODS_COL] == 1 and usage.host_ports(index) == {PORT: 1}
    assert usage.port_conflict_slots(PORT) == {index}
    assert table.version == 0  # the caller touches the slot (placement does, once)
    usage.charge(index, info, -1)
    assert not table.requested[index].any() and not table.nonzero_requested[index].any()
    assert table.free[index, CPU_COL] == 1000
    assert usage.host_ports(index) == {} and usage.port_conflict_slots(PORT) == set()


def test_the_ledger_supersedes_what_the_worker_charged() -> None:
    table, usage, index = table_and_usage()
    info = PodInfo.of(make_pod(requests={"cpu": 100}, ports=[host_port("TCP/0.0.0.0/80")]))
    usage.add_usage(index, info)
    assert table.generation[index] == table.version == 1
    usage.set_usage(index, {"cpu": 250, "pods": 2}, [("0.0.0.0", "UDP", 53)], (100, 0))
    assert table.requested[index, CPU_COL] == 250 and table.requested[index, PODS_COL] == 2
    assert table.nonzero_requested[index].tolist()[0] == 350
    assert usage.host_ports(index) == {HostPort("0.0.0.0", "UDP", 53): 1}
    assert usage.port_conflict_slots(PORT) == set()
    assert table.generation[index] == table.version == 2


def test_a_node_in_a_reused_slot_holds_no_host_port_of_the_removed_one() -> None:
    snapshot = Snapshot(capacity=4, usage_from_ledger=True)
    gone = snapshot.add_node(make_node("gone"))
    snapshot.set_usage(gone, {"pods": 1}, [("0.0.0.0", "TCP", 80)])
    snapshot.remove_node("gone")
    assert snapshot.port_conflict_slots(PORT) == set()
    new = snapshot.add_node(make_node("new"))  # no usage from the ledger yet
    assert new == gone
    assert snapshot.host_ports(new) == {} and snapshot.port_conflict_slots(PORT) == set()
