"""Bench options: workload defaults, limits, and exit code 2 on bad input."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from distsched.bench.runner import BadInput, config_from_options
from distsched.bench.workloads import WORKLOADS, Names, Workload
from distsched.model import Node, Pod
from distsched.model.podgroups import PodGroup, group_of


def options(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "workload": "SchedulingBasic",
        "nodes": 100,
        "init_pods": None,
        "pods": 500,
        "workers": 2,
        "binders": 1,
        "rate": 0.0,
        "external": False,
    }
    return {**base, **overrides}


def test_workload_defaults_for_init_pods() -> None:
    assert config_from_options(options()).init_pods == 20
    assert config_from_options(options(workload="PreemptionBasic", pods=100)).init_pods == 400
    assert config_from_options(options(workload="Unschedulable")).init_pods == 200
    assert config_from_options(options(init_pods=0)).init_pods == 0


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"workload": "Nope"}, "unknown"),
        ({"nodes": 0}, "--nodes"),
        ({"workers": 0}, "--workers"),
        ({"rate": -1.0}, "--rate"),
        ({"workload": "SchedulingPodAntiAffinity", "init_pods": 50, "pods": 60}, "at most 50"),
        ({"workload": "PreemptionBasic", "pods": 101}, "at most 100"),
    ],
)
def test_bad_options(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(BadInput, match=message):
        config_from_options(options(**overrides))


def test_bad_workload_exits_2_with_one_line() -> None:
    cmd = [sys.executable, "-m", "distsched", "bench", "--workload", "Nope", "--nodes", "1"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "unknown; one of SchedulingBasic" in proc.stderr


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_workload_objects_are_valid_kubernetes(name: str) -> None:
    workload, names = WORKLOADS[name], Names("x-")
    for i, obj in enumerate(workload.nodes(names, 3)):
        labels = Node.from_dict(obj).metadata.labels
        assert labels["kubernetes.io/hostname"] == names.node(i)
        assert labels.get("topology.kubernetes.io/zone") == (
            workload.zones[i % len(workload.zones)] if workload.zones else None
        )
    if workload.gangs:
        _check_gang_objects(workload, names)
        return
    pods = workload.init_pods(names, 2) + workload.measured_pods(names, 0, 2)
    keys = {Pod.from_dict(obj).key for obj in pods}
    assert keys == {
        names.init_key(0),
        names.init_key(1),
        names.measured_key(0),
        names.measured_key(1),
    }


def _check_gang_objects(workload: Workload, names: Names) -> None:
    """Every measured pod belongs to one of the setup PodGroups, each has its minimum."""
    setup = workload.setup_objects(names, 3, 6)
    groups = {g.key: g for g in (PodGroup.from_dict(o) for o in setup if o["kind"] == "PodGroup")}
    members: dict[str, int] = dict.fromkeys(groups, 0)
    for obj in workload.measured_pods(names, 0, 6):
        pod = Pod.from_dict(obj)
        assert pod.metadata.namespace == names.gang_ns
        members[group_of(pod)] += 1
    assert all(members[key] >= group.min_member for key, group in groups.items())


def test_gang_workloads() -> None:
    """GangScheduling is upstream's gangscheduling config: v1alpha2 PodGroups gang-<k> of
    minCount 3 made before the pods, test-gang-scheduling-<i> in gang-<i // 3>, requests
    only; GangContention: two gangs of one whole-node pod per node."""
    gang = WORKLOADS["GangScheduling"]
    setup = gang.setup_objects(Names(), 5000, 3000)
    assert setup[0] == {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gang-0"}}
    assert len(setup) == 1 + 1000
    assert setup[-1]["metadata"] == {"name": "gang-999", "namespace": "gang-0"}
    assert setup[-1]["spec"] == {"schedulingPolicy": {"gang": {"minCount": 3}}}
    pod = gang.measured_pods(Names(), 0, 3000)[2999]
    assert pod["metadata"] == {"name": "test-gang-scheduling-2999", "namespace": "gang-0"}
    assert pod["spec"]["schedulingGroup"] == {"podGroupName": "gang-999"}
    container = pod["spec"]["containers"][0]
    assert container["image"] == "registry.k8s.io/pause:3.10.1"
    assert container["resources"] == {"requests": {"cpu": "100m", "memory": "100Mi"}}
    config = config_from_options(options(workload="GangScheduling", nodes=5000, pods=3000))
    assert (config.init_pods, config.pods) == (0, 3000)
    contention = WORKLOADS["GangContention"]
    assert contention.expected_outcome == "one-gang-bound"
    assert contention.expected_bound(10, 20) == 10
    groups = [o for o in contention.setup_objects(Names(), 10, 20) if o["kind"] == "PodGroup"]
    assert [PodGroup.from_dict(g).min_member for g in groups] == [10, 10]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"workload": "GangScheduling", "pods": 10}, "multiple of 3"),
        ({"workload": "GangContention", "nodes": 10, "pods": 30}, "2 x --nodes"),
    ],
)
def test_bad_gang_counts(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(BadInput, match=message):
        config_from_options(options(**overrides))


def _spread_skew(workload_name: str) -> int:
    pod = WORKLOADS[workload_name].measured_pods(Names(), 0, 1)[0]
    return int(pod["spec"]["topologySpreadConstraints"][0]["maxSkew"])


def test_upstream_named_workloads_are_scheduler_perfs() -> None:
    """The workloads named as upstream's use scheduler_perf's templates and zone layout."""
    zones = {name: w.zones for name, w in WORKLOADS.items()}
    assert zones["SchedulingBasic"] == zones["SchedulingPodAntiAffinity"] == ()
    assert zones["SchedulingPodAffinity"] == zones["SchedulingNodeAffinity"] == ("zone1",)
    assert zones["TopologySpreading"] == ("moon-1", "moon-2", "moon-3")
    assert _spread_skew("TopologySpreading") == 5
    assert _spread_skew("TopologySpreadingMaxSkew1") == 1
    affinity = WORKLOADS["SchedulingNodeAffinity"].measured_pods(Names(), 0, 1)[0]
    term = affinity["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert term["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["zone1", "zone2"]
    # upstream's 5000-node cases: 1000 init pods for basic/anti-affinity, 5000 otherwise
    init = {
        name: config_from_options(options(workload=name, nodes=5000)).init_pods
        for name in (
            "SchedulingBasic",
            "SchedulingPodAntiAffinity",
            "SchedulingPodAffinity",
            "SchedulingNodeAffinity",
            "TopologySpreading",
        )
    }
    assert init == {
        "SchedulingBasic": 1000,
        "SchedulingPodAntiAffinity": 1000,
        "SchedulingPodAffinity": 5000,
        "SchedulingNodeAffinity": 5000,
        "TopologySpreading": 5000,
    }
