"""Builders for InterPodAffinity's tests: terms, affinities, pods and nodes, the plugin."""

from __future__ import annotations

from distsched.framework.interface import Handle
from distsched.framework.plugins import inter_pod_affinity
from distsched.framework.plugins.inter_pod_affinity import ERR_REASON_AFFINITY
from distsched.framework.status import Code, Status
from distsched.model.objects import (
    Affinity,
    PodAffinity,
    PodAffinityTerm,
    WeightedPodAffinityTerm,
)
from tests.framework.builders import make_node, make_pod
from tests.support.objects import HOSTNAME as HOST

REGION = "region"
AFFINITY_FAIL = (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_AFFINITY)


def plugin(args=None):
    return inter_pod_affinity.new(args or {}, Handle())


def term(selector, key=REGION, namespaces=(), ns_selector=None):
    return PodAffinityTerm(key, selector, tuple(namespaces), ns_selector)


def affinity(required=(), anti=(), preferred=(), anti_preferred=()):
    return Affinity(
        pod_affinity=PodAffinity(
            tuple(required), tuple(WeightedPodAffinityTerm(w, t) for w, t in preferred)
        )
        if required or preferred
        else None,
        pod_anti_affinity=PodAffinity(
            tuple(anti), tuple(WeightedPodAffinityTerm(w, t) for w, t in anti_preferred)
        )
        if anti or anti_preferred
        else None,
    )


def pod(name="p", labels=None, aff=None, node="", namespace="default"):
    return make_pod(name, labels=labels, affinity=aff, node_name=node, namespace=namespace)


def node(name, **labels):
    return make_node(name, labels={HOST: name, **labels})


def reason(status: Status | None) -> tuple[Code, str] | None:
    if status is None:
        return None
    return status.code, status.message()
