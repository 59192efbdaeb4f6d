"""VolumeBinding: the PreFilter and Filter cases of kube's volume_binding_test (its
classes without a provisioner given kube's "no-provisioner", which the API server would
require and which means the same), FindMatchingVolume's choices, Reserve's plan and the
worker's assumed PVs, and the hints."""

from __future__ import annotations

from typing import Any

import pytest

from distsched.framework.cycle_state import CycleState
from distsched.framework.events import ActionType, ClusterEvent, EventResource
from distsched.framework.interface import Handle
from distsched.framework.listers import Listers
from distsched.framework.plugins import volume_binding as vb
from distsched.framework.status import Code, Status
from distsched.model import Pod
from distsched.model.volumes import claim_from_dict, storage_class_from_dict
from tests.framework.builders import make_node as bare_node
from tests.framework.builders import run_filter, snapshot_of

HOSTNAME = "kubernetes.io/hostname"
BIND = vb.ERR_REASON_BIND_CONFLICT
NODE = vb.ERR_REASON_NODE_CONFLICT
GONE = vb.ERR_REASON_PV_NOT_EXIST


def make_node(name: str, labels: dict[str, str] | None = None) -> Any:
    """kube's makeNode: the hostname label is the node's name."""
    return bare_node(name, labels={HOSTNAME: name, **(labels or {})})


def unresolvable(*reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, *reasons)


def sc(name: str, mode: str, provisioner: str = "kubernetes.io/no-provisioner", **extra):
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": mode,
        **extra,
    }


IMMEDIATE_SC = sc("immediate-sc", "Immediate")
WAIT_SC = sc("wait-sc", "WaitForFirstConsumer")
WAIT_HDD_SC = sc("wait-hdd-sc", "WaitForFirstConsumer")
PROVISIONING_SC = sc("provisioning-sc", "WaitForFirstConsumer", "csi.example.com")
ZONAL_SC = sc(
    "zonal-sc",
    "WaitForFirstConsumer",
    "csi.example.com",
    allowedTopologies=[
        {"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone", "values": ["a"]}]}
    ],
)
CLASSES = (IMMEDIATE_SC, WAIT_SC, WAIT_HDD_SC, PROVISIONING_SC, ZONAL_SC)


def pvc(name: str, sc_name: str, *, bound_pv: str = "", storage: str = "", **extra: Any):
    """makePVC(name, class) and its withBoundPV / withRequestStorage / withPhase."""
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"uid-{name}"}
    spec: dict[str, Any] = {"storageClassName": sc_name, "accessModes": ["ReadWriteOnce"]}
    if bound_pv:
        spec["volumeName"] = bound_pv
        meta["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
    if storage:
        spec["resources"] = {"requests": {"storage": storage}}
    meta.update(extra.pop("metadata", {}))
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": meta,
        "spec": spec,
        **extra,
    }


def pv(name: str, sc_name: str, *, capacity: str = "1Gi", affinity: dict | None = None, **extra):
    """makePV(name, class).withPhase(Available) and its withCapacity / withNodeAffinity."""
    spec: dict[str, Any] = {
        "storageClassName": sc_name,
        "capacity": {"storage": capacity},
        "accessModes": ["ReadWriteOnce"],
    }
    if affinity:
        expressions = [{"key": k, "operator": "In", "values": v} for k, v in affinity.items()]
        spec["nodeAffinity"] = {
            "required": {"nodeSelectorTerms": [{"matchExpressions": expressions}]}
        }
    spec.update(extra.pop("spec", {}))
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, **extra.pop("metadata", {})},
        "spec": spec,
        "status": {"phase": extra.pop("phase", "Available")},
    }


def pod(*claims: str, name: str = "pod-a") -> Pod:
    volumes = [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]
    return Pod.from_dict(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {"containers": [{"name": "c"}], "volumes": volumes},
        }
    )


