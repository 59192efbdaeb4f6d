"""Every validation rule, with the exact field path and reason it reports."""
# ruff: noqa: E501  (one case per line: the expected messages are long literal strings)

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from distsched.model import ManifestError, Node, Pod, load_manifests

_DELETE = object()


def base_pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web-1", "labels": {"app": "web"}},
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "nginx",
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                    "ports": [{"containerPort": 80}],
                }
            ]
        },
    }


def base_node() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "node-1"},
        "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]},
        "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": 110}},
    }


def mutate(data: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """Set (or delete, with _DELETE) the value at a dotted path; numbers index lists."""
    out = copy.deepcopy(data)
    parts = path.split(".")
    target: Any = out
    for part in parts[:-1]:
        key: Any = int(part) if part.isdigit() else part
        if isinstance(target, dict) and key not in target:
            target[key] = {}
        target = target[key]
    last: Any = int(parts[-1]) if parts[-1].isdigit() else parts[-1]
    if value is _DELETE:
        del target[last]
    elif isinstance(target, list) and last == len(target):
        target.append(value)
    else:
        target[last] = value
    return out


NODE_AFFINITY = "spec.affinity.nodeAffinity"
REQUIRED_TERMS = f"{NODE_AFFINITY}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
EXPR = f"{REQUIRED_TERMS}[0].matchExpressions[0]"


def node_expr(**expr: Any) -> tuple[str, Any]:
    return (
        "spec.affinity",
        {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [expr]}]
                }
            }
        },
    )


def spread(**fields: Any) -> tuple[str, Any]:
    constraint = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
    constraint.update(fields)
    return "spec.topologySpreadConstraints", [constraint]


def toleration(**fields: Any) -> tuple[str, Any]:
    return "spec.tolerations", [fields]


def anti_affinity_selector(**expr: Any) -> tuple[str, Any]:
    term = {"topologyKey": "zone", "labelSelector": {"matchExpressions": [expr]}}
    return "spec.affinity", {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    }


C0 = "spec.containers.0"
LONG = "a" * 64

