"""Issue 10, item 11: the in-tree plugins' QueueingHints (kube's isSchedulableAfter*),
table style: (event, pending pod, old object, new object) -> Queue / Skip / no hint."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from distsched.framework import events
from distsched.framework.interface import Handle, QueueingHint
from distsched.framework.plugins import (
    inter_pod_affinity,
    node_affinity,
    node_ports,
    node_resources_fit,
    node_unschedulable,
    pod_topology_spread,
    taint_toleration,
)
from distsched.model import Node, Pod
from tests.support.objects import HOSTNAME, node, pod


def with_handle(hint: QueueingHint) -> Callable[[Any, Pod, Any, Any], bool | None]:
    """The hint as a worker's framework calls it, with a Handle of its own."""
    return partial(hint, handle=Handle())


TAINT = {"key": "dedicated", "value": "db", "effect": "NoSchedule"}


def N(name: str = "n1", **kw: Any) -> Node:
    unschedulable = kw.pop("unschedulable", False)
    obj = node(name, **kw)
    if unschedulable:
        obj["spec"]["unschedulable"] = True
    return Node.from_dict(obj)


def P(name: str, **kw: Any) -> Pod:
    affinity = kw.pop("affinity", None)
    obj = pod(name, **kw)
    if affinity is not None:
        obj["spec"]["affinity"] = affinity
    return Pod.from_dict(obj)


def required(kind: str, app: str) -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": HOSTNAME}
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def test_node_resources_fit() -> None:
    hint = with_handle(node_resources_fit.queueing_hint)
    big = P("big", cpu="3")
    assert hint(events.NODE_ADD, big, None, N(cpu="2")) is False
    assert hint(events.NODE_ADD, big, None, N(cpu="4")) is True
    # An update helps only when a requested resource grew and the node can hold the pod.
    assert hint(events.NODE_ALLOCATABLE_CHANGE, big, N(cpu="2"), N(cpu="4")) is True
    assert hint(events.NODE_LABEL_CHANGE, big, N(cpu="4"), N(cpu="4", labels={"a": "b"})) is False
    assert hint(events.NODE_ALLOCATABLE_CHANGE, big, N(cpu="1"), N(cpu="2")) is False
    assert hint(events.ASSIGNED_POD_DELETE, big, P("gone", nodeName="n1"), None) is True
    assert hint(events.ASSIGNED_POD_ADD, big, None, P("new", nodeName="n1")) is None


def test_node_affinity() -> None:
    hint = with_handle(node_affinity.queueing_hint)
    picky = P("picky", nodeSelector={"zone": "a"})
    assert hint(events.NODE_ADD, picky, None, N(labels={"zone": "b"})) is False
    assert hint(events.NODE_ADD, picky, None, N(labels={"zone": "a"})) is True
    assert hint(events.NODE_LABEL_CHANGE, picky, N(), N(labels={"zone": "a"})) is True
    # Matched before already: this update changes nothing for NodeAffinity.
    matched = N(labels={"zone": "a"})
    assert (
        hint(events.NODE_LABEL_CHANGE, picky, matched, N(labels={"zone": "a", "x": "y"})) is False
    )
    assert hint(events.ASSIGNED_POD_DELETE, picky, P("gone", nodeName="n1"), None) is None


def test_taint_toleration_and_node_unschedulable() -> None:
    plain = P("plain")
    tainted, clean = N(taints=[TAINT]), N()
    taint_hint = with_handle(taint_toleration.queueing_hint)
    assert taint_hint(events.NODE_ADD, plain, None, tainted) is False
    assert taint_hint(events.NODE_TAINT_CHANGE, plain, tainted, clean) is True
    assert taint_hint(events.NODE_LABEL_CHANGE, plain, clean, clean) is False
    cordoned = N(unschedulable=True)
    hint = with_handle(node_unschedulable.queueing_hint)
    assert hint(events.NODE_ADD, plain, None, cordoned) is False
    assert hint(events.NODE_SPEC_UNSCHEDULABLE_CHANGE, plain, cordoned, clean) is True
    assert hint(events.NODE_LABEL_CHANGE, plain, clean, N(labels={"a": "b"})) is False


