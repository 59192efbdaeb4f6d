"""from_dict / to_dict: round trips, defaults, the Kubernetes JSON shape."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings

from distsched.model import (
    DEFAULT_NAMESPACE,
    DEFAULT_SCHEDULER_NAME,
    ManifestError,
    Node,
    Pod,
    load_manifests,
    object_from_dict,
)
from tests.model.strategies import nodes, pods

ROUND_TRIP = settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])


@ROUND_TRIP
@given(pods)
def test_pod_round_trip(pod: Pod) -> None:
    assert Pod.from_dict(pod.to_dict()) == pod


@ROUND_TRIP
@given(nodes)
def test_node_round_trip(node: Node) -> None:
    assert Node.from_dict(node.to_dict()) == node


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(pods, nodes)
def test_round_trip_through_json_manifest(pod: Pod, node: Node) -> None:
    items = [pod.to_dict(), node.to_dict()]
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    assert load_manifests("list.json", text) == [pod, node]


@settings(max_examples=50, suppress_health_check=[HealthCheck.too_slow])
@given(pods)
def test_to_dict_is_plain_json(pod: Pod) -> None:
    data = pod.to_dict()
    assert json.loads(json.dumps(data)) == data


FULL_POD = """
apiVersion: v1
kind: Pod
metadata:
  name: web-1
  namespace: shop
  uid: 5f3c
  labels: {app: web, app.kubernetes.io/part-of: shop}
  annotations: {note: hello}
  resourceVersion: "42"
  creationTimestamp: 2024-05-01T10:00:00Z
spec:
  schedulerName: my-scheduler
  priority: 1000
  priorityClassName: high
  preemptionPolicy: Never
  nodeSelector: {disk: ssd}
  nodeName: node-1
  overhead: {cpu: 250m, memory: 120Mi}
  schedulingGates: [{name: example.com/quota}]
  containers:
  - name: app
    image: nginx:1.25
    command: [nginx, -g, daemon off;]  # unknown to us: ignored
    resources:
      requests: {cpu: 500m, memory: 1Gi, example.com/gpu: 1}
      limits: {cpu: 2, memory: 2Gi, example.com/gpu: 1}
    ports:
    - {containerPort: 8080, hostPort: 80, protocol: UDP, hostIP: 10.0.0.1, name: http}
  initContainers:
  - name: setup
    resources: {requests: {cpu: 1}}
  - name: proxy
    restartPolicy: Always
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions:
          - {key: zone, operator: In, values: [a, b]}
          - {key: cores, operator: Gt, values: ["8"]}
          matchFields:
          - {key: metadata.name, operator: NotIn, values: [node-9]}
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 5
        preference:
          matchExpressions: [{key: disk, operator: Exists}]
    podAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: topology.kubernetes.io/zone
        labelSelector: {matchLabels: {app: db}}
        namespaces: [shop, data]
    podAntiAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchExpressions: [{key: app, operator: NotIn, values: [web]}]
          namespaceSelector: {}
  tolerations:
  - {key: dedicated, operator: Equal, value: web, effect: NoSchedule}
  - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute,
     tolerationSeconds: 300}
  - {operator: Exists}
  topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: DoNotSchedule
    labelSelector: {matchLabels: {app: web}}
    minDomains: 3
    matchLabelKeys: [pod-template-hash]
    nodeAffinityPolicy: Ignore
    nodeTaintsPolicy: Honor
status:
  phase: Running
  nominatedNodeName: node-2
  conditions:
  - {type: PodScheduled, status: "False", reason: Unschedulable, message: no fit}
