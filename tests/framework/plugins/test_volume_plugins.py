"""VolumeRestrictions, VolumeZone and NodeVolumeLimits: cases of kube's
volume_restrictions_test, volume_zone_test and nodevolumelimits csi_test (object names
made DNS-1123 names, as the store requires), plus the preemption extensions and hints."""

from __future__ import annotations

from typing import Any

import pytest

from distsched.framework.cycle_state import CycleState
from distsched.framework.events import ActionType, ClusterEvent, EventResource
from distsched.framework.interface import Handle
from distsched.framework.listers import Listers
from distsched.framework.plugins import node_volume_limits, volume_restrictions, volume_zone
from distsched.framework.podinfo import PodInfo
from distsched.framework.status import Code, PluginError, Status
from distsched.model import Pod
from distsched.model.volumes import csi_node_from_dict, volume_from_dict
from tests.framework.builders import make_node, run_filter, snapshot_of

DISK = Status(Code.UNSCHEDULABLE, volume_restrictions.ERR_REASON_DISK_CONFLICT)
RWOP = Status(Code.UNSCHEDULABLE, volume_restrictions.ERR_REASON_RWOP_CONFLICT)
ZONE = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, volume_zone.ERR_REASON_CONFLICT)
LIMIT = Status(Code.UNSCHEDULABLE, node_volume_limits.ERR_REASON_MAX_VOLUME_COUNT)
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"


def pod(name: str, *volumes: dict[str, Any], node: str = "", ns: str = "default") -> Pod:
    spec: dict[str, Any] = {"containers": [{"name": "c"}], "volumes": list(volumes)}
    if node:
        spec["nodeName"] = node
    return Pod.from_dict(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}"},
            "spec": spec,
        }
    )


def claim_vol(claim: str) -> dict[str, Any]:
    """st.MakePod().PVC(name): a volume named after its claim."""
    return {"name": claim, "persistentVolumeClaim": {"claimName": claim}}


def gce(pd: str, read_only: bool = False) -> dict[str, Any]:
    return {"name": f"gce-{pd}", "gcePersistentDisk": {"pdName": pd, "readOnly": read_only}}


def pvc(name: str, *, modes=("ReadWriteOnce",), volume: str = "", sc: str | None = None, **meta):
    spec: dict[str, Any] = {"accessModes": list(modes)}
    if volume:
        spec["volumeName"] = volume
    if sc is not None:
        spec["storageClassName"] = sc
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default", **meta},
        "spec": spec,
    }


def pv(name: str, labels: dict[str, str] | None = None, csi: tuple[str, str] | None = None):
    spec: dict[str, Any] = {}
    if csi is not None:
        spec["csi"] = {"driver": csi[0], "volumeHandle": csi[1]}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
    }


def storage_class(name: str, provisioner: str = "csi.example.com", mode: str = "Immediate"):
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": mode,
    }


def csi_node(name: str, **limits: int) -> dict[str, Any]:
    drivers = [
        {"name": d.replace("_", "."), "allocatable": {"count": n}} for d, n in limits.items()
    ]
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": name},
        "spec": {"drivers": drivers},
    }


def handle_with(*objects: dict[str, Any]) -> Handle:
    listers = Listers()
    for obj in objects:
        listers.volumes.set(obj["kind"], obj)
    return Handle(listers=listers)


# --------------------------------------------------------------------- VolumeRestrictions
def restrictions(incoming: Pod, existing: list[Pod], *objects: dict[str, Any]):
    """(PreFilter status, Filter status on node-1) as kube's tables check them."""
    plugin = volume_restrictions.new({}, handle_with(*objects))
    snapshot = snapshot_of([make_node("node-1")], existing)
    state = CycleState()
    _, pre = plugin.pre_filter(state, incoming, snapshot)
    if pre is not None:
        return pre, None
    return None, run_filter(plugin, incoming, snapshot, state)["node-1"]