# (mutation path, value, expected "field: reason" fragment) applied to base_pod().
POD_CASES: list[tuple[str, Any, str]] = [
    # header
    ("apiVersion", "v2", 'apiVersion: no matches for kind "Pod" in version "v2"'),
    ("apiVersion", _DELETE, "apiVersion: required value is missing"),
    ("kind", "Pdo", 'apiVersion: no matches for kind "Pdo" in version "v1"'),
    ("kind", _DELETE, "kind: required value is missing"),
    ("kind", 7, "kind: expected a string, got integer"),
    # metadata
    ("metadata", _DELETE, "metadata: required value is missing"),
    ("metadata", [], "metadata: expected an object, got list"),
    ("metadata.name", _DELETE, "metadata.name: required value is missing"),
    ("metadata.name", "", "metadata.name: required value is missing"),
    (
        "metadata.name",
        "Web_1",
        'metadata.name: invalid value "Web_1": must be a lowercase RFC 1123 subdomain',
    ),
    (
        "metadata.name",
        "web-",
        'metadata.name: invalid value "web-": must be a lowercase RFC 1123 subdomain',
    ),
    (
        "metadata.name",
        "a" * 254,
        'metadata.name: invalid value "' + "a" * 254 + '": must be no more than 253 characters',
    ),
    (
        "metadata.namespace",
        "a.b",
        'metadata.namespace: invalid value "a.b": must be a lowercase RFC 1123 label',
    ),
    (
        "metadata.namespace",
        LONG,
        f'metadata.namespace: invalid value "{LONG}": must be no more than 63 characters',
    ),
    ("metadata.labels", ["a"], "metadata.labels: expected an object, got list"),
    (
        "metadata.labels",
        {"-bad": "x"},
        'metadata.labels[-bad]: invalid key "-bad": name part must consist of',
    ),
    ("metadata.labels", {"a/b/c": "x"}, "must have at most one '/'"),
    (
        "metadata.labels",
        {"Example.com/x": "x"},
        'invalid key "Example.com/x": prefix part must be a lowercase RFC 1123 subdomain',
    ),
    ("metadata.labels", {"/x": "x"}, "prefix part must be non-empty"),
    ("metadata.labels", {"example.com/": "x"}, "name part must be non-empty"),
    ("metadata.labels", {LONG: "x"}, "name part must be no more than 63 characters"),
    (
        "metadata.labels",
        {"app": LONG},
        f'metadata.labels.app: invalid value "{LONG}": must be no more than 63 characters',
    ),
    (
        "metadata.labels",
        {"app": "a b"},
        'metadata.labels.app: invalid value "a b": must be empty or consist of',
    ),
    (
        "metadata.labels",
        {"version": 1},
        "metadata.labels.version: expected a string, got integer (quote it)",
    ),
    (
        "metadata.labels",
        {"on": True},
        "metadata.labels.on: expected a string, got boolean (quote it)",
    ),
    (
        "metadata.annotations",
        {"bad key": "x"},
        'metadata.annotations[bad key]: invalid key "bad key"',
    ),
    (
        "metadata.annotations",
        {"big": "x" * 262145},
        "metadata.annotations: may not be larger than 262144 bytes",
    ),
    # spec basics
    ("spec", _DELETE, "spec: required value is missing"),
    ("spec", "x", "spec: expected an object, got string"),
    ("spec.containers", "abc", "spec.containers: expected a list, got string"),
    ("spec.containers", [], "spec.containers: at least one container is required"),
    ("spec.containers", ["app"], "spec.containers[0]: expected an object, got string"),
    (
        "spec.priority",
        2**31,
        "spec.priority: must be between -2147483648 and 2147483647, got 2147483648",
    ),
    ("spec.priority", -(2**31) - 1, "spec.priority: must be between -2147483648 and 2147483647"),
    ("spec.priority", "high", "spec.priority: expected an integer, got string"),
    ("spec.priority", 1.5, "spec.priority: expected an integer, got number"),
    ("spec.priority", True, "spec.priority: expected an integer, got boolean"),
    ("spec.priorityClassName", "High", 'spec.priorityClassName: invalid value "High"'),
    (
        "spec.preemptionPolicy",
        "Always",
        'spec.preemptionPolicy: unsupported value "Always": supported values: "PreemptLowerPriority", "Never"',
    ),
    ("spec.schedulerName", "my scheduler", 'spec.schedulerName: invalid value "my scheduler"'),
    ("spec.nodeName", "Node_1", 'spec.nodeName: invalid value "Node_1"'),
    ("spec.nodeSelector", {"disk": 1}, "spec.nodeSelector.disk: expected a string, got integer"),
    ("spec.nodeSelector", {"-disk": "ssd"}, 'spec.nodeSelector[-disk]: invalid key "-disk"'),
    (
        "spec.schedulingGates",
        [{"name": "a/b/c"}],
        'spec.schedulingGates[0].name: invalid value "a/b/c"',
    ),
    ("spec.schedulingGates", [{}], "spec.schedulingGates[0].name: required value is missing"),
    (
        "spec.schedulingGates",
        [{"name": "g"}, {"name": "g"}],
        'spec.schedulingGates[1].name: duplicate scheduling gate "g"',
    ),
    (
        "spec.overhead",
        {"cpu": "-1"},
        'spec.overhead.cpu: must be greater than or equal to 0, got "-1"',
    ),
    # containers
    (f"{C0}.name", _DELETE, "spec.containers[0].name: required value is missing"),
    (
        f"{C0}.name",
        "App",
        'spec.containers[0].name: invalid value "App": must be a lowercase RFC 1123 label',
    ),
    (
        f"{C0}.resources.requests.cpu",
        "12x",
        'spec.containers[0].resources.requests.cpu: invalid quantity "12x"',
    ),
    (
        f"{C0}.resources.requests.cpu",
        "1 Gi",
        'spec.containers[0].resources.requests.cpu: invalid quantity "1 Gi"',
    ),
    (
        f"{C0}.resources.requests.cpu",
        True,
        "spec.containers[0].resources.requests.cpu: invalid quantity True",
    ),
    (
        f"{C0}.resources.requests.cpu",
        None,
        "spec.containers[0].resources.requests.cpu: expected a quantity, got null",
    ),
    (
        f"{C0}.resources.requests.memory",
        "-1Gi",
        'spec.containers[0].resources.requests.memory: must be greater than or equal to 0, got "-1Gi"',
    ),
    (
        f"{C0}.resources.requests.memory",
        "8Ei",
        "spec.containers[0].resources.requests.memory: 8Ei exceeds the largest amount"
        " distsched can account (2^53-1 bytes)",
    ),
    (
        f"{C0}.resources.requests.cpu",
        "9007199254740992m",  # 2^53: the ledger's Lua numbers are doubles
        "spec.containers[0].resources.requests.cpu: 9007199254740992m exceeds the largest"
        " amount distsched can account (2^53-1 millicores)",
    ),
    (
        "spec.containers.1",
        {"name": "two", "resources": {"requests": {"cpu": "9007199254740900m"}}},
        "spec: the pod's cpu requests add up to 9007199254741, more than the largest amount distsched can account (2^53-1 millicores)",
    ),
    (
        "spec.overhead",
        {"memory": "9007199254740991"},
        "spec: the pod's memory requests add up to 9007199321849855, more than the largest amount distsched can account (2^53-1 bytes)",
    ),
    (
        f"{C0}.resources.limits",
        {"cpu": "50m"},
        "spec.containers[0].resources.requests: cpu: must be less than or equal to cpu limit of 50m",
    ),
    (
        f"{C0}.resources.requests.gpu",
        1,
        'spec.containers[0].resources.requests.gpu: invalid resource name "gpu": must be a standard resource',
    ),
    (f"{C0}.resources.requests.pods", 1, 'invalid resource name "pods"'),
    (f"{C0}.resources.requests", {"kubernetes.io/gpu": 1}, "may not use the kubernetes.io domain"),
    (f"{C0}.resources", [], "spec.containers[0].resources: expected an object, got list"),
    (
        f"{C0}.ports.0.hostPort",
        70000,
        "spec.containers[0].ports[0].hostPort: must be between 0 and 65535, got 70000",
    ),
    (
        f"{C0}.ports.0.hostPort",
        -1,
        "spec.containers[0].ports[0].hostPort: must be between 0 and 65535, got -1",
    ),
    (
        f"{C0}.ports.0.containerPort",
        0,
        "spec.containers[0].ports[0].containerPort: must be between 1 and 65535, got 0",
    ),
    (
        f"{C0}.ports.0.containerPort",
        _DELETE,
        "spec.containers[0].ports[0].containerPort: required value is missing",
    ),
    (
        f"{C0}.ports.0.containerPort",
        "80",
        "spec.containers[0].ports[0].containerPort: expected an integer, got string",
    ),
    (
        f"{C0}.ports.0.protocol",
        "HTTP",
        'spec.containers[0].ports[0].protocol: unsupported value "HTTP": supported values: "TCP", "UDP", "SCTP"',
    ),
    (
        f"{C0}.ports.0.hostIP",
        "300.1.1.1",
        'spec.containers[0].ports[0].hostIP: invalid value "300.1.1.1": must be a valid IP address',
    ),
    (
        f"{C0}.ports",
        [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 81, "hostPort": 8080}],
        "spec.containers: duplicate hostPort 8080/TCP on *",
    ),
    (
        f"{C0}.restartPolicy",
        "Always",
        "spec.containers[0].restartPolicy: may only be set on init containers",
    ),
    (
        "spec.initContainers",
        [{"name": "app"}],
        'spec.initContainers[0].name: duplicate container name "app"',
    ),
    (
        "spec.initContainers",
        [{"name": "i", "restartPolicy": "OnFailure"}],
        'spec.initContainers[0].restartPolicy: unsupported value "OnFailure": supported values: "Always"',
    ),
    (
        "spec.initContainers",
        [{"name": "i", "resources": {"requests": {"memory": "1Q"}}}],
        'spec.initContainers[0].resources.requests.memory: invalid quantity "1Q"',
    ),
    # tolerations
    (
        *toleration(key="k", operator="Gt"),
        'spec.tolerations[0].operator: unsupported value "Gt": supported values: "Equal", "Exists"',
    ),
    (
        *toleration(key="k", effect="Never"),
        'spec.tolerations[0].effect: unsupported value "Never": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"',
    ),
    (
        *toleration(key="k", operator="Exists", value="v"),
        'spec.tolerations[0].value: must be empty when operator is "Exists"',
    ),
    (*toleration(value="v"), 'spec.tolerations[0].operator: must be "Exists" when key is empty'),
    (*toleration(key="k", value="a b"), 'spec.tolerations[0].value: invalid value "a b"'),
    (
        *toleration(key="k", effect="NoSchedule", tolerationSeconds=5),
        'spec.tolerations[0].effect: must be "NoExecute" when tolerationSeconds is set',
    ),
    (
        *toleration(key="k", tolerationSeconds="5"),
        "spec.tolerations[0].tolerationSeconds: expected an integer, got string",
    ),
    (*toleration(key="a b"), 'spec.tolerations[0].key: invalid value "a b"'),
    # node affinity
    (
        *node_expr(key="zone", operator="Like", values=["a"]),
        f'{EXPR}.operator: unsupported value "Like": supported values: "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"',
    ),
    (
        *node_expr(key="zone", operator="In"),
        f'{EXPR}.values: must be specified when operator is "In"',
    ),
    (
        *node_expr(key="zone", operator="NotIn", values=[]),
        f'{EXPR}.values: must be specified when operator is "NotIn"',
    ),
    (
        *node_expr(key="zone", operator="Exists", values=["a"]),
        f'{EXPR}.values: may not be specified when operator is "Exists"',
    ),
    (
        *node_expr(key="zone", operator="DoesNotExist", values=["a"]),
        f'{EXPR}.values: may not be specified when operator is "DoesNotExist"',
    ),
    (
        *node_expr(key="cores", operator="Gt", values=["1", "2"]),
        f'{EXPR}.values: must have exactly one value when operator is "Gt"',
    ),
    (
        *node_expr(key="cores", operator="Lt", values=["abc"]),
        f'{EXPR}.values: invalid value "abc": must be a 64-bit integer',
    ),
    (
        *node_expr(key="cores", operator="Lt", values=["99999999999999999999"]),
        "must be a 64-bit integer",
    ),
    (*node_expr(operator="Exists"), f"{EXPR}.key: required value is missing"),
    (
        *node_expr(key="zone", operator="In", values=[1]),
        f"{EXPR}.values[0]: expected a string, got integer",
    ),
    (
        "spec.affinity",
        {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}
            }
        },
        f"{REQUIRED_TERMS}: must have at least one node selector term",
    ),
    (
        "spec.affinity",
        {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.labels", "operator": "In", "values": ["a"]}
                            ]
                        }
                    ]
                }
            }
        },
        f'{REQUIRED_TERMS}[0].matchFields[0].key: unsupported field "metadata.labels": only "metadata.name" is supported',
    ),
    (
        "spec.affinity",
        {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["a", "b"]}
                            ]
                        }
                    ]
                }
            }
        },
        f'{REQUIRED_TERMS}[0].matchFields[0].values: must have exactly one value when operator is "In"',
    ),
    (
        "spec.affinity",
        {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "Exists"}]}
                    ]
                }
            }
        },
        f'{REQUIRED_TERMS}[0].matchFields[0].operator: unsupported value "Exists"',
    ),
    (
        "spec.affinity",
        {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 0, "preference": {}}]
            }
        },
        f"{NODE_AFFINITY}.preferredDuringSchedulingIgnoredDuringExecution[0].weight: must be in the range 1-100, got 0",
    ),
    (
        "spec.affinity",
        {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 101, "preference": {}}
                ]
            }
        },
        "weight: must be in the range 1-100, got 101",
    ),
    (
        "spec.affinity",
        {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1}]}},
        f"{NODE_AFFINITY}.preferredDuringSchedulingIgnoredDuringExecution[0].preference: required value is missing",
    ),
    # pod (anti-)affinity
    (
        "spec.affinity",
        {
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {}}]
            }
        },
        "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: required value is missing",
    ),
    (
        "spec.affinity",
        {
            "podAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 200, "podAffinityTerm": {"topologyKey": "zone"}}
                ]
            }
        },
        "spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: must be in the range 1-100, got 200",
    ),
    (
        "spec.affinity",
        {
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "zone", "namespaces": ["Shop"]}
                ]
            }
        },
        'spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].namespaces[0]: invalid value "Shop"',
    ),
    (
        *anti_affinity_selector(key="app", operator="Gt", values=["1"]),
        'spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0].operator: unsupported value "Gt": supported values: "In", "NotIn", "Exists", "DoesNotExist"',
    ),
    (
        *anti_affinity_selector(key="app", operator="In"),
        'labelSelector.matchExpressions[0].values: must be specified when operator is "In"',
    ),
    (
        *anti_affinity_selector(key="app", operator="Exists", values=["x"]),
        'labelSelector.matchExpressions[0].values: may not be specified when operator is "Exists"',
    ),
    (
        *anti_affinity_selector(key="app", operator="In", values=["a b"]),
        'labelSelector.matchExpressions[0].values[0]: invalid value "a b"',
    ),
    # topology spread
    (
        *spread(maxSkew=0),
        "spec.topologySpreadConstraints[0].maxSkew: must be greater than or equal to 1, got 0",
    ),
    (*spread(maxSkew=None), "spec.topologySpreadConstraints[0].maxSkew: required value is missing"),
    (
        *spread(topologyKey=""),
        "spec.topologySpreadConstraints[0].topologyKey: required value is missing",
    ),
    (
        *spread(whenUnsatisfiable="Maybe"),
        'spec.topologySpreadConstraints[0].whenUnsatisfiable: unsupported value "Maybe": supported values: "DoNotSchedule", "ScheduleAnyway"',
    ),
    (
        *spread(minDomains=0),
        "spec.topologySpreadConstraints[0].minDomains: must be greater than or equal to 1, got 0",
    ),
    (
        *spread(minDomains=2, whenUnsatisfiable="ScheduleAnyway"),
        "spec.topologySpreadConstraints[0].minDomains: requires whenUnsatisfiable=DoNotSchedule, not ScheduleAnyway",
    ),
    (
        *spread(matchLabelKeys=["pod-template-hash"]),
        "spec.topologySpreadConstraints[0].matchLabelKeys: may not be set when labelSelector is not set",
    ),
    (
        *spread(labelSelector={"matchLabels": {"app": "web"}}, matchLabelKeys=["app"]),
        'spec.topologySpreadConstraints[0].matchLabelKeys[0]: "app" is also in labelSelector',
    ),
    (
        *spread(nodeAffinityPolicy="Sometimes"),
        'spec.topologySpreadConstraints[0].nodeAffinityPolicy: unsupported value "Sometimes": supported values: "Honor", "Ignore"',
    ),
    (
        *spread(nodeTaintsPolicy="honor"),
        'spec.topologySpreadConstraints[0].nodeTaintsPolicy: unsupported value "honor"',
    ),
    (
        "spec.topologySpreadConstraints",
        [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}] * 2,
        'spec.topologySpreadConstraints[1]: duplicate constraint for topologyKey "zone" and DoNotSchedule',
    ),
    # status
    (
        "status.phase",
        "Done",
        'status.phase: unsupported value "Done": supported values: "Pending", "Running"',
    ),
    (
        "status.conditions",
        [{"type": "PodScheduled", "status": "Maybe"}],
        'status.conditions[0].status: unsupported value "Maybe"',
    ),
    (
        "status.conditions",
        [{"status": "True"}],
        "status.conditions[0].type: required value is missing",
    ),
    ("status.nominatedNodeName", "Node 2", 'status.nominatedNodeName: invalid value "Node 2"'),
]


