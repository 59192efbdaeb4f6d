"""NodeResourcesFit, table-driven after kube's noderesources fit/least/most/ratio tests."""

from __future__ import annotations

import pytest

from distsched.framework.interface import Handle, PluginArgsError
from distsched.framework.plugins import node_resources_fit
from distsched.framework.plugins.helpers.resource_allocation import broken_linear, parse_shape
from distsched.framework.status import Code, Status
from tests.framework.builders import (
    container,
    make_node,
    make_pod,
    run_filter,
    run_score,
    snapshot_of,
)

EXT_A = "example.com/aaa"
HUGE = "hugepages-2Mi"


def node(**extra: int):
    # kube's fit test node: 10 milli-cpu, 20 bytes memory, 32 pods, 5 of a few scalars.
    return make_node(
        "n1",
        cpu=10,
        memory=20,
        pods=32,
        extra={EXT_A: 5, HUGE: 5, "ephemeral-storage": 20, **extra},
    )


def pod(cpu: int = 0, mem: int = 0, *, name: str = "p", node_name: str = "", **kw):
    requests = {k: v for k, v in (("cpu", cpu), ("memory", mem)) if v}
    requests.update(kw.pop("requests", {}))
    return make_pod(name, requests=requests, node_name=node_name, **kw)


def existing(cpu: int, mem: int, **requests: int):
    return pod(cpu, mem, name=f"existing-{cpu}-{mem}", node_name="n1", requests=requests)


def fits(**args):
    return node_resources_fit.new(args, Handle())


INSUFFICIENT = Code.UNSCHEDULABLE


@pytest.mark.parametrize(
    ("name", "incoming", "present", "want"),
    [
        ("no resources requested always fits", pod(), [existing(10, 20)], None),
        (
            "too many resources fails",
            pod(1, 1),
            [existing(10, 20)],
            ("Insufficient cpu", "Insufficient memory"),
        ),
        (
            "too many resources fails due to init container cpu",
            pod(1, 1, init_containers=[container(requests={"cpu": 3, "memory": 1})]),
            [existing(8, 19)],
            ("Insufficient cpu",),
        ),
        (
            "too many resources fails due to highest init container cpu",
            pod(
                1,
                1,
                init_containers=[
                    container("i1", requests={"cpu": 3, "memory": 1}),
                    container("i2", requests={"cpu": 2, "memory": 1}),
                ],
            ),
            [existing(8, 19)],
            ("Insufficient cpu",),
        ),
        (
            "too many resources fails due to init container memory",
            pod(1, 1, init_containers=[container(requests={"cpu": 1, "memory": 3})]),
            [existing(9, 19)],
            ("Insufficient memory",),
        ),
        (
            "init container fits because it's the max, not sum, of containers and init containers",
            pod(1, 1, init_containers=[container(requests={"cpu": 1, "memory": 1})]),
            [existing(9, 19)],
            None,
        ),
        ("both resources fit", pod(1, 1), [existing(5, 5)], None),
        ("one resource memory fits", pod(2, 1), [existing(9, 5)], ("Insufficient cpu",)),
        ("one resource cpu fits", pod(1, 2), [existing(5, 19)], ("Insufficient memory",)),
        ("equal edge case", pod(5, 1), [existing(5, 19)], None),
        ("extended resource fits", pod(requests={EXT_A: 1}), [existing(0, 0)], None),
        (
            "extended resource capacity enforced",
            pod(requests={EXT_A: 10}),
            [existing(0, 0)],
            (f"Insufficient {EXT_A}",),
        ),
        (
            "extended resource allocatable enforced",
            pod(requests={EXT_A: 1}),
            [existing(0, 0, **{EXT_A: 5})],
            (f"Insufficient {EXT_A}",),
        ),
        (
            "unknown extended resource is never satisfied",
            pod(requests={"example.com/bbb": 1}),
            [],
            ("Insufficient example.com/bbb",),
        ),
        (
            "hugepages enforced",
            pod(requests={HUGE: 10}),
            [existing(0, 0)],
            (f"Insufficient {HUGE}",),
        ),
        (
            "requests + overhead does not fit for cpu",
            pod(1, 1, overhead={"cpu": 5, "memory": 1}),
            [existing(5, 5)],
            ("Insufficient cpu",),
        ),
        (
            "requests + overhead fits",
            pod(1, 1, overhead={"cpu": 4, "memory": 14}),
            [existing(5, 5)],
            None,
        ),
        (
            "requests + overhead does not fit for memory",
            pod(1, 1, overhead={"cpu": 1, "memory": 15}),
            [existing(5, 5)],
            ("Insufficient memory",),
        ),
        (
            "ephemeral local storage request exceeds allocatable",
            pod(requests={"ephemeral-storage": 25}),
            [],
            ("Insufficient ephemeral-storage",),
        ),
        (
            "ephemeral local storage is enough",
            pod(requests={"ephemeral-storage": 10}),
            [existing(0, 0, **{"ephemeral-storage": 10})],
            None,
        ),
    ],
)
def test_filter(name, incoming, present, want):
    snapshot = snapshot_of([node()], present)
    got = run_filter(fits(), incoming, snapshot)["n1"]
    if want is None:
        assert got is None, name
    else:
        assert got == Status(INSUFFICIENT, *want), name