def plugin_with(*objects: dict[str, Any]) -> vb.VolumeBinding:
    listers = Listers()
    for obj in (*CLASSES, *objects):
        listers.volumes.set(obj["kind"], obj)
    return vb.new({}, Handle(listers=listers))


def run(plugin: vb.VolumeBinding, incoming: Pod, nodes: list[Any], state: CycleState | None = None):
    """(PreFilter status, {node: Filter status}) as kube's table checks them."""
    snapshot = snapshot_of(nodes)
    state = state if state is not None else CycleState()
    _, status = plugin.pre_filter(state, incoming, snapshot)
    if status is not None:
        return status, None
    return None, run_filter(plugin, incoming, snapshot, state)


def test_pod_without_claims_skips():
    assert run(plugin_with(), pod(), [make_node("node-a")]) == (Status.skip(), None)


def test_all_bound():
    plugin = plugin_with(pvc("pvc-a", "wait-sc", bound_pv="pv-a"), pv("pv-a", "wait-sc"))
    assert run(plugin, pod("pvc-a"), [make_node("node-a")]) == (None, {"node-a": None})


@pytest.mark.parametrize(
    ("claims", "objects", "want"),
    [
        (("pvc-a",), (), 'persistentvolumeclaim "pvc-a" not found'),
        (
            ("pvc-a", "pvc-b"),
            (pvc("pvc-a", "wait-sc", bound_pv="pv-a"),),
            'persistentvolumeclaim "pvc-b" not found',
        ),
        (("pvc-a",), (pvc("pvc-a", "immediate-sc"),), vb.UNBOUND_IMMEDIATE),
        (
            ("pvc-a",),
            (pvc("pvc-a", "wait-sc", bound_pv="pv-a", status={"phase": "Lost"}),),
            'persistentvolumeclaim "pvc-a" bound to non-existent persistentvolume "pv-a"',
        ),
        (
            ("pvc-a",),
            (pvc("pvc-a", "wait-sc", metadata={"deletionTimestamp": "2026-12-05T00:00:00Z"}),),
            'persistentvolumeclaim "pvc-a" is being deleted',
        ),
        # pre-bound by its author, the PV controller has not completed it: not bound yet
        (
            ("pvc-a",),
            ({**pvc("pvc-a", "wait-sc"), "spec": {"volumeName": "pv-a"}},),
            vb.UNBOUND_IMMEDIATE,
        ),
    ],
)
def test_pre_filter_rejections(claims, objects, want):
    assert run(plugin_with(*objects), pod(*claims), [make_node("node-a")]) == (
        unresolvable(want),
        None,
    )


def test_unbound_claims_no_matches():
    plugin = plugin_with(pvc("pvc-a", "wait-sc"))
    assert run(plugin, pod("pvc-a"), [make_node("node-a")]) == (
        None,
        {"node-a": unresolvable(BIND)},
    )


def test_bound_and_unbound_unsatisfied():
    plugin = plugin_with(
        pvc("pvc-a", "wait-sc", bound_pv="pv-a"),
        pvc("pvc-b", "wait-sc"),
        pv("pv-a", "wait-sc", affinity={"foo": ["bar"]}),
    )
    node = make_node("node-a", labels={"foo": "barbar"})
    assert run(plugin, pod("pvc-a", "pvc-b"), [node]) == (
        None,
        {"node-a": unresolvable(NODE, BIND)},
    )


def test_pv_not_found():
    plugin = plugin_with(pvc("pvc-a", "wait-sc", bound_pv="pv-a"))
    assert run(plugin, pod("pvc-a"), [make_node("node-a")]) == (
        None,
        {"node-a": unresolvable(GONE)},
    )


LOCAL_PVS = (
    pv("pv-a-0", "wait-sc", capacity="200Gi", affinity={HOSTNAME: ["node-a"]}),
    pv("pv-a-1", "wait-sc", capacity="200Gi", affinity={HOSTNAME: ["node-a"]}),
    pv("pv-b-0", "wait-sc", capacity="100Gi", affinity={HOSTNAME: ["node-b"]}),
    pv("pv-b-1", "wait-sc", capacity="100Gi", affinity={HOSTNAME: ["node-b"]}),
)
THREE_NODES = [make_node("node-a"), make_node("node-b"), make_node("node-c")]


