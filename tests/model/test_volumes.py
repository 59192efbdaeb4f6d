"""Pod volumes and the storage objects: what the volume plugins read, the API server's
defaults, and the errors apply gives (the path of the field)."""

from __future__ import annotations

from typing import Any

import pytest

from distsched.model import ManifestError, Pod
from distsched.model.volumes import (
    IMMEDIATE,
    claim_from_dict,
    csi_node_from_dict,
    storage_class_from_dict,
    volume_from_dict,
    zones_of_label,
)


def pod_with(volumes: list[dict[str, Any]]) -> Pod:
    return Pod.from_dict(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web-0"},
            "spec": {"containers": [{"name": "c"}], "volumes": volumes},
        }
    )


def test_pod_volumes_keep_claims_and_disks():
    pod = pod_with(
        [
            {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0"}},
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
            {"name": "cache", "emptyDir": {}},
            {"name": "disk", "rbd": {"monitors": ["m"], "image": "i"}},
        ]
    )
    data, scratch, cache, disk = pod.spec.volumes
    assert data.claim_for("web-0") == "data-web-0" and not data.has_disk
    assert scratch.claim_for("web-0") == "web-0-scratch"
    assert cache.claim_for("web-0") == "" and not cache.has_disk
    assert disk.rbd is not None and disk.rbd.pool == "rbd" and disk.has_disk


@pytest.mark.parametrize(
    ("volumes", "path"),
    [
        ([{"name": "a"}, {"name": "a"}], "spec.volumes[1].name"),
        ([{"name": "Bad_Name"}], "spec.volumes[0].name"),
        (
            [{"name": "a", "persistentVolumeClaim": {}}],
            "spec.volumes[0].persistentVolumeClaim.claimName",
        ),
        (
            [{"name": "a", "gcePersistentDisk": {"readOnly": True}}],
            "spec.volumes[0].gcePersistentDisk.pdName",
        ),
    ],
)
def test_bad_pod_volumes_name_the_field(volumes, path):
    with pytest.raises(ManifestError) as err:
        pod_with(volumes)
    assert err.value.field == path


def test_claim_class_from_field_or_beta_annotation():
    base: dict[str, Any] = {"metadata": {"name": "c"}, "spec": {}}
    assert claim_from_dict(base).storage_class_name is None
    annotated = {
        "metadata": {
            "name": "c",
            "annotations": {"volume.beta.kubernetes.io/storage-class": "slow"},
        },
        "spec": {},
    }
    assert claim_from_dict(annotated).class_name == "slow"
    explicit = {"metadata": {"name": "c"}, "spec": {"storageClassName": ""}}
    assert claim_from_dict(explicit).storage_class_name == ""
    sized = {"metadata": {"name": "c"}, "spec": {"resources": {"requests": {"storage": "1Gi"}}}}
    assert claim_from_dict(sized).storage_request == 2**30


def test_rwop_may_not_be_combined():
    bad = {"metadata": {"name": "c"}, "spec": {"accessModes": ["ReadWriteOncePod", "ReadOnlyMany"]}}
    with pytest.raises(ManifestError, match="ReadWriteOncePod with other access modes"):
        claim_from_dict(bad)


def test_volume_csi_and_node_affinity():
    pv = volume_from_dict(
        {
            "metadata": {"name": "pv-1"},
            "spec": {
                "capacity": {"storage": "10Gi"},
                "csi": {"driver": "d", "volumeHandle": "h"},
                "claimRef": {"namespace": "ns", "name": "c"},
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "zone", "operator": "In", "values": ["a"]}
                                ]
                            }
                        ]
                    }
                },
            },
        }
    )
    assert pv.capacity == 10 * 2**30 and pv.csi is not None and pv.csi.volume_handle == "h"
    assert pv.claim_ref is not None and pv.claim_ref.key == "ns/c"
    assert pv.node_affinity is not None and len(pv.node_affinity) == 1


def test_storage_class_defaults_and_errors():
    sc = storage_class_from_dict({"metadata": {"name": "s"}, "provisioner": "p"})
    assert sc.volume_binding_mode == IMMEDIATE
    with pytest.raises(ManifestError) as err:
        storage_class_from_dict(
            {"metadata": {"name": "s"}, "provisioner": "p", "volumeBindingMode": "Later"}
        )
    assert err.value.field == "volumeBindingMode"


def test_csi_node_limits():
    node = csi_node_from_dict(
        {
            "metadata": {"name": "n"},
            "spec": {"drivers": [{"name": "a", "allocatable": {"count": 3}}, {"name": "b"}]},
        }
    )
    assert node.limits() == {"a": 3}


def test_zone_label_sets():
    assert zones_of_label("a__b") == {"a", "b"}
    assert zones_of_label("a____b") is None


def test_volumes_and_resource_claims_are_written_back_as_given():
    """A pod written back (apply stores Pod.to_dict()) keeps its volumes and resource
    claims whole, the sources the scheduler does not read included; reading it again
    gives the same pod."""
    volumes = [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-0", "readOnly": True}},
        {"name": "conf", "configMap": {"name": "app", "items": [{"key": "a", "path": "a"}]}},
        {
            "name": "scratch",
            "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["RWO"]}}},
        },
    ]
    pod = pod_with(volumes)
    data = pod.to_dict()
    assert data["spec"]["volumes"] == volumes
    assert Pod.from_dict(data) == pod
    claimed = Pod.from_dict(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "t"},
            "spec": {
                "containers": [{"name": "c"}],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}],
            },
        }
    )
    assert claimed.to_dict()["spec"]["resourceClaims"] == [
        {"name": "gpu", "resourceClaimTemplateName": "gpu"}
    ]
