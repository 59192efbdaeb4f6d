"""PodGroups (issue 22): both apiVersions, validation naming each field, which group a pod
belongs to (label or spec.schedulingGroup), and the status computed from the pods."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from distsched.model import ManifestError, Pod, load_manifests
from distsched.model.podgroups import (
    POD_GROUP_LABEL,
    PodGroup,
    group_of,
    group_of_object,
    podgroup_status,
)

PLUGINS = {
    "apiVersion": "scheduling.x-k8s.io/v1alpha1",
    "kind": "PodGroup",
    "metadata": {"name": "gang", "namespace": "team"},
    "spec": {
        "minMember": 3,
        "minResources": {"cpu": "2500m", "memory": "1Gi", "nvidia.com/gpu": 2},
        "scheduleTimeoutSeconds": 60,
    },
}
KUBE = {
    "apiVersion": "scheduling.k8s.io/v1alpha2",
    "kind": "PodGroup",
    "metadata": {"name": "trainer"},
    "spec": {
        "schedulingPolicy": {"gang": {"minCount": 4}},
        "podGroupTemplateRef": {"workload": {"workloadName": "w", "podGroupTemplateName": "t"}},
    },
}


def with_(base: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of ``base`` with the dotted ``path`` set to ``value`` (removed for ``...``)."""
    out = copy.deepcopy(base)
    *parents, last = path.split(".")
    node = out
    for key in parents:
        node = node.setdefault(key, {})
    if value is ...:
        node.pop(last, None)
    else:
        node[last] = value
    return out


def test_scheduler_plugins_podgroup() -> None:
    group = PodGroup.from_dict(PLUGINS)
    assert group == PodGroup(
        namespace="team",
        name="gang",
        min_member=3,
        min_resources={"cpu": 2500, "memory": 2**30, "nvidia.com/gpu": 2},
        schedule_timeout_s=60,
        api_version="scheduling.x-k8s.io/v1alpha1",
    )
    assert group.key == "team/gang" and group.kind == "PodGroup"
    assert group.to_dict() == PLUGINS  # kept as given
    minimal = PodGroup.from_dict(
        with_(with_(PLUGINS, "spec.minResources", ...), "metadata", {"name": "g"})
    )
    assert minimal.key == "default/g" and minimal.min_resources == {}
    assert minimal.to_dict()["metadata"]["namespace"] == "default"
    assert (
        PodGroup.from_dict(with_(PLUGINS, "spec.scheduleTimeoutSeconds", ...)).schedule_timeout_s
        is None
    )


def test_kubernetes_podgroup_gang_and_basic() -> None:
    group = PodGroup.from_dict(KUBE)
    assert (group.key, group.min_member, group.api_version) == (
        "default/trainer",
        4,
        "scheduling.k8s.io/v1alpha2",
    )
    assert group.min_resources == {} and group.schedule_timeout_s is None
    assert group.to_dict()["spec"]["podGroupTemplateRef"] == KUBE["spec"]["podGroupTemplateRef"]
    assert group.to_dict()["apiVersion"] == "scheduling.k8s.io/v1alpha2"
    basic = PodGroup.from_dict(with_(KUBE, "spec.schedulingPolicy", {"basic": {}}))
    assert basic.min_member == 1


def test_manifests_take_both_and_one_name_is_one_group_per_namespace() -> None:
    text = (
        "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\n"
        "metadata: {name: g}\nspec: {minMember: 2}\n---\n"
        "apiVersion: scheduling.k8s.io/v1alpha2\nkind: PodGroup\n"
        "metadata: {name: g, namespace: other}\nspec: {schedulingPolicy: {basic: {}}}\n"
    )
    groups = load_manifests("g.yaml", text)
    assert [(g.kind, g.key) for g in groups] == [("PodGroup", "default/g"), ("PodGroup", "other/g")]
    twice = text.replace("namespace: other", "namespace: default")
    with pytest.raises(ManifestError) as info:
        load_manifests("g.yaml", twice)
    assert str(info.value).startswith("g.yaml: document 2 (PodGroup default/g): metadata.name:")
    assert "duplicate PodGroup" in str(info.value)