def _case_id(case: tuple[str, Any, str]) -> str:
    return case[2].split(":")[0][:60]


@pytest.mark.parametrize(
    ("path", "value", "expected"), POD_CASES, ids=[_case_id(c) for c in POD_CASES]
)
def test_pod_rule(path: str, value: Any, expected: str) -> None:
    data = mutate(base_pod(), path, value)
    with pytest.raises(ManifestError) as info:
        load_manifests("pods.yaml", yaml.safe_dump(data))
    message = str(info.value)
    assert expected in message
    assert message.startswith("pods.yaml: document 1")
    assert "\n" not in message
    if path in ("apiVersion", "kind") and value is _DELETE:
        Pod.from_dict(data)  # the Python API accepts objects without a header
        return
    # The Python API applies the same rules, with its own source name.
    with pytest.raises(ManifestError) as api_info:
        Pod.from_dict(data)
    assert str(api_info.value).startswith("<api> (Pod")
    if path not in ("kind", "apiVersion"):  # from_dict knows only the kind it was asked for
        assert expected in str(api_info.value)


NODE_CASES: list[tuple[str, Any, str]] = [
    ("metadata.name", "Node_1", 'metadata.name: invalid value "Node_1"'),
    ("spec.unschedulable", "yes", "spec.unschedulable: expected a boolean, got string"),
    (
        "spec.taints.0.effect",
        "NoRun",
        'spec.taints[0].effect: unsupported value "NoRun": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"',
    ),
    ("spec.taints.0.effect", _DELETE, "spec.taints[0].effect: required value is missing"),
    ("spec.taints.0.key", _DELETE, "spec.taints[0].key: required value is missing"),
    ("spec.taints.0.value", "a b", 'spec.taints[0].value: invalid value "a b"'),
    (
        "spec.taints.1",
        {"key": "k", "effect": "NoSchedule", "value": "other"},
        'spec.taints[1]: duplicate taint "k" with effect NoSchedule',
    ),
    (
        "status.capacity.cpu",
        "-4",
        'status.capacity.cpu: must be greater than or equal to 0, got "-4"',
    ),
    ("status.capacity.memory", "8GB", 'status.capacity.memory: invalid quantity "8GB"'),
    ("status.allocatable", {"cpu": "x"}, 'status.allocatable.cpu: invalid quantity "x"'),
    (
        "status.allocatable",
        {"cpu": "9223372036854775807m"},
        "status.allocatable.cpu: 9223372036854775807m exceeds the largest amount distsched can account (2^53-1 millicores)",
    ),
    (
        "status.capacity",
        {"bad name!": 1},
        'status.capacity[bad name!]: invalid resource name "bad name!"',
    ),
    (
        "status.conditions",
        [{"type": "Ready", "status": "yes"}],
        'status.conditions[0].status: unsupported value "yes"',
    ),
    (
        "status.images",
        [{"names": ["nginx"], "sizeBytes": -1}],
        "status.images[0].sizeBytes: must be between 0 and 9223372036854775807, got -1",
    ),
    ("status.images", [{"names": "nginx"}], "status.images[0].names: expected a list, got string"),
]


