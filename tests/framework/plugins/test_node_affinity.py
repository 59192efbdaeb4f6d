"""NodeAffinity, after kube's node_affinity_test."""

from __future__ import annotations

import pytest

from distsched.framework.cycle_state import CycleState
from distsched.framework.interface import Handle, PluginArgsError
from distsched.framework.plugins import node_affinity
from distsched.framework.status import Code, Status
from distsched.model.nodeaffinity import pod_matches_node_selector_and_affinity
from distsched.model.objects import Affinity, NodeAffinity, NodeSelectorTerm
from tests.framework.builders import (
    make_node,
    make_pod,
    preferred_affinity,
    req,
    required_affinity,
    run_filter,
    run_score,
    snapshot_of,
)

MISMATCH = Status.unresolvable(node_affinity.ERR_REASON_POD)


def term(*reqs, fields=()):
    return NodeSelectorTerm(tuple(reqs), tuple(fields))


CASES = [
    ("no selector", {}, None, {"foo": "bar"}, True),
    ("nodeSelector matches", {"foo": "bar"}, None, {"foo": "bar", "baz": "x"}, True),
    ("nodeSelector label missing", {"foo": "bar"}, None, {}, False),
    ("nodeSelector value differs", {"foo": "bar"}, None, {"foo": "baz"}, False),
    (
        "In matches",
        {},
        required_affinity(term(req("foo", "In", "bar", "value2"))),
        {"foo": "bar"},
        True,
    ),
    (
        "In does not match",
        {},
        required_affinity(term(req("foo", "In", "x"))),
        {"foo": "bar"},
        False,
    ),
    ("In on a missing label", {}, required_affinity(term(req("foo", "In", "bar"))), {}, False),
    ("NotIn on a missing label", {}, required_affinity(term(req("foo", "NotIn", "bar"))), {}, True),
    (
        "NotIn excludes",
        {},
        required_affinity(term(req("foo", "NotIn", "bar"))),
        {"foo": "bar"},
        False,
    ),
    ("Gt matches", {}, required_affinity(term(req("kernel", "Gt", "0"))), {"kernel": "4"}, True),
    (
        "Gt on a non-integer label",
        {},
        required_affinity(term(req("kernel", "Gt", "0"))),
        {"kernel": "a"},
        False,
    ),
    ("Lt matches", {}, required_affinity(term(req("kernel", "Lt", "5"))), {"kernel": "-1"}, True),
    (
        "Gt with an invalid value matches nothing",
        {},
        required_affinity(term(req("kernel", "Gt", "x"))),
        {"kernel": "4"},
        False,
    ),
    ("Exists", {}, required_affinity(term(req("foo", "Exists"))), {"foo": ""}, True),
    (
        "DoesNotExist",
        {},
        required_affinity(term(req("foo", "DoesNotExist"))),
        {"foo": "bar"},
        False,
    ),
    (
        "requirements of a term are ANDed",
        {},
        required_affinity(term(req("foo", "Exists"), req("bar", "In", "x"))),
        {"foo": "1"},
        False,
    ),
    (
        "terms are ORed",
        {},
        required_affinity(term(req("foo", "In", "nope")), term(req("bar", "Exists"))),
        {"bar": "1"},
        True,
    ),
    (
        "an empty term list matches nothing",
        {},
        Affinity(node_affinity=NodeAffinity(required=())),
        {"foo": "bar"},
        False,
    ),
    ("an empty term matches nothing", {}, required_affinity(term()), {"foo": "bar"}, False),
    (
        "nodeSelector and affinity both required",
        {"foo": "bar"},
        required_affinity(term(req("zone", "In", "a"))),
        {"foo": "bar", "zone": "b"},
        False,
    ),
    (
        "nodeSelector and affinity both satisfied",
        {"foo": "bar"},
        required_affinity(term(req("zone", "In", "a"))),
        {"foo": "bar", "zone": "a"},
        True,
    ),
    (
        "only preferred affinity: no filtering",
        {},
        preferred_affinity((1, term(req("foo", "In", "x")))),
        {},
        True,
    ),
]


@pytest.mark.parametrize(("name", "selector", "affinity", "labels", "fits"), CASES)
def test_filter(name, selector, affinity, labels, fits):
    snapshot = snapshot_of([make_node("n1", labels=labels)])
    pod = make_pod(node_selector=selector, affinity=affinity)
    got = run_filter(node_affinity.new({}, Handle()), pod, snapshot)["n1"]
    assert got == (None if fits else MISMATCH), name
    # The one-node helper (queue pre-check) agrees with the vectorized filter.
    assert pod_matches_node_selector_and_affinity(pod, make_node("n1", labels=labels)) == fits


def test_match_fields_narrow_the_nodes_in_prefilter():
    snapshot = snapshot_of([make_node("n1"), make_node("n2"), make_node("n3")])
    pod = make_pod(affinity=required_affinity(term(fields=[req("metadata.name", "In", "n1")])))
    plugin = node_affinity.new({}, Handle())
    result, status = plugin.pre_filter(CycleState(), pod, snapshot)
    assert status is None and result is not None and result.node_names == {"n1"}
    got = run_filter(plugin, pod, snapshot)
    assert got == {"n1": None, "n2": MISMATCH, "n3": MISMATCH}