@pytest.mark.parametrize(
    ("data", "field", "reason"),
    [
        (with_(PLUGINS, "spec.minMember", ...), "spec.minMember", "required value is missing"),
        (with_(PLUGINS, "spec.minMember", 0), "spec.minMember", "between 1 and 1000, got 0"),
        (with_(PLUGINS, "spec.minMember", -2), "spec.minMember", "between 1 and 1000"),
        (with_(PLUGINS, "spec.minMember", 1001), "spec.minMember", "got 1001"),
        (with_(PLUGINS, "spec.minMember", "3"), "spec.minMember", "expected an integer"),
        (with_(PLUGINS, "spec.minMember", True), "spec.minMember", "expected an integer"),
        (with_(PLUGINS, "spec.minMember", 2.5), "spec.minMember", "expected an integer"),
        (with_(PLUGINS, "spec", ...), "spec", "required value is missing"),
        (with_(PLUGINS, "spec", [1]), "spec", "expected an object"),
        (
            with_(PLUGINS, "spec.minResources", {"cpu": "2x"}),
            "spec.minResources.cpu",
            "invalid quantity",
        ),
        (
            with_(PLUGINS, "spec.minResources", {"memory": "-1Gi"}),
            "spec.minResources.memory",
            "must be greater than or equal to 0",
        ),
        (
            with_(PLUGINS, "spec.minResources", {"bad name": "1"}),
            "spec.minResources[bad name]",
            "invalid resource name",
        ),
        (with_(PLUGINS, "spec.minResources", "2"), "spec.minResources", "expected an object"),
        (
            with_(PLUGINS, "spec.scheduleTimeoutSeconds", -1),
            "spec.scheduleTimeoutSeconds",
            "must be between 0 and",
        ),
        (
            with_(PLUGINS, "spec.scheduleTimeoutSeconds", "60s"),
            "spec.scheduleTimeoutSeconds",
            "expected an integer",
        ),
        (with_(PLUGINS, "metadata.name", "Gang_1"), "metadata.name", "invalid value"),
        (with_(PLUGINS, "metadata.name", ...), "metadata.name", "required value is missing"),
        (with_(PLUGINS, "metadata.namespace", "a.b"), "metadata.namespace", "invalid value"),
        (with_(PLUGINS, "metadata", ...), "metadata", "required value is missing"),
        (
            with_(PLUGINS, "metadata.labels", {"a": "b c"}),
            "metadata.labels.a",
            "invalid value",
        ),
        (with_(PLUGINS, "apiVersion", ...), "apiVersion", "required value is missing"),
        (
            with_(PLUGINS, "apiVersion", "scheduling.sigs.k8s.io/v1alpha1"),
            "apiVersion",
            'expected "scheduling.x-k8s.io/v1alpha1" or "scheduling.k8s.io/v1alpha2"',
        ),
        (with_(PLUGINS, "kind", "Pod"), "kind", 'expected "PodGroup", got "Pod"'),
        (
            with_(KUBE, "spec.schedulingPolicy", ...),
            "spec.schedulingPolicy",
            "required value is missing",
        ),
        (
            with_(KUBE, "spec.schedulingPolicy", {}),
            "spec.schedulingPolicy",
            "must specify exactly one of: `basic`, `gang`",
        ),
        (
            with_(KUBE, "spec.schedulingPolicy", {"basic": {}, "gang": {"minCount": 2}}),
            "spec.schedulingPolicy",
            "must specify exactly one of",
        ),
        (
            with_(KUBE, "spec.schedulingPolicy.gang", {}),
            "spec.schedulingPolicy.gang.minCount",
            "required value is missing",
        ),
        (
            with_(KUBE, "spec.schedulingPolicy.gang.minCount", 0),
            "spec.schedulingPolicy.gang.minCount",
            "between 1 and 1000, got 0",
        ),
        (
            with_(KUBE, "spec.schedulingPolicy.gang", 3),
            "spec.schedulingPolicy.gang",
            "expected an object",
        ),
        # minMember is scheduler-plugins' field: v1alpha2 reads its own.
        (
            with_(with_(KUBE, "spec.schedulingPolicy", ...), "spec.minMember", 2),
            "spec.schedulingPolicy",
            "required value is missing",
        ),
    ],
)
def test_every_validation_error_names_its_field(
    data: dict[str, Any], field: str, reason: str
) -> None:
    with pytest.raises(ManifestError) as info:
        PodGroup.from_dict(data)
    assert info.value.field == field, str(info.value)
    assert reason in info.value.reason, str(info.value)
    assert info.value.kind == "PodGroup"
    assert "\n" not in str(info.value)


def test_errors_name_file_document_and_object_in_a_manifest() -> None:
    text = "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\n"
    text += "metadata: {name: g, namespace: ns}\nspec: {minMember: 0}\n"
    with pytest.raises(ManifestError) as info:
        load_manifests("g.yaml", "---\n" + text)
    assert str(info.value) == (
        "g.yaml: document 1 (PodGroup ns/g): spec.minMember: must be between 1 and 1000, got 0"
    )


