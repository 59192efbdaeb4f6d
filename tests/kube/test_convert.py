"""What of an API object the bridge keeps in the store (distsched.bridge.convert)."""

from __future__ import annotations

from distsched.bridge.convert import store_object


def test_a_pods_status_keeps_what_scheduling_reads_and_the_preemption_mark() -> None:
    """Only DisruptionTarget of the conditions: preemption's eligibility check reads it
    (a victim whose deletion is under way); the kubelet's conditions would wake every
    worker for nothing."""
    disruption = {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "PreemptionByScheduler",
        "lastTransitionTime": "2026-12-05T15:00:00Z",
    }
    api_pod = {
        "metadata": {"name": "v", "namespace": "default", "resourceVersion": "7"},
        "spec": {"nodeName": "n1"},
        "status": {
            "phase": "Running",
            "nominatedNodeName": "n2",
            "podIP": "10.0.0.1",
            "conditions": [{"type": "Ready", "status": "True"}, disruption],
        },
    }
    stored = store_object("Pod", "v1", api_pod)
    assert stored["status"] == {
        "phase": "Running",
        "nominatedNodeName": "n2",
        "conditions": [disruption],
    }
    assert "resourceVersion" not in stored["metadata"]
    plain = store_object("Pod", "v1", {**api_pod, "status": {"phase": "Running"}})
    assert plain["status"] == {"phase": "Running"}
