"""TaintToleration, after kube's taint_toleration_test."""

from __future__ import annotations

import pytest

from distsched.framework.interface import Handle
from distsched.framework.plugins import taint_toleration
from distsched.framework.status import Status
from distsched.model.objects import Taint, Toleration
from tests.framework.builders import make_node, make_pod, run_filter, run_score, snapshot_of


def plugin():
    return taint_toleration.new({}, Handle())


def filter_one(taints, tolerations):
    snapshot = snapshot_of([make_node("n1", taints=taints)])
    return run_filter(plugin(), make_pod(tolerations=tolerations), snapshot)["n1"]


DEDICATED_USER1 = Taint("dedicated", "NoSchedule", "user1")


@pytest.mark.parametrize(
    ("name", "taints", "tolerations", "want"),
    [
        (
            "a pod having no tolerations can't be scheduled onto a node with nonempty taints",
            [DEDICATED_USER1],
            [],
            "node(s) had untolerated taint {dedicated: user1}",
        ),
        (
            "a pod tolerating the dedicated taint",
            [DEDICATED_USER1],
            [Toleration("dedicated", "Equal", "user1", "NoSchedule")],
            None,
        ),
        (
            "a pod tolerating another value can't be scheduled",
            [DEDICATED_USER1],
            [Toleration("dedicated", "Equal", "user2", "NoSchedule")],
            "node(s) had untolerated taint {dedicated: user1}",
        ),
        (
            "operator Exists tolerates any value",
            [Taint("foo", "NoSchedule", "bar")],
            [Toleration("foo", "Exists", "", "NoSchedule")],
            None,
        ),
        (
            "multiple tolerations cover multiple taints",
            [Taint("dedicated", "NoSchedule", "user2"), Taint("foo", "NoSchedule")],
            [
                Toleration("dedicated", "Equal", "user2", "NoSchedule"),
                Toleration("foo", "Exists", "", "NoSchedule"),
            ],
            None,
        ),
        (
            "matching key and value but another (non-empty) effect",
            [Taint("foo", "NoSchedule", "bar")],
            [Toleration("foo", "Equal", "bar", "PreferNoSchedule")],
            "node(s) had untolerated taint {foo: bar}",
        ),
        (
            "an empty toleration effect matches every effect",
            [Taint("foo", "NoSchedule", "bar")],
            [Toleration("foo", "Equal", "bar", "")],
            None,
        ),
        (
            "PreferNoSchedule taints never filter",
            [Taint("dedicated", "PreferNoSchedule", "user1")],
            [Toleration("dedicated", "Equal", "user2", "NoSchedule")],
            None,
        ),
        (
            "NoExecute taints filter",
            [Taint("evict", "NoExecute", "now")],
            [],
            "node(s) had untolerated taint {evict: now}",
        ),
        (
            "an empty key with Exists tolerates everything",
            [DEDICATED_USER1, Taint("evict", "NoExecute")],
            [Toleration("", "Exists")],
            None,
        ),
        (
            "the first untolerated taint in node order is reported",
            [
                Taint("a", "PreferNoSchedule"),
                Taint("b", "NoSchedule", "1"),
                Taint("c", "NoExecute", "2"),
            ],
            [],
            "node(s) had untolerated taint {b: 1}",
        ),
    ],
)
def test_filter(name, taints, tolerations, want):
    got = filter_one(taints, tolerations)
    assert got == (None if want is None else Status.unresolvable(want)), name


def test_filter_reports_each_nodes_first_untolerated_taint():
    a, b = Taint("a", "NoSchedule", "x"), Taint("b", "NoSchedule", "y")
    nodes = [
        make_node("n1", taints=[a]),
        make_node("n2", taints=[b]),
        make_node("n3", taints=[b, a]),
        make_node("n4", taints=[a, b]),
        make_node("n5"),
    ]
    got = run_filter(plugin(), make_pod(), snapshot_of(nodes))
    reason = taint_toleration.untolerated_reason
    assert got == {
        "n1": Status.unresolvable(reason(a)),
        "n2": Status.unresolvable(reason(b)),
        "n3": Status.unresolvable(reason(b)),
        "n4": Status.unresolvable(reason(a)),
        "n5": None,
    }


def test_filter_follows_taint_changes():
    snapshot = snapshot_of([make_node("n1")])
    p = plugin()
    assert run_filter(p, make_pod(), snapshot)["n1"] is None
    snapshot.update_node(make_node("n1", taints=[DEDICATED_USER1]))
    assert run_filter(p, make_pod(), snapshot)["n1"] is not None
    snapshot.update_node(make_node("n1"))
    assert run_filter(p, make_pod(), snapshot)["n1"] is None


def prefer(key, value=""):
    return Taint(key, "PreferNoSchedule", value)


@pytest.mark.parametrize(
    ("name", "tolerations", "node_taints", "want"),
    [
        (
            "node with taints tolerated by the pod scores higher",
            [Toleration("foo", "Equal", "bar", "PreferNoSchedule")],
            {"n1": [prefer("foo", "bar")], "n2": [prefer("foo", "blah")]},
            {"n1": 100, "n2": 0},
        ),
        (
            "all taints tolerated: equal scores",
            [
                Toleration("foo", "Equal", "bar", "PreferNoSchedule"),
                Toleration("cpu-type", "Equal", "arm64", "PreferNoSchedule"),
            ],
            {
                "n1": [],
                "n2": [prefer("foo", "bar")],
                "n3": [prefer("foo", "bar"), prefer("cpu-type", "arm64")],
            },
            {"n1": 100, "n2": 100, "n3": 100},
        ),
        (
            "taints with other effects are ignored",
            [Toleration("foo", "Equal", "bar", "PreferNoSchedule")],
            {"n1": [Taint("cpu-type", "NoSchedule", "arm64")], "n2": [prefer("cpu-type", "arm64")]},
            {"n1": 100, "n2": 0},
        ),
        (
            "no tolerations: fewer intolerable taints score higher",
            [],
            {
                "n1": [],
                "n2": [prefer("cpu-type", "arm64")],
                "n3": [prefer("foo", "bar"), prefer("cpu-type", "arm64")],
            },
            {"n1": 100, "n2": 50, "n3": 0},
        ),
        (
            "a NoSchedule toleration does not tolerate PreferNoSchedule",
            [Toleration("foo", "Equal", "bar", "NoSchedule")],
            {"n1": [prefer("foo", "bar")], "n2": []},
            {"n1": 0, "n2": 100},
        ),
    ],
)
def test_score(name, tolerations, node_taints, want):
    nodes = [make_node(n, taints=t) for n, t in node_taints.items()]
    got = run_score(plugin(), make_pod(tolerations=tolerations), snapshot_of(nodes))
    assert got == want, name
