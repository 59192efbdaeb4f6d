"""PodInfo.of computes what it derives from a spec once per template (issue 14), and each
pod still gets its own identity and exactly what it would get computed afresh."""

from __future__ import annotations

from dataclasses import replace

from distsched.framework import podinfo
from distsched.framework.podinfo import PodInfo
from distsched.model import Pod
from distsched.model.objects import (
    Affinity,
    ObjectMeta,
    PodAffinity,
    PodAffinityTerm,
)
from tests.framework.builders import host_port, make_pod

TEMPLATE = {
    "spec": {
        "containers": [
            {
                "name": "web",
                "ports": [{"containerPort": 80, "hostPort": 8080}],
                "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}},
            }
        ],
        "overhead": {"cpu": "10m"},
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "kubernetes.io/hostname"}
                ]
            }
        },
    }
}


def of_template(name: str, **meta: object) -> Pod:
    return Pod.from_dict({"metadata": {"name": name, "namespace": "shop", **meta}, **TEMPLATE})


def fresh(pod: Pod) -> PodInfo:
    """PodInfo.of with nothing cached."""
    podinfo._facts.clear()
    return PodInfo.of(pod)


def test_pods_of_one_template_share_the_facts_and_keep_their_identity() -> None:
    a = of_template("a", uid="ua", labels={"i": "a"})
    b = of_template("b", uid="ub", labels={"i": "b"})
    info_a, info_b = PodInfo.of(a), PodInfo.of(b)
    assert info_b.requests is info_a.requests  # computed once
    assert (info_b.pod, info_b.key, info_b.uid, info_b.labels) == (b, "shop/b", "ub", {"i": "b"})
    assert (info_a.key, info_a.uid, info_a.labels) == ("shop/a", "ua", {"i": "a"})
    assert info_b == fresh(b)
    assert info_b.requests == {"cpu": 260, "memory": 64 * 1024**2}
    assert info_b.host_ports == (("0.0.0.0", "TCP", 8080),)
    assert [t.topology_key for t in info_b.required_anti_affinity_terms] == [
        "kubernetes.io/hostname"
    ]


def test_a_bound_pod_reuses_its_templates_facts() -> None:
    pending = of_template("a")
    bound = replace(pending, spec=replace(pending.spec, node_name="n1"))
    assert PodInfo.of(bound).requests is PodInfo.of(pending).requests
    assert PodInfo.of(bound).pod is bound


def test_specs_that_differ_in_a_derived_input_do_not_share_facts() -> None:
    base = make_pod("a", requests={"cpu": 100}, priority=None)
    variants = [
        base,
        replace(base, spec=replace(base.spec, priority=0)),
        replace(base, spec=replace(base.spec, priority=-1)),
        replace(base, spec=replace(base.spec, overhead={"cpu": 5})),
        make_pod("a", requests={"cpu": 100}, ports=[host_port("TCP/127.0.0.1/8080")]),
        replace(
            base,
            spec=replace(
                base.spec,
                affinity=Affinity(pod_affinity=PodAffinity(required=(PodAffinityTerm("zone"),))),
            ),
        ),
        replace(base, metadata=ObjectMeta(name="other", namespace="ns", labels={"x": "y"})),
    ]
    warm = [PodInfo.of(p) for p in variants]
    assert [fresh(p) for p in variants] == warm
    assert [i.priority for i in warm[:3]] == [0, 0, -1]


def test_the_facts_cache_is_bounded() -> None:
    podinfo._facts.clear()
    for i in range(podinfo._FACTS_SIZE + 50):
        PodInfo.of(make_pod(f"p{i}", requests={"cpu": i}))
    assert len(podinfo._facts) == podinfo._FACTS_SIZE