@pytest.mark.parametrize(
    ("name", "incoming", "existing", "pre", "want"),
    [
        ("nothing", [], [], "skip", None),
        ("one state", [], [gce("foo")], "skip", None),
        ("same state", [gce("foo")], [gce("foo")], None, DISK),
        ("different state", [gce("bar")], [gce("foo")], None, None),
        ("no restriction volume", [{"name": "e", "emptyDir": {}}], [], "skip", None),
        ("both read-only", [gce("foo", True)], [gce("foo", True)], None, None),
        ("one read-only", [gce("foo", True)], [gce("foo")], None, DISK),
    ],
)
def test_gce_disk_conflicts(name, incoming, existing, pre, want):
    got_pre, got = restrictions(pod("p", *incoming), [pod("e", *existing, node="node-1")])
    if pre == "skip":
        assert got_pre == Status.skip(), name
        return
    assert got_pre is None and got == want, name


@pytest.mark.parametrize(
    ("incoming", "existing", "want"),
    [
        ({"volumeID": "foo"}, {"volumeID": "foo"}, DISK),
        ({"volumeID": "bar"}, {"volumeID": "foo"}, None),
        ({"volumeID": "foo", "readOnly": True}, {"volumeID": "foo", "readOnly": True}, DISK),
    ],
)
def test_aws_disk_conflicts(incoming, existing, want):
    a = pod("p", {"name": "v", "awsElasticBlockStore": incoming})
    b = pod("e", {"name": "v", "awsElasticBlockStore": existing}, node="node-1")
    assert restrictions(a, [b]) == (None, want)


@pytest.mark.parametrize(
    ("incoming", "existing", "want"),
    [
        # kube's TestRBDDiskConflicts: monitors overlap, same pool and image
        (
            {"monitors": ["a", "b"], "pool": "foo", "image": "bar"},
            {"monitors": ["a", "b"], "pool": "foo", "image": "bar"},
            DISK,
        ),
        (
            {"monitors": ["c", "d"], "pool": "foo", "image": "bar"},
            {"monitors": ["a", "b"], "pool": "foo", "image": "bar"},
            None,
        ),
        (
            {"monitors": ["a"], "pool": "foo", "image": "baz"},
            {"monitors": ["a", "b"], "pool": "foo", "image": "bar"},
            None,
        ),
        (
            {"monitors": ["a"], "image": "bar"},  # pool defaults to "rbd"
            {"monitors": ["a"], "pool": "rbd", "image": "bar"},
            DISK,
        ),
        (
            {"monitors": ["a"], "pool": "p", "image": "i", "readOnly": True},
            {"monitors": ["a"], "pool": "p", "image": "i", "readOnly": True},
            None,
        ),
    ],
)
def test_rbd_disk_conflicts(incoming, existing, want):
    a = pod("p", {"name": "v", "rbd": incoming})
    b = pod("e", {"name": "v", "rbd": existing}, node="node-1")
    assert restrictions(a, [b]) == (None, want)


@pytest.mark.parametrize(
    ("incoming", "existing", "want"),
    [
        (
            {"iqn": "iqn.2016-12.server:storage.target01"},
            {"iqn": "iqn.2016-12.server:storage.target01"},
            DISK,
        ),
        (
            {"iqn": "iqn.2017-12.server:storage.target01"},
            {"iqn": "iqn.2016-12.server:storage.target01"},
            None,
        ),
        (
            {"iqn": "iqn.x", "readOnly": True},
            {"iqn": "iqn.x", "readOnly": True},
            None,
        ),
    ],
)
def test_iscsi_disk_conflicts(incoming, existing, want):
    a = pod("p", {"name": "v", "iscsi": {"targetPortal": "t", "lun": 0, **incoming}})
    b = pod("e", {"name": "v", "iscsi": {"targetPortal": "t", "lun": 0, **existing}}, node="node-1")
    assert restrictions(a, [b]) == (None, want)


RWOP_1 = pvc("claim-with-rwop-1", modes=("ReadWriteOncePod",))
RWOP_2 = pvc("claim-with-rwop-2", modes=("ReadWriteOncePod",))
RWX = pvc("claim-with-rwx", modes=("ReadWriteMany",))