def test_local_volumes_only_where_they_are():
    """kube's "local volumes with close capacity are preferred": its Filter statuses."""
    plugin = plugin_with(pvc("pvc-a", "wait-sc", storage="50Gi"), *LOCAL_PVS)
    state = CycleState()
    _, got = run(plugin, pod("pvc-a"), THREE_NODES, state)
    assert got == {"node-a": None, "node-b": None, "node-c": unresolvable(BIND)}


def test_multiple_claims_need_a_pv_each():
    """kube's "(multiple pvcs)": pvc-0 (wait-sc, 50Gi) and pvc-1 (wait-hdd-sc, 100Gi);
    node-b has one PV of each class, node-a only wait-sc ones."""
    plugin = plugin_with(
        pvc("pvc-0", "wait-sc", storage="50Gi"),
        pvc("pvc-1", "wait-hdd-sc", storage="100Gi"),
        *LOCAL_PVS[:3],
        pv("pv-b-hdd", "wait-hdd-sc", capacity="100Gi", affinity={HOSTNAME: ["node-b"]}),
    )
    _, got = run(plugin, pod("pvc-0", "pvc-1"), THREE_NODES)
    assert got == {"node-a": unresolvable(BIND), "node-b": None, "node-c": unresolvable(BIND)}


def test_reserve_plans_the_smallest_fitting_volume_and_assumes_it():
    """Of node-a's two PVs the smaller that fits is chosen; Reserve writes the plan (plain
    data for the binder) and assumes the PV: the next pod of this worker with another
    claim may not take it; Unreserve gives it back."""
    plugin = plugin_with(
        pvc("pvc-a", "wait-sc", storage="50Gi"),
        pvc("pvc-b", "wait-sc", storage="50Gi"),
        pv("big", "wait-sc", capacity="500Gi", affinity={HOSTNAME: ["node-a"]}),
        pv("small", "wait-sc", capacity="60Gi", affinity={HOSTNAME: ["node-a"]}),
    )
    node = [make_node("node-a")]
    state = CycleState()
    assert run(plugin, pod("pvc-a"), node, state) == (None, {"node-a": None})
    assert plugin.reserve(state, pod("pvc-a"), "node-a") is None
    assert state.get(vb.PLAN_KEY) == {"static": [["small", "pvc-a"]], "provision": []}
    assert state.to_wire()[vb.PLAN_KEY] == state.get(vb.PLAN_KEY)  # travels to the binder
    second = CycleState()
    assert run(plugin, pod("pvc-b", name="pod-b"), node, second) == (None, {"node-a": None})
    plugin.reserve(second, pod("pvc-b", name="pod-b"), "node-a")
    assert second.get(vb.PLAN_KEY)["static"] == [["big", "pvc-b"]]
    plugin.unreserve(second, pod("pvc-b", name="pod-b"), "node-a")
    plugin.unreserve(state, pod("pvc-a"), "node-a")
    third = CycleState()
    run(plugin, pod("pvc-b", name="pod-b"), node, third)
    plugin.reserve(third, pod("pvc-b", name="pod-b"), "node-a")
    assert third.get(vb.PLAN_KEY)["static"] == [["small", "pvc-b"]]


def test_pre_bound_pv_wins_and_claimed_pvs_are_skipped():
    claimed = pv("other", "wait-sc", spec={"claimRef": {"namespace": "default", "name": "x"}})
    mine = pv(
        "mine", "wait-sc", capacity="9Gi", phase="Bound",
        spec={"claimRef": {"namespace": "default", "name": "pvc-a", "uid": "uid-pvc-a"}},
    )  # fmt: skip
    claim = claim_from_dict(pvc("pvc-a", "wait-sc"))
    from distsched.model.volumes import volume_from_dict

    node = make_node("node-a")
    volumes = [volume_from_dict(claimed), volume_from_dict(mine)]
    found = vb.find_matching_volume(claim, volumes, node, set())
    assert found is not None and found.metadata.name == "mine"
    assert vb.find_matching_volume(claim, volumes[:1], node, set()) is None