def test_too_many_pods():
    snapshot = snapshot_of([make_node("n1", pods=1)], [make_pod("a", node_name="n1")])
    assert run_filter(fits(), make_pod("b"), snapshot)["n1"] == Status(
        INSUFFICIENT, "Too many pods"
    )


def test_too_many_pods_and_resources_reports_both():
    snapshot = snapshot_of(
        [make_node("n1", cpu=10, pods=1)], [make_pod("a", node_name="n1", requests={"cpu": 10})]
    )
    got = run_filter(fits(), make_pod("b", requests={"cpu": 1}), snapshot)["n1"]
    assert got == Status(INSUFFICIENT, "Too many pods", "Insufficient cpu")


@pytest.mark.parametrize(
    ("args", "want"),
    [
        ({"ignoredResources": [EXT_A]}, None),
        ({"ignoredResourceGroups": ["example.com"]}, None),
        ({"ignoredResourceGroups": ["other.com"]}, (f"Insufficient {EXT_A}",)),
    ],
)
def test_ignored_extended_resources(args, want):
    snapshot = snapshot_of([node()])
    got = run_filter(fits(**args), pod(requests={EXT_A: 10}), snapshot)["n1"]
    assert got == (None if want is None else Status(INSUFFICIENT, *want))


def test_ignored_resources_never_cover_standard_ones():
    snapshot = snapshot_of([node()])
    got = run_filter(fits(ignoredResources=["cpu"]), pod(100, 1), snapshot)["n1"]
    assert got == Status(INSUFFICIENT, "Insufficient cpu")


def test_filter_sees_pods_added_and_removed():
    snapshot = snapshot_of([node()])
    plugin = fits()
    snapshot.add_pod(existing(10, 0))
    assert run_filter(plugin, pod(1), snapshot)["n1"] == Status(INSUFFICIENT, "Insufficient cpu")
    snapshot.remove_pod("default/existing-10-0")
    assert run_filter(plugin, pod(1), snapshot)["n1"] is None


# ---------------------------------------------------------------------------- scoring
CPU_ONLY = [
    container("a", requests={"cpu": 1000, "memory": 0}),
    container("b", requests={"cpu": 2000, "memory": 0}),
]
CPU_AND_MEMORY = [
    container("a", requests={"cpu": 1000, "memory": 2000}),
    container("b", requests={"cpu": 2000, "memory": 3000}),
]


def scored(strategy: dict, incoming, nodes, present=()):
    plugin = fits(scoringStrategy=strategy)
    return run_score(plugin, incoming, snapshot_of(nodes, present))


def two_nodes(second_cpu: int = 6000):
    return [make_node("n1", cpu=4000, memory=10000), make_node("n2", cpu=second_cpu, memory=10000)]