"""


def test_full_pod_fields() -> None:
    (pod,) = load_manifests("pod.yaml", FULL_POD)
    assert isinstance(pod, Pod)
    meta = pod.metadata
    assert (meta.name, meta.namespace, meta.uid) == ("web-1", "shop", "5f3c")
    assert meta.resource_version == "42"
    assert meta.creation_timestamp == "2024-05-01T10:00:00Z"  # not turned into a datetime
    assert meta.labels == {"app": "web", "app.kubernetes.io/part-of": "shop"}
    spec = pod.spec
    assert spec.scheduler_name == "my-scheduler"
    assert (spec.priority, spec.priority_class_name) == (1000, "high")
    assert spec.preemption_policy == "Never"
    assert spec.overhead == {"cpu": 250, "memory": 120 * 1024**2}
    assert spec.scheduling_gates == ("example.com/quota",)
    app = spec.containers[0]
    assert app.resources.requests == {"cpu": 500, "memory": 1024**3, "example.com/gpu": 1}
    assert app.resources.limits == {"cpu": 2000, "memory": 2 * 1024**3, "example.com/gpu": 1}
    port = app.ports[0]
    assert (port.container_port, port.host_port, port.protocol, port.host_ip) == (
        8080,
        80,
        "UDP",
        "10.0.0.1",
    )
    assert [c.restart_policy for c in spec.init_containers] == ["", "Always"]
    node_affinity = spec.affinity.node_affinity  # type: ignore[union-attr]
    assert node_affinity is not None and node_affinity.required is not None
    term = node_affinity.required[0]
    assert [(e.key, e.operator, e.values) for e in term.match_expressions] == [
        ("zone", "In", ("a", "b")),
        ("cores", "Gt", ("8",)),
    ]
    assert term.match_fields[0].values == ("node-9",)
    assert node_affinity.preferred[0].weight == 5
    anti = spec.affinity.pod_anti_affinity  # type: ignore[union-attr]
    assert anti is not None and anti.preferred[0].term.namespace_selector is not None
    assert spec.tolerations[1].toleration_seconds == 300
    assert spec.tolerations[2].key == "" and spec.tolerations[2].operator == "Exists"
    spread = spec.topology_spread_constraints[0]
    assert (spread.min_domains, spread.match_label_keys) == (3, ("pod-template-hash",))
    assert (spread.node_affinity_policy, spread.node_taints_policy) == ("Ignore", "Honor")
    assert pod.status.phase == "Running"
    assert pod.status.nominated_node_name == "node-2"
    assert pod.status.conditions[0].reason == "Unschedulable"
    assert Pod.from_dict(pod.to_dict()) == pod
    # The YAML we write reads back to the same object too.
    assert load_manifests("again.yaml", yaml.safe_dump(pod.to_dict())) == [pod]


def minimal_pod(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}], **spec}}


def test_pod_defaults() -> None:
    pod = Pod.from_dict(minimal_pod())
    assert pod.metadata.namespace == DEFAULT_NAMESPACE
    assert pod.key == "default/p"
    assert pod.spec.scheduler_name == DEFAULT_SCHEDULER_NAME
    assert pod.spec.priority is None
    assert pod.spec.preemption_policy == "PreemptLowerPriority"
    assert pod.status.phase == "Pending"


def test_nulls_mean_absent() -> None:
    data = minimal_pod(tolerations=None, nodeSelector=None, affinity=None, priority=None)
    data["metadata"]["labels"] = None
    data["metadata"]["creationTimestamp"] = None  # kubectl writes this
    data["status"] = None
    assert Pod.from_dict(data) == Pod.from_dict(minimal_pod())


def test_defaults_inside_lists() -> None:
    pod = Pod.from_dict(
        minimal_pod(
            containers=[{"name": "c", "ports": [{"containerPort": 80}]}],
            tolerations=[{"key": "k", "value": "v"}],
            topologySpreadConstraints=[
                {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}
            ],
        )
    )
    assert pod.spec.containers[0].ports[0].protocol == "TCP"
    assert pod.spec.containers[0].ports[0].host_port == 0
    assert pod.spec.tolerations[0].operator == "Equal"
    spread = pod.spec.topology_spread_constraints[0]
    assert (spread.node_affinity_policy, spread.node_taints_policy) == ("Honor", "Ignore")
    assert spread.label_selector is None and spread.min_domains is None


def test_requests_default_to_limits_per_resource() -> None:
    pod = Pod.from_dict(
        minimal_pod(
            containers=[
                {
                    "name": "c",
                    "resources": {
                        "requests": {"cpu": "100m"},
                        "limits": {"cpu": 1, "memory": "1Gi"},
                    },
                }
            ]
        )
    )
    assert pod.spec.containers[0].resources.requests == {"cpu": 100, "memory": 1024**3}


def test_node_defaults_and_namespace_cleared() -> None:
    node = Node.from_dict(
        {
            "metadata": {"name": "n1", "namespace": "ignored"},
            "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": 110}},
        }
    )
    assert node.metadata.namespace == ""
    assert node.key == "n1"
    assert node.status.allocatable == {"cpu": 4000, "memory": 8 * 1024**3, "pods": 110}
    assert node.spec.unschedulable is False


def test_node_explicit_allocatable_is_kept() -> None:
    node = Node.from_dict(
        {
            "metadata": {"name": "n1"},
            "status": {"capacity": {"cpu": "4"}, "allocatable": {"cpu": "3500m"}},
        }
    )
    assert node.status.allocatable == {"cpu": 3500}
    empty = Node.from_dict(
        {"metadata": {"name": "n1"}, "status": {"capacity": {"cpu": "4"}, "allocatable": {}}}
    )
    assert empty.status.allocatable == {}
    assert Node.from_dict(empty.to_dict()) == empty


def test_to_dict_shape() -> None:
    pod = Pod.from_dict(
        minimal_pod(
            containers=[{"name": "c", "resources": {"requests": {"cpu": 0.25, "memory": 1048576}}}],
            priority=5,
        )
    )
    data = pod.to_dict()
    assert data["apiVersion"] == "v1" and data["kind"] == "Pod"
    assert data["metadata"] == {"name": "p", "namespace": "default"}
    assert data["spec"]["containers"] == [
        {"name": "c", "resources": {"requests": {"cpu": "250m", "memory": "1Mi"}}}
    ]
    assert data["spec"]["priority"] == 5
    assert data["spec"]["schedulerName"] == "default-scheduler"
    assert "nodeName" not in data["spec"]
    assert data["status"] == {"phase": "Pending"}


def test_object_from_dict_dispatches_on_kind() -> None:
    node = object_from_dict({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}})
    assert isinstance(node, Node)
    pod = object_from_dict({"apiVersion": "v1", "kind": "Pod", **minimal_pod()})
    assert isinstance(pod, Pod)
    with pytest.raises(ManifestError, match='kind: unsupported kind "Service"'):
        object_from_dict({"kind": "Service", "metadata": {"name": "s"}})


def test_from_dict_checks_kind_and_api_version_when_given() -> None:
    with pytest.raises(ManifestError) as info:
        Pod.from_dict({"kind": "Node", **minimal_pod()})
    assert str(info.value) == '<api> (Pod default/p): kind: expected "Pod", got "Node"'
    with pytest.raises(ManifestError, match='unsupported apiVersion "apps/v1"'):
        Node.from_dict({"apiVersion": "apps/v1", "metadata": {"name": "n"}})


def test_from_dict_errors_name_the_api_source() -> None:
    data = minimal_pod(containers=[{"name": "c", "resources": {"requests": {"cpu": "12x"}}}])
    data["metadata"]["namespace"] = "shop"
    with pytest.raises(ManifestError) as info:
        Pod.from_dict(data)
    err = info.value
    assert str(err) == (
        '<api> (Pod shop/p): spec.containers[0].resources.requests.cpu: invalid quantity "12x"'
    )
    assert (err.source, err.document, err.kind, err.name) == ("<api>", None, "Pod", "shop/p")
    assert err.field == "spec.containers[0].resources.requests.cpu"