def test_provisioning_follows_allowed_topologies_and_selected_node():
    plugin = plugin_with(pvc("pvc-a", "zonal-sc"), pvc("pvc-p", "provisioning-sc"))
    a = make_node("node-a", labels={"topology.kubernetes.io/zone": "a"})
    b = make_node("node-b", labels={"topology.kubernetes.io/zone": "b"})
    state = CycleState()
    _, got = run(plugin, pod("pvc-a"), [a, b], state)
    assert got == {"node-a": None, "node-b": unresolvable(BIND)}
    plugin.reserve(state, pod("pvc-a"), "node-a")
    assert state.get(vb.PLAN_KEY) == {"static": [], "provision": ["pvc-a"]}
    selected = pvc(
        "pvc-p",
        "provisioning-sc",
        metadata={"annotations": {"volume.kubernetes.io/selected-node": "node-b"}},
    )
    plugin = plugin_with(selected)
    _, got = run(plugin, pod("pvc-p"), [a, b])
    assert got == {"node-a": unresolvable(BIND), "node-b": None}


def test_binding_cycle_is_needed_only_with_a_plan():
    plugin = plugin_with(pvc("pvc-a", "wait-sc", bound_pv="pv-a"), pv("pv-a", "wait-sc"))
    state = CycleState()
    run(plugin, pod("pvc-a"), [make_node("node-a")], state)
    plugin.reserve(state, pod("pvc-a"), "node-a")
    assert not plugin.binding_needs_state(state)
    assert plugin.pre_bind(state, pod("pvc-a"), "node-a") is None


def test_pre_bind_hands_the_plan_to_the_writer():
    calls = []
    listers = Listers()
    for obj in (*CLASSES, pvc("pvc-a", "provisioning-sc")):
        listers.volumes.set(obj["kind"], obj)
    plugin = vb.new({}, Handle(listers=listers, bind_volumes=lambda *args: calls.append(args)))
    state = CycleState()
    run(plugin, pod("pvc-a"), [make_node("node-a")], state)
    plugin.reserve(state, pod("pvc-a"), "node-a")
    wire = CycleState.from_wire(state.to_wire())  # as the binder gets it
    assert plugin.binding_needs_state(wire)
    plugin.pre_bind(wire, pod("pvc-a"), "node-a")
    assert [(c[0].key, c[1], c[2], c[3]) for c in calls] == [
        ("default/pod-a", "node-a", [], ["pvc-a"])
    ]


def test_hints():
    hint = vb.queueing_hint
    waiting = pod("pvc-a")
    claim_event = ClusterEvent(EventResource.PERSISTENT_VOLUME_CLAIM, ActionType.UPDATE)
    mine = claim_from_dict(pvc("pvc-a", "wait-sc"))
    other = claim_from_dict(pvc("pvc-z", "wait-sc"))
    assert hint(claim_event, waiting, None, mine, Handle()) is True
    assert hint(claim_event, waiting, None, other, Handle()) is False
    sc_event = ClusterEvent(EventResource.STORAGE_CLASS, ActionType.UPDATE)
    plain = storage_class_from_dict(PROVISIONING_SC)
    zonal = storage_class_from_dict(ZONAL_SC)
    assert hint(sc_event, waiting, None, plain, Handle()) is True
    assert hint(sc_event, waiting, plain, zonal, Handle()) is True
    assert hint(sc_event, waiting, plain, plain, Handle()) is False


# kube's binder_test TestCapacity: a 1Gi claim of a WaitForFirstConsumer class whose
# provisioner's CSIDriver tracks capacity, on node1 (label "kubernetes.io/hostname").
NOT_ENOUGH = vb.ERR_REASON_NOT_ENOUGH_SPACE