def test_access_mode_conflicts():
    """kube's TestAccessModeConflicts."""
    one = pod("pod-with-one-pvc", claim_vol("claim-with-rwop-1"), node="node-1")
    two = pod(
        "pod-with-two-pvcs",
        claim_vol("claim-with-rwop-1"),
        claim_vol("claim-with-rwop-2"),
        node="node-1",
    )
    rwx = pod("pod-with-rwx", claim_vol("claim-with-rwx"), node="node-1")
    incoming_one = pod("pod-with-one-conflict", claim_vol("claim-with-rwop-1"))
    incoming_two = pod(
        "pod-with-two-conflicts", claim_vol("claim-with-rwop-1"), claim_vol("claim-with-rwop-2")
    )
    not_found = Status.unresolvable('persistentvolumeclaim "claim-with-rwop-1" not found')
    assert restrictions(pod("p"), []) == (Status.skip(), None)
    assert restrictions(incoming_one, []) == (not_found, None)
    assert restrictions(incoming_one, [rwx], RWOP_1, RWX) == (Status.skip(), None)
    assert restrictions(incoming_one, [one, rwx], RWOP_1, RWX) == (None, RWOP)
    assert restrictions(incoming_two, [two, rwx], RWOP_1, RWOP_2, RWX) == (None, RWOP)


def test_rwop_conflict_on_every_node_and_freed_by_a_dry_run_removal():
    """The claim's user is on node-1; node-2 fails as well. Preemption's RemovePod of that
    user clears the conflict (kube's PreFilterExtensions)."""
    user = pod("user", claim_vol("claim-with-rwop-1"), node="node-1")
    plugin = volume_restrictions.new({}, handle_with(RWOP_1))
    snapshot = snapshot_of([make_node("node-1"), make_node("node-2")], [user])
    state = CycleState()
    incoming = pod("p", claim_vol("claim-with-rwop-1"))
    got = run_filter(plugin, incoming, snapshot, state)
    assert got == {"node-1": RWOP, "node-2": RWOP}
    extensions = plugin.pre_filter_extensions()
    extensions.remove_pod(state, incoming, PodInfo.of(user), 0, snapshot)
    assert not plugin.filter(state, incoming, snapshot, snapshot.node_indices()).failures
    extensions.add_pod(state, incoming, PodInfo.of(user), 0, snapshot)
    assert plugin.filter(state, incoming, snapshot, snapshot.node_indices()).failures


def test_claim_users_follow_pods_on_and_off_nodes():
    user = pod("user", claim_vol("c"), node="node-1")
    snapshot = snapshot_of([make_node("node-1")], [user])
    assert snapshot.claim_users == {"default/c": 1}
    snapshot.remove_pod(user.key)
    assert snapshot.claim_users == {}


def test_restrictions_hints():
    hint = volume_restrictions.queueing_hint
    waiting = pod("p", gce("foo"), claim_vol("c"))
    delete = ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE)
    assert hint(delete, waiting, pod("e", gce("foo"), node="n"), None, Handle()) is True
    assert hint(delete, waiting, pod("e", claim_vol("c"), node="n"), None, Handle()) is True
    assert hint(delete, waiting, pod("e", gce("bar"), node="n"), None, Handle()) is False
    assert hint(delete, waiting, pod("e", gce("foo"), node="n", ns="x"), None, Handle()) is False
    added = ClusterEvent(EventResource.PERSISTENT_VOLUME_CLAIM, ActionType.ADD)
    from distsched.model.volumes import claim_from_dict

    assert hint(added, waiting, None, claim_from_dict(pvc("c")), Handle()) is True
    assert hint(added, waiting, None, claim_from_dict(pvc("d")), Handle()) is False


# --------------------------------------------------------------------- VolumeZone
ZONE_OBJECTS = (
    pv("vol-1", {BETA_ZONE: "us-west1-a"}),
    pv("vol-2", {BETA_REGION: "us-west1", "uselessLabel": "none"}),
    pv("vol-stable-1", {ZONE_LABEL: "us-west1-a"}),
    pv("vol-stable-2", {REGION_LABEL: "us-west1", "uselessLabel": "none"}),
    pv("vol-stable-3", {ZONE_LABEL: "us-west1-a", REGION_LABEL: "us-west1-a"}),
    pv("vol-multi", {BETA_ZONE: "us-west1-c__us-west1-a"}),
    pvc("pvc-1", volume="vol-1"),
    pvc("pvc-2", volume="vol-2"),
    pvc("pvc-4", volume="vol-not-exist"),
    pvc("pvc-stable-1", volume="vol-stable-1"),
    pvc("pvc-stable-2", volume="vol-stable-2"),
    pvc("pvc-stable-3", volume="vol-stable-3"),
    pvc("pvc-multi", volume="vol-multi"),
    pvc("pvc-wffc", sc="wffc"),
    pvc("pvc-immediate", sc="immediate"),
    pvc("pvc-no-class", sc=""),
    pvc("pvc-unknown-class", sc="gone"),
    storage_class("wffc", mode="WaitForFirstConsumer"),
    storage_class("immediate"),
)