def test_least_allocated_differently_sized_nodes():
    # n1: cpu (4000-3000)*100/4000 = 25, memory (10000-5000)*100/10000 = 50 -> 37
    # n2: cpu (6000-3000)*100/6000 = 50, memory 50 -> 50
    got = scored({"type": "LeastAllocated"}, make_pod(containers=CPU_AND_MEMORY), two_nodes())
    assert got == {"n1": 37, "n2": 50}


def test_least_allocated_uses_non_zero_requests_of_existing_pods():
    # n1 runs cpuOnly (explicit memory 0), n2 runs cpuAndMemory; both 10000m / 20000.
    # n1: cpu (10000-6000)*100/10000 = 40, memory (20000-5000)*100/20000 = 75 -> 57
    # n2: cpu 40, memory (20000-10000)*100/20000 = 50 -> 45
    nodes = [make_node("n1", cpu=10000, memory=20000), make_node("n2", cpu=10000, memory=20000)]
    present = [
        make_pod("a", node_name="n1", containers=CPU_ONLY),
        make_pod("b", node_name="n2", containers=CPU_AND_MEMORY),
    ]
    got = scored({}, make_pod(containers=CPU_AND_MEMORY), nodes, present)
    assert got == {"n1": 57, "n2": 45}


def test_least_allocated_defaults_for_request_less_pod():
    # A pod without requests counts 100m / 200Mi: cpu (4000-100)*100/4000 = 97,
    # memory (1Gi - 200Mi)*100/1Gi = 80 -> 88.
    nodes = [make_node("n1", cpu=4000, memory=1024 * 1024 * 1024)]
    assert scored({}, make_pod(), nodes) == {"n1": 88}


def test_least_allocated_over_capacity_scores_zero_for_that_resource():
    # cpu 6000 > 4000 -> 0; memory explicit 0 -> (10000-0)*100/10000 = 100 -> 50
    nodes = [make_node("n1", cpu=4000, memory=10000)]
    present = [make_pod("a", node_name="n1", containers=CPU_ONLY)]
    assert scored({}, make_pod(containers=CPU_ONLY), nodes, present) == {"n1": 50}


def test_least_allocated_zero_node_resources():
    nodes = [make_node("n1", cpu=0, memory=0), make_node("n2", cpu=0, memory=0)]
    assert scored({}, make_pod(containers=CPU_AND_MEMORY), nodes) == {"n1": 0, "n2": 0}


def test_least_allocated_weights():
    # cpu weight 3, memory weight 1: n1 (25*3 + 50)/4 = 31, n2 (50*3 + 50)/4 = 50
    strategy = {
        "type": "LeastAllocated",
        "resources": [{"name": "cpu", "weight": 3}, {"name": "memory", "weight": 1}],
    }
    got = scored(strategy, make_pod(containers=CPU_AND_MEMORY), two_nodes())
    assert got == {"n1": 31, "n2": 50}


def test_least_allocated_extended_resource_only_when_requested():
    strategy = {
        "resources": [
            {"name": "cpu", "weight": 1},
            {"name": "memory", "weight": 1},
            {"name": EXT_A, "weight": 2},
        ],
    }
    nodes = [make_node("n1", cpu=4000, memory=10000, extra={EXT_A: 4})]
    # Not requested: plain cpu/memory mean, 37.
    assert scored(strategy, make_pod(containers=CPU_AND_MEMORY), nodes) == {"n1": 37}
    # Requested 1 of 4: (25 + 50 + 75*2) / 4 = 56.
    with_ext = make_pod(containers=[container(requests={"cpu": 3000, "memory": 5000, EXT_A: 1})])
    assert scored(strategy, with_ext, nodes) == {"n1": 56}