def test_inter_pod_affinity() -> None:
    hint = with_handle(inter_pod_affinity.queueing_hint)
    web = P("web", affinity=required("podAffinity", "db"))
    db, other = P("db", labels={"app": "db"}, nodeName="n1"), P("o", nodeName="n1")
    assert hint(events.ASSIGNED_POD_ADD, web, None, db) is True
    assert hint(events.ASSIGNED_POD_ADD, web, None, other) is False
    assert hint(events.ASSIGNED_POD_LABEL_CHANGE, web, other, db) is True
    assert hint(events.ASSIGNED_POD_DELETE, web, other, None) is False
    lonely = P("lonely", affinity=required("podAntiAffinity", "noisy"))
    noisy = P("noisy", labels={"app": "noisy"}, nodeName="n1")
    assert hint(events.ASSIGNED_POD_DELETE, lonely, noisy, None) is True
    assert hint(events.ASSIGNED_POD_DELETE, lonely, other, None) is False
    assert hint(events.ASSIGNED_POD_LABEL_CHANGE, lonely, noisy, other) is True
    # A deleted pod with anti-affinity of its own may have kept anyone out.
    guard = P("guard", affinity=required("podAntiAffinity", "x"), nodeName="n1")
    assert hint(events.ASSIGNED_POD_DELETE, web, guard, None) is True
    # Node events: the topology keys of the pod's own terms.
    zoned = P(
        "zoned",
        affinity={
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}
                ]
            }
        },
    )
    assert hint(events.NODE_ADD, zoned, None, N()) is False  # no zone label: no domain
    assert hint(events.NODE_ADD, zoned, None, N(labels={"zone": "a"})) is True
    assert hint(events.NODE_LABEL_CHANGE, zoned, N(), N(labels={"zone": "a"})) is True
    same = N(labels={"zone": "a"})
    assert hint(events.NODE_LABEL_CHANGE, zoned, same, N(labels={"zone": "a", "x": "y"})) is False
    assert hint(events.NODE_ADD, lonely, None, N()) is True  # a new domain for anti-affinity
    assert hint(events.NODE_ADD, P("plain"), None, N()) is True  # kept out by others' terms


def test_pod_topology_spread() -> None:
    hint = with_handle(pod_topology_spread.queueing_hint)
    spread = {
        "maxSkew": 1,
        "topologyKey": HOSTNAME,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "web"}},
    }
    web = P("web", labels={"app": "web"}, topologySpreadConstraints=[spread])
    peer = P("peer", labels={"app": "web"}, nodeName="n1")
    stranger = P("stranger", labels={"app": "db"}, nodeName="n1")
    elsewhere = P("peer", labels={"app": "web"}, nodeName="n1", namespace="other")
    assert hint(events.ASSIGNED_POD_DELETE, web, peer, None) is True
    assert hint(events.ASSIGNED_POD_DELETE, web, stranger, None) is False
    assert hint(events.ASSIGNED_POD_DELETE, web, elsewhere, None) is False
    assert hint(events.ASSIGNED_POD_ADD, web, None, peer) is True
    assert hint(events.ASSIGNED_POD_LABEL_CHANGE, web, stranger, peer) is True
    assert hint(events.ASSIGNED_POD_DELETE, P("free"), peer, None) is None
    zonal = P(
        "zonal",
        labels={"app": "web"},
        topologySpreadConstraints=[{**spread, "topologyKey": "zone"}],
    )
    assert hint(events.NODE_ADD, zonal, None, N()) is False  # no zone: not counted
    assert hint(events.NODE_ADD, zonal, None, N(labels={"zone": "a"})) is True
    assert (
        hint(events.NODE_LABEL_CHANGE, zonal, N(labels={"zone": "a"}), N(labels={"zone": "b"}))
        is True
    )
    unrelated = N(labels={"zone": "a", "x": "y"})
    assert hint(events.NODE_LABEL_CHANGE, zonal, N(labels={"zone": "a"}), unrelated) is False


def test_node_ports() -> None:
    def with_port(name: str, **kw: Any) -> Pod:
        obj = pod(name, **kw)
        obj["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
        return Pod.from_dict(obj)

    wants, holder = with_port("wants"), with_port("holder", nodeName="n1")
    hint = with_handle(node_ports.queueing_hint)
    assert hint(events.ASSIGNED_POD_DELETE, wants, holder, None) is True
    assert hint(events.ASSIGNED_POD_DELETE, wants, P("other", nodeName="n1"), None) is False
    assert hint(events.NODE_ADD, wants, None, N()) is None
