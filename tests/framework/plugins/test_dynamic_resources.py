"""DynamicResources as distsched has it: a pod with spec.resourceClaims is never placed as
if it had none (issue 21, item 5); pods without claims are untouched, in one batch too."""

from __future__ import annotations

from dataclasses import replace

import pytest

from distsched.framework.cycle_state import CycleState
from distsched.framework.diagnosis import FitError
from distsched.framework.profile import build_profiles, default_config
from distsched.framework.schedule import schedule_pod
from distsched.model import ManifestError
from distsched.model.decode import pod_from_dict
from distsched.model.objects import DEFAULT_SCHEDULER_NAME
from tests.framework.builders import make_node, make_pod, snapshot_of


def claiming(name: str, *claims: str):
    pod = make_pod(name, requests={"cpu": 100})
    return replace(pod, spec=replace(pod.spec, resource_claims=claims))


def test_a_pod_with_resource_claims_is_not_placed_and_says_why() -> None:
    fw = build_profiles(default_config())[DEFAULT_SCHEDULER_NAME]
    snapshot = snapshot_of([make_node(f"n{i}", cpu=4000) for i in range(3)], [])
    with pytest.raises(FitError) as failed:
        schedule_pod(fw, CycleState(), claiming("trainer", "gpu", "nic"), snapshot)
    message = str(failed.value)
    assert message.startswith("0/3 nodes are available:")
    assert 'pod has resource claims ("gpu", "nic")' in message
    assert "DynamicResources" in failed.value.diagnosis.unschedulable_plugins
    # unresolvable: preemption would not help
    assert not failed.value.diagnosis.node_to_status.nodes_that_might_help(
        snapshot.node_indices()
    ).size
    placed = schedule_pod(fw, CycleState(), make_pod("plain", requests={"cpu": 100}), snapshot)
    assert placed.suggested_host.startswith("n")


def test_resource_claims_are_read_from_the_manifest() -> None:
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "trainer"},
        "spec": {
            "containers": [{"name": "c", "image": "train"}],
            "resourceClaims": [
                {"name": "gpu", "resourceClaimTemplateName": "one-gpu"},
                {"name": "nic", "resourceClaimName": "rdma"},
            ],
        },
    }
    assert pod_from_dict(manifest).spec.resource_claims == ("gpu", "nic")
    manifest["spec"]["resourceClaims"].append({"name": "gpu"})
    with pytest.raises(ManifestError, match="duplicate resource claim"):
        pod_from_dict(manifest)