def test_least_allocated_skips_resource_a_node_lacks():
    strategy = {"resources": [{"name": "cpu", "weight": 1}, {"name": EXT_A, "weight": 1}]}
    nodes = [
        make_node("n1", cpu=4000, memory=10000, extra={EXT_A: 2}),
        make_node("n2", cpu=4000, memory=10000),
    ]
    incoming = make_pod(containers=[container(requests={"cpu": 1000, EXT_A: 1})])
    # n1: (75 + 50) / 2 = 62; n2 lacks the resource: only cpu counts, 75.
    assert scored(strategy, incoming, nodes) == {"n1": 62, "n2": 75}


def test_most_allocated():
    # n1: cpu 3000*100/4000 = 75, memory 50 -> 62; n2: 50, 50 -> 50
    got = scored({"type": "MostAllocated"}, make_pod(containers=CPU_AND_MEMORY), two_nodes())
    assert got == {"n1": 62, "n2": 50}


def test_most_allocated_caps_over_capacity():
    # cpu 6000 on 4000 counts as 4000 -> 100; memory 0 -> 0 -> 50
    nodes = [make_node("n1", cpu=4000, memory=10000)]
    present = [make_pod("a", node_name="n1", containers=CPU_ONLY)]
    got = scored({"type": "MostAllocated"}, make_pod(containers=CPU_ONLY), nodes, present)
    assert got == {"n1": 50}


def test_requested_to_capacity_ratio_bin_packing_rounds_half_up():
    strategy = {
        "type": "RequestedToCapacityRatio",
        "requestedToCapacityRatio": {
            "shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]
        },
    }
    # n1: cpu 75, memory 50 -> round(62.5) = 63; n2: 50, 50 -> 50
    got = scored(strategy, make_pod(containers=CPU_AND_MEMORY), two_nodes())
    assert got == {"n1": 63, "n2": 50}


def test_requested_to_capacity_ratio_spreading_ignores_zero_scores():
    strategy = {
        "type": "RequestedToCapacityRatio",
        "requestedToCapacityRatio": {
            "shape": [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]
        },
    }
    # n1: cpu util 75 -> 25, memory 50 -> 50 -> round(37.5) = 38
    # n3 (3000m): cpu util 100 -> 0 (not counted), memory 50 -> 50
    nodes = [*two_nodes(), make_node("n3", cpu=3000, memory=10000)]
    got = scored(strategy, make_pod(containers=CPU_AND_MEMORY), nodes)
    assert got == {"n1": 38, "n2": 50, "n3": 50}


def test_broken_linear_truncates_like_go():
    import numpy as np

    shape = parse_shape(
        [
            {"utilization": 0, "score": 0},
            {"utilization": 30, "score": 10},
            {"utilization": 100, "score": 0},
        ],
        "shape",
    )
    got = broken_linear(shape, np.array([0, 15, 30, 50, 100], dtype=np.int64))
    # 50: 100 + (0 - 100) * 20 / 70 = 100 - 28 (Go truncates toward zero; floor gives 71)
    assert got.tolist() == [0, 50, 100, 72, 0]


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"scoringStrategy": {"type": "Nope"}}, "scoringStrategy.type"),
        ({"scoringStrategy": {"resources": []}}, "scoringStrategy.resources"),
        (
            {"scoringStrategy": {"resources": [{"name": "cpu", "weight": 0}]}},
            "scoringStrategy.resources[0].weight",
        ),
        (
            {"scoringStrategy": {"type": "RequestedToCapacityRatio"}},
            "scoringStrategy.requestedToCapacityRatio.shape",
        ),
        (
            {
                "scoringStrategy": {
                    "type": "RequestedToCapacityRatio",
                    "requestedToCapacityRatio": {
                        "shape": [{"utilization": 50, "score": 1}, {"utilization": 40, "score": 2}]
                    },
                }
            },
            "scoringStrategy.requestedToCapacityRatio.shape[1].utilization",
        ),
        ({"ignoredResourceGroups": ["a/b"]}, "ignoredResourceGroups[0]"),
        ({"unknown": 1}, "unknown"),
    ],
)
def test_bad_args(args, field):
    with pytest.raises(PluginArgsError) as info:
        fits(**args)
    assert info.value.field == field