def test_match_fields_in_every_term_union():
    snapshot = snapshot_of([make_node("n1"), make_node("n2")])
    pod = make_pod(
        affinity=required_affinity(
            term(fields=[req("metadata.name", "In", "n1")]),
            term(fields=[req("metadata.name", "In", "n2")]),
        )
    )
    result, _ = node_affinity.new({}, Handle()).pre_filter(CycleState(), pod, snapshot)
    assert result is not None and result.node_names == {"n1", "n2"}


def test_a_term_without_match_fields_keeps_all_nodes():
    snapshot = snapshot_of([make_node("n1")])
    pod = make_pod(
        affinity=required_affinity(
            term(fields=[req("metadata.name", "In", "n1")]), term(req("foo", "Exists"))
        )
    )
    result, status = node_affinity.new({}, Handle()).pre_filter(CycleState(), pod, snapshot)
    assert result is None and status is None


def test_conflicting_match_fields_reject_in_prefilter():
    pod = make_pod(
        affinity=required_affinity(
            term(fields=[req("metadata.name", "In", "n1"), req("metadata.name", "In", "n2")])
        )
    )
    _, status = node_affinity.new({}, Handle()).pre_filter(CycleState(), pod, snapshot_of([]))
    assert status == Status.unresolvable(node_affinity.ERR_REASON_CONFLICT)


def test_pod_without_node_constraints_skips():
    _, status = node_affinity.new({}, Handle()).pre_filter(
        CycleState(), make_pod(), snapshot_of([])
    )
    assert status is not None and status.code == Code.SKIP


ADDED = {
    "addedAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["foo"]}]}
            ]
        }
    }
}


def test_added_affinity_is_enforced_first():
    nodes = [
        make_node("n1", labels={"zone": "foo", "x": "y"}),
        make_node("n2", labels={"zone": "bar", "x": "y"}),
        make_node("n3", labels={"zone": "foo"}),
    ]
    plugin = node_affinity.new(ADDED, Handle())
    got = run_filter(plugin, make_pod(node_selector={"x": "y"}), snapshot_of(nodes))
    assert got == {
        "n1": None,
        "n2": Status.unresolvable(node_affinity.ERR_REASON_ENFORCED),
        "n3": MISMATCH,
    }
    # Even a pod without constraints is subject to it (PreFilter must not skip).
    got = run_filter(plugin, make_pod(), snapshot_of(nodes))
    assert got["n2"] == Status.unresolvable(node_affinity.ERR_REASON_ENFORCED)


def test_score_sums_matching_weights_and_normalizes():
    affinity = preferred_affinity(
        (2, term(req("foo", "In", "bar"))),
        (4, term(req("key", "In", "value"))),
        (5, term(req("az", "In", "az1"))),
    )
    nodes = [
        make_node("m1", labels={"foo": "bar"}),
        make_node("m2", labels={"key": "value"}),
        make_node("m3", labels={"az": "az1", "foo": "bar"}),
        make_node("m4"),
    ]
    plugin = node_affinity.new({}, Handle())
    raw = run_score(plugin, make_pod(affinity=affinity), snapshot_of(nodes), normalize=False)
    assert raw == {"m1": 2, "m2": 4, "m3": 7, "m4": 0}
    got = run_score(plugin, make_pod(affinity=affinity), snapshot_of(nodes))
    assert got == {"m1": 28, "m2": 57, "m3": 100, "m4": 0}


def test_score_skips_without_preferences_and_uses_added_ones():
    nodes = [make_node("m1", labels={"zone": "a"}), make_node("m2")]
    assert run_score(node_affinity.new({}, Handle()), make_pod(), snapshot_of(nodes)) == {}
    args = {
        "addedAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 3,
                    "preference": {"matchExpressions": [{"key": "zone", "operator": "Exists"}]},
                }
            ]
        }
    }
    got = run_score(node_affinity.new(args, Handle()), make_pod(), snapshot_of(nodes))
    assert got == {"m1": 100, "m2": 0}


def test_filter_follows_label_changes():
    snapshot = snapshot_of([make_node("n1", labels={"foo": "bar"})])
    plugin = node_affinity.new({}, Handle())
    pod = make_pod(node_selector={"foo": "bar"})
    assert run_filter(plugin, pod, snapshot)["n1"] is None
    snapshot.update_node(make_node("n1", labels={"foo": "baz"}))
    assert run_filter(plugin, pod, snapshot)["n1"] == MISMATCH


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (
            {
                "addedAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}
                }
            },
            "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
        ),
        (
            {
                "addedAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "k", "operator": "Gt", "values": ["x"]}]}
                        ]
                    }
                }
            },
            "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
            ".matchExpressions[0]",
        ),
        (
            {"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 0}]}},
            "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight",
        ),
        ({"other": 1}, "other"),
    ],
)
def test_bad_args(args, field):
    with pytest.raises(PluginArgsError) as info:
        node_affinity.new(args, Handle())
    assert info.value.field == field
