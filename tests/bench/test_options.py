"""Bench options: workload defaults, limits, and exit code 2 on bad input."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from distsched.bench.runner import BadInput, config_from_options
from distsched.bench.workloads import WORKLOADS, Names
from distsched.model import Node, Pod


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
    pods = workload.init_pods(names, 2) + workload.measured_pods(names, 0, 2)
    keys = {Pod.from_dict(obj).key for obj in pods}
    assert keys == {
        names.init_key(0),
        names.init_key(1),
        names.measured_key(0),
        names.measured_key(1),
    }


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