@pytest.mark.parametrize(
    ("path", "value", "expected"), NODE_CASES, ids=[_case_id(c) for c in NODE_CASES]
)
def test_node_rule(path: str, value: Any, expected: str) -> None:
    data = mutate(base_node(), path, value)
    with pytest.raises(ManifestError) as info:
        load_manifests("nodes.yaml", yaml.safe_dump(data))
    assert expected in str(info.value)
    assert str(info.value).startswith("nodes.yaml: document 1 (Node ")
    with pytest.raises(ManifestError) as api_info:
        Node.from_dict(data)
    assert str(api_info.value).startswith("<api> (Node")
    assert expected in str(api_info.value)


def test_bases_are_valid() -> None:
    assert load_manifests("ok.yaml", yaml.safe_dump_all([base_pod(), base_node()]))


def test_full_message_format() -> None:
    documents = [base_node(), base_pod(), mutate(base_pod(), "metadata.name", "web-2")]
    documents[2] = mutate(documents[2], f"{C0}.resources.requests.cpu", "12x")
    text = yaml.safe_dump_all(documents)
    with pytest.raises(ManifestError) as info:
        load_manifests("pods.yaml", text)
    assert str(info.value) == (
        "pods.yaml: document 3 (Pod default/web-2): spec.containers[0].resources.requests.cpu: "
        'invalid quantity "12x"'
    )
    err = info.value
    assert (err.source, err.document, err.item, err.kind, err.name) == (
        "pods.yaml",
        3,
        None,
        "Pod",
        "default/web-2",
    )