@pytest.mark.parametrize(
    ("name", "claim", "labels", "want"),
    [
        ("node without labels", "pvc-1", {}, None),
        (
            "beta zone label matched",
            "pvc-1",
            {BETA_ZONE: "us-west1-a", "uselessLabel": "none"},
            None,
        ),
        ("beta region label matched", "pvc-2", {BETA_REGION: "us-west1"}, None),
        ("beta region label doesn't match", "pvc-2", {BETA_REGION: "no_us-west1"}, ZONE),
        ("beta zone label doesn't match", "pvc-1", {BETA_ZONE: "no_us-west1-a"}, ZONE),
        ("zone label matched", "pvc-stable-1", {ZONE_LABEL: "us-west1-a"}, None),
        ("region label matched", "pvc-stable-2", {REGION_LABEL: "us-west1"}, None),
        ("region label doesn't match", "pvc-stable-2", {REGION_LABEL: "no_us-west1"}, ZONE),
        ("zone label doesn't match", "pvc-stable-1", {ZONE_LABEL: "no_us-west1-a"}, ZONE),
        (
            "pv with zone and region, node with only zone",
            "pvc-stable-3",
            {ZONE_LABEL: "us-west1-a"},
            ZONE,
        ),
        ("pv with zone, node with beta zone", "pvc-stable-1", {BETA_ZONE: "us-west1-a"}, ZONE),
        (
            "pv with beta label, node with ga label, matched",
            "pvc-1",
            {ZONE_LABEL: "us-west1-a"},
            None,
        ),
        (
            "pv with beta label, node with ga label, no match",
            "pvc-1",
            {ZONE_LABEL: "us-west1-b"},
            ZONE,
        ),
        ("multi zone matched", "pvc-multi", {BETA_ZONE: "us-west1-a"}, None),
        ("multi zone not matched", "pvc-multi", {BETA_ZONE: "us-west1-b"}, ZONE),
    ],
)
def test_volume_zone_filter(name, claim, labels, want):
    plugin = volume_zone.new({}, handle_with(*ZONE_OBJECTS))
    snapshot = snapshot_of([make_node("host1", labels=labels)])
    assert run_filter(plugin, pod("pod-1", claim_vol(claim)), snapshot)["host1"] == want, name


@pytest.mark.parametrize(
    ("claim", "want"),
    [
        ("pvc-4", Status.unresolvable('persistentvolume "vol-not-exist" not found')),
        ("missing", Status.unresolvable('persistentvolumeclaim "missing" not found')),
        ("pvc-wffc", Status.skip()),
        ("pvc-immediate", Status.unresolvable("PersistentVolume had no name")),
        (
            "pvc-no-class",
            Status.unresolvable("PersistentVolumeClaim had no pv name and storageClass name"),
        ),
        (
            "pvc-unknown-class",
            Status.unresolvable('storageclass.storage.k8s.io "gone" not found'),
        ),
    ],
)
def test_volume_zone_pre_filter(claim, want):
    plugin = volume_zone.new({}, handle_with(*ZONE_OBJECTS))
    _, status = plugin.pre_filter(CycleState(), pod("p", claim_vol(claim)), snapshot_of([]))
    assert status == want


def test_volume_zone_hints():
    hint = volume_zone.queueing_hint
    waiting = pod("p", claim_vol("pvc-1"))
    pv_update = ClusterEvent(EventResource.PERSISTENT_VOLUME, ActionType.UPDATE)
    a = volume_from_dict(pv("v", {ZONE_LABEL: "a"}))
    b = volume_from_dict(pv("v", {ZONE_LABEL: "b"}))
    assert hint(pv_update, waiting, a, b, Handle()) is True
    assert hint(pv_update, waiting, a, a, Handle()) is False
    assert hint(pv_update, waiting, None, a, Handle()) is True
    from distsched.model.volumes import storage_class_from_dict

    sc_add = ClusterEvent(EventResource.STORAGE_CLASS, ActionType.ADD)
    wffc = storage_class_from_dict(storage_class("x", mode="WaitForFirstConsumer"))
    assert hint(sc_add, waiting, None, wffc, Handle()) is True
    assert (
        hint(sc_add, waiting, None, storage_class_from_dict(storage_class("y")), Handle()) is False
    )


