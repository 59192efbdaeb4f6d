"""Issue 10, item 10: pod-level ``spec.resources`` (kube's PodLevelResources) is modelled in
NodeResourcesFit and the ledger, validated as kube does, never silently dropped."""

from __future__ import annotations

from typing import Any

import pytest
import redis
import yaml

from distsched.clock import FakeClock
from distsched.framework.podinfo import PodInfo
from distsched.keys import Keys
from distsched.model import Pod, pod_nonzero_requests
from distsched.model.errors import ManifestError
from distsched.model.manifest import load_manifests
from tests.support.objects import node, pod
from tests.workers.harness import InProcessCluster


def with_pod_resources(obj: dict[str, Any], **resources: Any) -> dict[str, Any]:
    obj["spec"]["resources"] = resources
    return obj


def test_a_pod_level_request_decides_the_fit(r: redis.Redis, keys: Keys, clock: FakeClock) -> None:
    cluster = InProcessCluster(r, keys, clock)
    big = with_pod_resources(pod("big", cpu="100m"), requests={"cpu": "3"})
    fits = with_pod_resources(pod("fits", cpu="100m"), limits={"cpu": "1500m"})
    fits["spec"]["containers"][0]["resources"] = {}  # no container requests: limit = request
    cluster.create(node("n1", cpu="2"), big, fits)
    cluster.settle()
    assert cluster.node_of("big") == ""
    assert "NodeResourcesFit" in cluster.explain("big")["plugins"]
    assert cluster.node_of("fits") == "n1"
    state = cluster.worker.ledger.node_state(["n1"])["n1"]
    assert state.requested["cpu"] == 1500


def test_pod_level_requests_replace_the_containers_aggregate() -> None:
    obj = with_pod_resources(pod("p", cpu="200m", memory="100Mi"), requests={"memory": "1Gi"})
    parsed = Pod.from_dict(obj)
    info = PodInfo.of(parsed)
    assert info.requests["cpu"] == 200 and info.requests["memory"] == 2**30
    assert pod_nonzero_requests(parsed) == (200, 2**30)


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ({"requests": {"nvidia.com/gpu": "1"}}, "spec.resources.requests.nvidia.com/gpu"),
        ({"limits": {"ephemeral-storage": "1Gi"}}, "spec.resources.limits.ephemeral-storage"),
        ({"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}, "spec.resources.requests.cpu"),
        ({"requests": {"cpu": "50m"}}, "containers' aggregate request of 100m"),
        ({"requests": {"cpu": "lots"}}, 'spec.resources.requests.cpu: invalid quantity "lots"'),
    ],
)
def test_bad_pod_level_resources_are_refused(resources: dict[str, Any], expected: str) -> None:
    obj = with_pod_resources(pod("p", cpu="100m"), **resources)
    with pytest.raises(ManifestError) as info:
        load_manifests("pods.yaml", yaml.safe_dump(obj))
    message = str(info.value)
    assert message.startswith("pods.yaml: document 1")
    assert expected in message
