"""NodeResourcesBalancedAllocation: (1 - std of the resource fractions) * 100."""

from __future__ import annotations

import pytest

from distsched.framework.interface import Handle, PluginArgsError
from distsched.framework.plugins import balanced_allocation
from tests.framework.builders import container, make_node, make_pod, run_score, snapshot_of

CPU_AND_MEMORY = [
    container("a", requests={"cpu": 1000, "memory": 2000}),
    container("b", requests={"cpu": 2000, "memory": 3000}),
]


def scores(incoming, nodes, present=(), **args):
    plugin = balanced_allocation.new(args, Handle())
    return run_score(plugin, incoming, snapshot_of(nodes, present))


def test_differently_sized_nodes():
    # n1: cpu 3000/4000 = 0.75, memory 5000/10000 = 0.5 -> std 0.125 -> 87
    # n2: cpu 3000/6000 = 0.5, memory 0.5 -> std 0 -> 100
    nodes = [make_node("n1", cpu=4000, memory=10000), make_node("n2", cpu=6000, memory=10000)]
    assert scores(make_pod(containers=CPU_AND_MEMORY), nodes) == {"n1": 87, "n2": 100}


def test_uses_real_requests_of_existing_pods():
    # n1 runs a cpu-only pod with no memory request at all: no 200Mi default here.
    # cpu (2000 + 3000)/8000 = 0.625, memory 5000/10000 = 0.5 -> std 0.0625 -> 93
    nodes = [make_node("n1", cpu=8000, memory=10000)]
    present = [make_pod("a", node_name="n1", requests={"cpu": 2000})]
    assert scores(make_pod(containers=CPU_AND_MEMORY), nodes, present) == {"n1": 93}


def test_fraction_capped_at_one():
    # cpu 6000/4000 -> 1, memory 5000/10000 = 0.5 -> std 0.25 -> 75
    nodes = [make_node("n1", cpu=4000, memory=10000)]
    incoming = make_pod(requests={"cpu": 6000, "memory": 5000})
    assert scores(incoming, nodes) == {"n1": 75}


def test_best_effort_pod_is_skipped():
    nodes = [make_node("n1")]
    assert scores(make_pod(), nodes) == {}


def test_three_resources_use_population_std():
    # cpu 0.5, memory 0.25, ephemeral-storage 0.75: mean 0.5, std sqrt(0.125/3) -> 79
    nodes = [make_node("n1", cpu=4000, memory=8000, extra={"ephemeral-storage": 4000})]
    incoming = make_pod(requests={"cpu": 2000, "memory": 2000, "ephemeral-storage": 3000})
    resources = [
        {"name": "cpu", "weight": 1},
        {"name": "memory", "weight": 1},
        {"name": "ephemeral-storage", "weight": 1},
    ]
    assert scores(incoming, nodes, resources=resources) == {"n1": 79}


def test_extended_resource_only_when_requested_and_present():
    resources = [
        {"name": "cpu", "weight": 1},
        {"name": "memory", "weight": 1},
        {"name": "example.com/gpu", "weight": 1},
    ]
    nodes = [
        make_node("n1", cpu=4000, memory=10000, extra={"example.com/gpu": 4}),
        make_node("n2", cpu=4000, memory=10000),
    ]
    # Not requested: cpu 0.75 / memory 0.5 on both -> 87.
    plain = make_pod(containers=CPU_AND_MEMORY)
    assert scores(plain, nodes, resources=resources) == {"n1": 87, "n2": 87}
    # Requested 1 of 4 on n1: fractions 0.75, 0.5, 0.25 -> std 0.2041 -> 79; n2 lacks it -> 87.
    gpu = make_pod(requests={"cpu": 3000, "memory": 5000, "example.com/gpu": 1})
    assert scores(gpu, nodes, resources=resources) == {"n1": 79, "n2": 87}


def test_bad_args():
    with pytest.raises(PluginArgsError) as info:
        balanced_allocation.new({"resources": [{"name": "cpu", "weight": 200}]}, Handle())
    assert info.value.field == "resources[0].weight"