# --------------------------------------------------------------------- NodeVolumeLimits
def limits(incoming: Pod, existing: list[Pod], *objects: dict[str, Any], node_labels=None):
    plugin = node_volume_limits.new({}, handle_with(*objects))
    snapshot = snapshot_of([make_node("node-1", labels=node_labels or {})], existing)
    return run_filter(plugin, incoming, snapshot)["node-1"]


CSI_OBJECTS = (
    *(pvc(f"csi-{i}", volume=f"pv-{i}") for i in range(4)),
    *(pv(f"pv-{i}", csi=("ebs.csi.aws.com", f"vol-{i}")) for i in range(4)),
    pvc("unbound-a", sc="csi-sc"),
    pvc("unbound-b", sc="csi-sc"),
    pvc("in-tree-unbound", sc="in-tree-sc"),
    pvc("no-sc", sc=""),
    storage_class("csi-sc", provisioner="ebs.csi.aws.com"),
    storage_class("in-tree-sc", provisioner="kubernetes.io/aws-ebs"),
)


@pytest.mark.parametrize(
    ("name", "incoming", "existing", "limit", "want"),
    [
        ("fits", ["csi-0"], [["csi-1"]], 2, None),
        ("exceeds", ["csi-0"], [["csi-1"], ["csi-2"]], 2, LIMIT),
        ("two new volumes exceed", ["csi-0", "csi-1"], [["csi-2"]], 2, LIMIT),
        ("volume already attached counts once", ["csi-1"], [["csi-1"], ["csi-2"]], 2, None),
        ("unbound claim counts by its class", ["unbound-a"], [["csi-1"], ["csi-2"]], 2, LIMIT),
        (
            "unbound claim shared with a pod on the node",
            ["unbound-a"],
            [["unbound-a"], ["csi-2"]],
            2,
            None,
        ),
        ("in-tree provisioner migrated to its driver", ["in-tree-unbound"], [["csi-1"]], 1, LIMIT),
        ("claim without class is not counted", ["no-sc"], [["csi-1"]], 1, None),
        ("no limit for the driver", ["csi-0"], [["csi-1"]], None, None),
    ],
)
def test_csi_limits(name, incoming, existing, limit, want):
    objects: list[dict[str, Any]] = list(CSI_OBJECTS)
    if limit is not None:
        objects.append(csi_node("node-1", ebs_csi_aws_com=limit))
    else:
        objects.append(csi_node("node-1", other_csi_example_com=1))
    existing_pods = [
        pod(f"e{i}", *(claim_vol(c) for c in claims), node="node-1")
        for i, claims in enumerate(existing)
    ]
    got = limits(pod("p", *(claim_vol(c) for c in incoming)), existing_pods, *objects)
    assert got == want, name


def test_csi_limits_without_a_csi_node_pass():
    existing = [pod("e", claim_vol("csi-1"), node="node-1")]
    assert limits(pod("p", claim_vol("csi-0")), existing, *CSI_OBJECTS) is None


def test_csi_limits_missing_claim_is_unresolvable():
    got = limits(pod("p", claim_vol("nope")), [], csi_node("node-1", ebs_csi_aws_com=1))
    assert got == Status.unresolvable(
        'looking up PVC default/nope: persistentvolumeclaim "nope" not found'
    )


def test_csi_limits_ephemeral_volume_must_be_the_pods_own():
    ephemeral = {"name": "xyz", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}
    owned = pvc("abc-xyz", sc="csi-sc", ownerReferences=[{"uid": "uid-abc", "controller": True}])
    other = pvc("abc-xyz", sc="csi-sc")
    node = csi_node("node-1", ebs_csi_aws_com=1)
    existing = [pod("e", claim_vol("csi-1"), node="node-1")]
    sc = storage_class("csi-sc", provisioner="ebs.csi.aws.com")
    assert limits(pod("abc", ephemeral), existing, owned, sc, node, *CSI_OBJECTS[:8]) == LIMIT
    with pytest.raises(PluginError, match="was not created for pod default/abc"):
        limits(pod("abc", ephemeral), existing, other, sc, node, *CSI_OBJECTS[:8])


