"""The checker's volume invariants, on states written straight into the store (the
scheduler never makes them): a ReadWriteOncePod claim used twice, a pod outside its
PV's zone or node affinity, a node over its CSI driver's attach limit."""

from __future__ import annotations

from typing import Any

import redis

from distsched.bench.checker import Violations, check_volumes, read_cluster
from distsched.keys import Keys
from distsched.store import Store
from tests.support.objects import node, pod

ZONE = "topology.kubernetes.io/zone"


def claim(name: str, volume: str, mode: str = "ReadWriteOnce") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"accessModes": [mode], "volumeName": volume},
    }


def volume(name: str, *, zone: str = "", handle: str = "", host: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if handle:
        spec["csi"] = {"driver": "d.example.com", "volumeHandle": handle}
    if host:
        term = {
            "matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [host]}
            ]
        }
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [term]}}
    labels = {ZONE: zone} if zone else {}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    }


def bound_user(name: str, node_name: str, *claims: str) -> dict[str, Any]:
    volumes = [
        {"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)
    ]
    return pod(name, volumes=volumes, nodeName=node_name)


def create(store: Store, *objs: dict[str, Any]) -> None:
    for obj in objs:
        store.create(obj)


def violations(r: redis.Redis, keys: Keys) -> list[str]:
    out = Violations()
    check_volumes(read_cluster(r, keys), out)
    return out.messages()


def test_volume_invariants(r: redis.Redis, keys: Keys) -> None:
    store = Store(r, keys)
    create(store, node("n1", labels={ZONE: "a"}))
    create(store, node("n2", labels={ZONE: "b"}))
    store.create(
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSINode",
            "metadata": {"name": "n1"},
            "spec": {"drivers": [{"name": "d.example.com", "allocatable": {"count": 1}}]},
        }
    )
    create(store, volume("solo-pv"), claim("solo", "solo-pv", "ReadWriteOncePod"))
    create(store, volume("zonal", zone="a"), claim("zonal", "zonal"))
    create(store, volume("pinned", host="n1"), claim("pinned", "pinned"))
    create(
        store,
        volume("c1", handle="h1"),
        claim("c1", "c1"),
        volume("c2", handle="h2"),
        claim("c2", "c2"),
    )
    assert violations(r, keys) == []
    create(store, bound_user("a", "n1", "solo", "zonal", "pinned", "c1"))
    assert violations(r, keys) == []
    create(store, bound_user("b", "n2", "solo", "zonal", "pinned"), bound_user("c", "n1", "c2"))
    found = violations(r, keys)
    assert any(v.startswith("read-write-once-pod: claim default/solo") for v in found)
    assert any(v.startswith("volume-zone: default/b on n2") for v in found)
    assert any(v.startswith("volume-node-affinity: default/b on n2") for v in found)
    assert "volume-limit: n1: 2 d.example.com volumes, allocatable 1" in found
    assert len(found) == 4