def capacity(name: str, sc_name: str, node: str | None, cap: str = "", max_size: str = ""):
    """makeCapacity: nodeTopology selects the node's hostname (all nodes without one)."""
    obj: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIStorageCapacity",
        "metadata": {"name": name, "namespace": "default"},
        "storageClassName": sc_name,
        "nodeTopology": {"matchLabels": {HOSTNAME: node}} if node else {},
    }
    if cap:
        obj["capacity"] = cap
    if max_size:
        obj["maximumVolumeSize"] = max_size
    return obj


TRACKING_DRIVER = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "CSIDriver",
    "metadata": {"name": "csi.example.com"},
    "spec": {"storageCapacity": True},
}
NETWORK = capacity("net", "provisioning-sc", None, "1Gi")
NODE1 = capacity("node1", "provisioning-sc", "node1", "1Gi")
NODE2 = capacity("node2", "provisioning-sc", "node2", "1Gi")


@pytest.mark.parametrize(
    ("name", "capacities", "want"),
    [
        ("network-attached", [NETWORK], None),
        ("local-storage", [NODE1], None),
        ("multiple", [NETWORK, NODE2, NODE1], None),
        ("no-storage", [], unresolvable(NOT_ENOUGH)),
        (
            "wrong-node",
            [capacity("net", "provisioning-sc", "node2", "1Gi")],
            unresolvable(NOT_ENOUGH),
        ),
        (
            "wrong-storage-class",
            [capacity("net", "wait-sc", "node1", "1Gi")],
            unresolvable(NOT_ENOUGH),
        ),
        (
            "insufficient-storage",
            [capacity("net", "provisioning-sc", "node1", "1Mi")],
            unresolvable(NOT_ENOUGH),
        ),
        (
            "insufficient-volume-size",
            [capacity("net", "provisioning-sc", "node1", "1Gi", "1Mi")],
            unresolvable(NOT_ENOUGH),
        ),
        (
            "zero-storage",
            [capacity("net", "provisioning-sc", "node1", "0Mi")],
            unresolvable(NOT_ENOUGH),
        ),
        (
            "zero-volume-size",
            [capacity("net", "provisioning-sc", "node1", "", "0Mi")],
            unresolvable(NOT_ENOUGH),
        ),
        ("nil-storage", [capacity("net", "provisioning-sc", "node1")], unresolvable(NOT_ENOUGH)),
    ],
)
def test_capacity(name, capacities, want):
    plugin = plugin_with(
        TRACKING_DRIVER, pvc("provisioned-pvc", "provisioning-sc", storage="1Gi"), *capacities
    )
    got = run(plugin, pod("provisioned-pvc"), [make_node("node1")])
    assert got == (None, {"node1": want}), name


def test_capacity_is_not_checked_for_a_driver_that_does_not_track_it():
    untracked = {**TRACKING_DRIVER, "spec": {"storageCapacity": False}}
    plugin = plugin_with(untracked, pvc("provisioned-pvc", "provisioning-sc", storage="1Gi"))
    assert run(plugin, pod("provisioned-pvc"), [make_node("node1")]) == (None, {"node1": None})


def test_capacity_hints():
    from distsched.model.volumes import storage_capacity_from_dict

    event = ClusterEvent(EventResource.CSI_STORAGE_CAPACITY, ActionType.UPDATE)
    small = storage_capacity_from_dict(capacity("c", "provisioning-sc", "node1", "1Mi"))
    large = storage_capacity_from_dict(capacity("c", "provisioning-sc", "node1", "1Gi"))
    assert vb.queueing_hint(event, pod("pvc-a"), small, large, Handle()) is True
    assert vb.queueing_hint(event, pod("pvc-a"), large, small, Handle()) is False
    assert vb.queueing_hint(event, pod("pvc-a"), None, small, Handle()) is True