def test_csi_limits_hints():
    hint = node_volume_limits.queueing_hint
    waiting = pod("p", claim_vol("c"))
    update = ClusterEvent(EventResource.CSI_NODE, ActionType.UPDATE)
    low = csi_node_from_dict(csi_node("n", a_b=1))
    high = csi_node_from_dict(csi_node("n", a_b=2))
    assert hint(update, waiting, low, high, Handle()) is True
    assert hint(update, waiting, high, low, Handle()) is False
    delete = ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE)
    assert hint(delete, waiting, pod("e", claim_vol("x"), node="n"), None, Handle()) is True
    assert hint(delete, waiting, pod("e", node="n"), None, Handle()) is False


# kube's csi_test table, the cases that do not need CSI migration or VolumeAttachments:
# "csi-<i>" claims are bound to EBS CSI PVs, "unbound-a" pending with an EBS class,
# "missing-pv" names a PV that does not exist (counted by its class), "no-sc" has none,
# "gce-<i>" are bound to GCE PD CSI PVs.
CSI_TABLE_OBJECTS = (
    *CSI_OBJECTS,
    {
        **pvc("missing-pv", sc="csi-sc"),
        "spec": {"volumeName": "gone", "storageClassName": "csi-sc"},
    },
    *(pvc(f"gce-{i}", volume=f"gce-pv-{i}") for i in range(2)),
    *(pv(f"gce-pv-{i}", csi=("pd.csi.storage.gke.io", f"gce-{i}")) for i in range(2)),
)


@pytest.mark.parametrize(
    ("name", "incoming", "existing", "limits", "want"),
    [
        (
            "fits when node volume limit >= new pods CSI volume",
            ["csi-0"],
            [[], ["csi-1", "csi-2"]],
            {"ebs_csi_aws_com": 4},
            None,
        ),
        (
            "doesn't when node volume limit <= pods CSI volume",
            ["csi-0"],
            [[], ["csi-1", "csi-2"]],
            {"ebs_csi_aws_com": 2},
            LIMIT,
        ),
        (
            "should when driver does not support volume limits",
            ["csi-0"],
            [[], ["csi-1", "csi-2"]],
            {},
            None,
        ),
        (
            "count pending PVCs towards volume limit <= pods CSI volume",
            ["csi-0"],
            [["unbound-a"], ["csi-1", "csi-2"]],
            {"ebs_csi_aws_com": 2},
            LIMIT,
        ),
        (
            "count multiple pending pvcs towards volume limit >= pods CSI volume",
            ["csi-0"],
            [["unbound-a"], ["unbound-a"], ["csi-1", "csi-2"]],
            {"ebs_csi_aws_com": 4},
            None,
        ),
        (
            "should count PVCs with invalid PV name but valid SC",
            ["csi-0"],
            [["missing-pv"], ["csi-1", "csi-2"]],
            {"ebs_csi_aws_com": 2},
            LIMIT,
        ),
        (
            "don't count pvcs with missing SC towards volume limit",
            ["csi-0"],
            [[], ["no-sc"]],
            {"ebs_csi_aws_com": 2},
            None,
        ),
        (
            "count pvcs with the same type towards volume limit",
            ["csi-0"],
            [["gce-0", "gce-1"], ["csi-1", "csi-2"]],
            {"ebs_csi_aws_com": 2, "pd_csi_storage_gke_io": 2},
            LIMIT,
        ),
        (
            "don't count pvcs with different type towards volume limit",
            ["gce-0", "gce-1"],
            [["csi-1", "csi-2"], []],
            {"ebs_csi_aws_com": 2, "pd_csi_storage_gke_io": 2},
            None,
        ),
    ],
)
def test_kube_csi_limits_table(name, incoming, existing, limits, want):
    node_limits = (
        csi_node("node-1", **limits)
        if limits
        else {
            **csi_node("node-1"),
            "spec": {"drivers": [{"name": "ebs.csi.aws.com"}]},
        }
    )
    existing_pods = [
        pod(f"e{i}", *(claim_vol(c) for c in claims), node="node-1")
        for i, claims in enumerate(existing)
    ]
    got = limits_of(pod("p", *(claim_vol(c) for c in incoming)), existing_pods, node_limits)
    assert got == want, name


def limits_of(incoming: Pod, existing: list[Pod], node_obj: dict[str, Any]):
    return limits(incoming, existing, *CSI_TABLE_OBJECTS, node_obj)
