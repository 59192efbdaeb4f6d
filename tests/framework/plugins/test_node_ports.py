"""NodePorts, the table of kube's node_ports_test (incl. 0.0.0.0 wildcard semantics)."""

from __future__ import annotations

import pytest

from distsched.framework.cycle_state import CycleState
from distsched.framework.interface import Handle
from distsched.framework.plugins import node_ports
from distsched.framework.status import Code, Status
from tests.framework.builders import host_port, make_node, make_pod, run_filter, snapshot_of

CONFLICT = Status(Code.UNSCHEDULABLE, node_ports.ERR_REASON)


def with_ports(name, *specs, node_name=""):
    return make_pod(name, ports=[host_port(s) for s in specs], node_name=node_name)


@pytest.mark.parametrize(
    ("name", "wanted", "used", "conflict"),
    [
        ("other port", ["UDP/127.0.0.1/8080"], ["UDP/127.0.0.1/9090"], False),
        ("same udp port", ["UDP/127.0.0.1/8080"], ["UDP/127.0.0.1/8080"], True),
        ("same tcp port", ["TCP/127.0.0.1/8080"], ["TCP/127.0.0.1/8080"], True),
        ("different host ip", ["TCP/127.0.0.1/8080"], ["TCP/127.0.0.2/8080"], False),
        ("different protocol", ["UDP/127.0.0.1/8080"], ["TCP/127.0.0.1/8080"], False),
        (
            "second udp port conflict",
            ["UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"],
            ["UDP/127.0.0.1/8080"],
            True,
        ),
        (
            "first tcp port conflict",
            ["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"],
            ["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081"],
            True,
        ),
        ("conflict due to 0.0.0.0 wanted", ["TCP/0.0.0.0/8001"], ["TCP/127.0.0.1/8001"], True),
        (
            "conflict due to 0.0.0.0 among wanted",
            ["TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"],
            ["TCP/127.0.0.1/8001"],
            True,
        ),
        ("conflict with 0.0.0.0 in use", ["TCP/127.0.0.1/8001"], ["TCP/0.0.0.0/8001"], True),
        (
            "different protocol than 0.0.0.0 in use",
            ["UDP/127.0.0.1/8001"],
            ["TCP/0.0.0.0/8001"],
            False,
        ),
        (
            "udp conflict with 0.0.0.0 in use",
            ["UDP/127.0.0.1/8001"],
            ["TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001"],
            True,
        ),
        ("empty host ip means 0.0.0.0", ["TCP//8001"], ["TCP/10.1.1.1/8001"], True),
    ],
)
def test_filter(name, wanted, used, conflict):
    snapshot = snapshot_of([make_node("m1")], [with_ports("existing", *used, node_name="m1")])
    got = run_filter(node_ports.new({}, Handle()), with_ports("p", *wanted), snapshot)["m1"]
    assert got == (CONFLICT if conflict else None), name


def test_pod_without_host_ports_skips():
    state = CycleState()
    _, status = node_ports.new({}, Handle()).pre_filter(state, make_pod(), snapshot_of([]))
    assert status is not None and status.code == Code.SKIP


def test_port_is_freed_when_the_pod_goes():
    snapshot = snapshot_of(
        [make_node("m1"), make_node("m2")],
        [
            with_ports("a", "TCP/0.0.0.0/80", node_name="m1"),
            with_ports("b", "TCP/0.0.0.0/80", node_name="m2"),
        ],
    )
    plugin = node_ports.new({}, Handle())
    incoming = with_ports("p", "TCP/10.0.0.1/80")
    assert run_filter(plugin, incoming, snapshot) == {"m1": CONFLICT, "m2": CONFLICT}
    snapshot.remove_pod("default/a")
    assert run_filter(plugin, incoming, snapshot) == {"m1": None, "m2": CONFLICT}
