"""A StatefulSet with zonal WaitForFirstConsumer disks through the processes (two
workers, a binder, the controller): each replica lands in its own zone, its claim is
provisioned there (VolumeBinding's PreBind marks the node, the controller's provisioner
makes the PV in the node's zone), and the checker finds every pod with its disk."""

from __future__ import annotations

from pathlib import Path

import redis

from distsched.bench.checker import check
from distsched.bench.procs import ProcessGroup
from distsched.keys import Keys
from distsched.store import Store
from tests.controllers.helpers import apply_path
from tests.support.readers import bound_nodes
from tests.support.waits import wait_for

MANIFEST = Path(__file__).parent / "manifests" / "zonal-statefulset.yaml"
ZONE = "topology.kubernetes.io/zone"


def test_statefulset_replicas_land_with_their_zonal_disks(
    private_client: redis.Redis, processes: ProcessGroup
) -> None:
    keys = Keys()
    store = Store(private_client, keys)
    apply_path(store, MANIFEST)
    processes.spawn("worker")
    processes.spawn("worker")
    processes.spawn("binder")
    processes.spawn("controller")

    def claims_bound() -> bool:
        claims = store.list("PersistentVolumeClaim")[0]
        return len(claims) == 3 and all(c["status"]["phase"] == "Bound" for c in claims)

    wait_for("the replicas to bind", lambda: len(bound_nodes(private_client, keys)) == 3, 60)
    wait_for("the claims to be provisioned", claims_bound, 30)
    bound = bound_nodes(private_client, keys)
    assert sorted(bound.values()) == ["node-a", "node-b", "node-c"]
    for i in range(3):
        claim = store.get("PersistentVolumeClaim", f"default/data-pg-{i}")
        assert claim is not None
        node = bound[f"default/pg-{i}"]
        assert claim["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == node
        pv = store.get("PersistentVolume", claim["spec"]["volumeName"])
        assert pv is not None and pv["metadata"]["labels"][ZONE] == "zone-" + node[-1]
    assert check(private_client, keys, expect_bound=set(bound)) == []