def pod_dict(
    name: str,
    *,
    label: str | None = None,
    field: str | None = None,
    namespace: str | None = "team",
    node: str = "",
    phase: str = "",
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    if label is not None:
        meta["labels"] = {POD_GROUP_LABEL: label}
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x"}]}
    if field is not None:
        spec["schedulingGroup"] = {"podGroupName": field}
    if node:
        spec["nodeName"] = node
    out = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    if phase:
        out["status"] = {"phase": phase}
    return out


@pytest.mark.parametrize(
    ("pod", "group"),
    [
        (pod_dict("a", label="gang"), "team/gang"),
        (pod_dict("a", field="trainer"), "team/trainer"),
        (pod_dict("a", field="trainer", namespace=None), "default/trainer"),
        (pod_dict("a", label="gang", namespace=None), "default/gang"),
        (pod_dict("a", label="gang", field="trainer"), "team/trainer"),  # the field wins
        (pod_dict("a"), ""),
        (pod_dict("a", label=""), ""),
    ],
)
def test_group_of_a_pod_by_label_or_field(pod: dict[str, Any], group: str) -> None:
    assert group_of_object(pod) == group
    assert group_of(Pod.from_dict(pod)) == group


def test_a_pod_keeps_its_scheduling_group_through_the_typed_model() -> None:
    data = pod_dict("a", field="trainer")
    pod = Pod.from_dict(data)
    assert pod.spec.pod_group_name == "trainer"
    encoded = pod.to_dict()
    assert encoded["spec"]["schedulingGroup"] == {"podGroupName": "trainer"}
    assert Pod.from_dict(encoded) == pod
    assert "schedulingGroup" not in Pod.from_dict(pod_dict("b")).to_dict()["spec"]


@pytest.mark.parametrize(
    ("group", "field", "reason"),
    [
        ({}, "spec.schedulingGroup.podGroupName", "required value is missing"),
        ({"podGroupName": ""}, "spec.schedulingGroup.podGroupName", "required value is missing"),
        ({"podGroupName": "Bad_Name"}, "spec.schedulingGroup.podGroupName", "invalid value"),
        ({"podGroupName": 3}, "spec.schedulingGroup.podGroupName", "expected a string"),
        ("trainer", "spec.schedulingGroup", "expected an object"),
    ],
)
def test_a_bad_scheduling_group_names_its_field(group: Any, field: str, reason: str) -> None:
    data = pod_dict("a")
    data["spec"]["schedulingGroup"] = group
    with pytest.raises(ManifestError) as info:
        Pod.from_dict(data)
    assert info.value.field == field and reason in info.value.reason, str(info.value)


GROUP = PodGroup.from_dict(with_(PLUGINS, "spec.minMember", 2))


@pytest.mark.parametrize(
    ("pods", "phase", "counts"),
    [
        ([], "Pending", (0, 0, 0, 0, 0)),
        ([pod_dict("a", label="gang", node="n1")], "Pending", (1, 1, 0, 0, 0)),
        (
            [pod_dict("a", label="gang", node="n1"), pod_dict("b", label="gang")],
            "Scheduling",
            (2, 1, 0, 0, 0),
        ),
        (
            [pod_dict("a", label="gang", node="n1"), pod_dict("b", field="gang", node="n2")],
            "Scheduled",
            (2, 2, 0, 0, 0),
        ),
        (
            [
                pod_dict("a", label="gang", node="n1", phase="Running"),
                pod_dict("b", label="gang", node="n2", phase="Succeeded"),
                pod_dict("c", label="gang"),
            ],
            "Running",
            (3, 2, 1, 1, 0),
        ),
        (
            [
                pod_dict("a", label="gang", node="n1", phase="Running"),
                pod_dict("b", label="gang", node="n2", phase="Failed"),
            ],
            "Failed",
            (2, 2, 1, 0, 1),
        ),
        (
            [
                pod_dict("a", label="gang", node="n1", phase="Succeeded"),
                pod_dict("b", label="gang", node="n2", phase="Succeeded"),
                pod_dict("c", label="gang", node="n2", phase="Failed"),
            ],
            "Finished",
            (3, 3, 0, 2, 1),
        ),
        (
            # Pods of another group, of no group, or of another namespace are not members.
            [
                pod_dict("a", label="gang", node="n1"),
                pod_dict("b", label="other", node="n1"),
                pod_dict("c", node="n1"),
                pod_dict("d", label="gang", node="n1", namespace="elsewhere"),
                pod_dict("e", label="gang", field="other", node="n1"),
            ],
            "Pending",
            (1, 1, 0, 0, 0),
        ),
    ],
)
def test_status_follows_scheduler_plugins_phases(
    pods: list[dict[str, Any]], phase: str, counts: tuple[int, ...]
) -> None:
    status = podgroup_status(GROUP, pods)
    assert status["phase"] == phase
    names = ("pods", "scheduled", "running", "succeeded", "failed")
    assert tuple(status[n] for n in names) == counts
    assert set(status) == {"phase", *names}


def test_a_basic_group_is_scheduled_with_its_one_pod() -> None:
    basic = PodGroup.from_dict(with_(KUBE, "spec.schedulingPolicy", {"basic": {}}))
    pod = pod_dict("a", field="trainer", namespace=None, node="n1")
    assert podgroup_status(basic, [pod])["phase"] == "Scheduled"