def test_unknown_fields_are_ignored() -> None:
    data = base_pod()
    data["spec"]["containers"][0]["command"] = ["sleep", "1"]
    data["spec"]["containers"][0]["env"] = [{"name": "A", "value": "1"}]
    data["metadata"]["ownerReferences"] = [{"kind": "ReplicaSet"}]
    data["spec"]["hostNetwork"] = "not even checked"
    data["extra"] = 1
    assert Pod.from_dict(data) == Pod.from_dict(base_pod())


def test_valid_edge_values() -> None:
    data = base_pod()
    data["metadata"]["name"] = "a" * 253
    data["metadata"]["namespace"] = "n" * 63
    data["metadata"]["labels"] = {"example.com/" + "k" * 63: "v" * 63, "empty": ""}
    data["metadata"]["annotations"] = {"Example.COM/Note": "free text: anything"}
    data["spec"]["priority"] = -(2**31)
    data["spec"]["containers"][0]["ports"] = [
        {"containerPort": 65535, "hostPort": 65535, "hostIP": "::1", "protocol": "SCTP"},
        {"containerPort": 1, "hostPort": 65535, "protocol": "UDP"},  # other protocol: no clash
    ]
    data["spec"]["tolerations"] = [
        {"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": -1}
    ]
    pod = Pod.from_dict(data)
    assert pod.spec.priority == -(2**31)
