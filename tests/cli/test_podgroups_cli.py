"""`distsched apply/get/delete` with PodGroups (issue 22): both apiVersions, the status
computed from the pods at read time, and bad input refused whole."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import redis

from distsched.keys import Keys
from distsched.model.podgroups import POD_GROUP_LABEL
from distsched.store import Store
from tests.cli.manifests import invoke, pod, stored_keys, write_yaml

GANG: dict[str, Any] = {
    "apiVersion": "scheduling.x-k8s.io/v1alpha1",
    "kind": "PodGroup",
    "metadata": {"name": "gang", "namespace": "team"},
    "spec": {"minMember": 2, "minResources": {"cpu": "1"}, "scheduleTimeoutSeconds": 30},
}
UPSTREAM: dict[str, Any] = {
    "apiVersion": "scheduling.k8s.io/v1alpha2",
    "kind": "PodGroup",
    "metadata": {"name": "trainer", "namespace": "team"},
    "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}},
}


def member(name: str, *, group: str = "gang", node: str = "", namespace: str = "team") -> dict:
    out = pod(name, namespace=namespace)
    out["metadata"]["labels"] = {POD_GROUP_LABEL: group}
    if node:
        out["spec"]["nodeName"] = node
    return out


def listed(redis_url: str, *args: str) -> list[dict[str, Any]]:
    result = invoke(redis_url, "get", "podgroups", *args, "-o", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["items"]


def test_apply_get_and_delete_podgroups(r: redis.Redis, redis_url: str, tmp_path: Path) -> None:
    elsewhere = {**GANG, "metadata": {"name": "gang", "namespace": "other"}}
    write_yaml(
        tmp_path / "gang.yaml",
        [
            GANG,
            elsewhere,
            member("a", node="n1"),
            member("b"),
            member("c", namespace="other", node="n1"),  # a member of other/gang
        ],
    )
    result = invoke(redis_url, "apply", "-f", str(tmp_path / "gang.yaml"))
    assert result.exit_code == 0, result.output
    assert "podgroup/gang created" in result.stdout

    (item,) = listed(redis_url, "-n", "team")
    assert item["apiVersion"] == "scheduling.x-k8s.io/v1alpha1" and item["kind"] == "PodGroup"
    assert item["spec"] == GANG["spec"]
    assert item["status"] == {
        "phase": "Scheduling", "scheduled": 1, "running": 0, "succeeded": 0, "failed": 0,
        "pods": 2,
    }  # fmt: skip
    assert [
        (i["metadata"]["namespace"], i["status"]["phase"]) for i in listed(redis_url, "-A")
    ] == [
        ("other", "Pending"),
        ("team", "Scheduling"),
    ]

    # The second member is bound: the group is Scheduled (no kubelet makes it Running).
    store = Store(r, Keys("test"))
    store.bind("team/b", None, "n2")
    table = invoke(redis_url, "get", "pg", "-A")
    assert table.exit_code == 0, table.output
    lines = table.stdout.splitlines()
    header = lines[0].split()
    for column in ("NAMESPACE", "NAME", "PHASE", "MIN", "SCHEDULED", "RUNNING"):
        assert column in header, header
    team = next(line for line in lines if "team" in line).split()
    assert team[:5] == ["team", "gang", "Scheduled", "2", "2"]

    deleted = invoke(redis_url, "delete", "podgroup", "gang", "-n", "team")
    assert deleted.exit_code == 0, deleted.output
    assert deleted.stdout == 'podgroup.scheduling.x-k8s.io "gang" deleted\n'  # as kubectl
    assert store.get("PodGroup", "team/gang") is None
    assert store.get("PodGroup", "other/gang") is not None
    assert invoke(redis_url, "delete", "pg", "gang", "-n", "team").exit_code == 1


def test_an_upstream_podgroup_keeps_its_api_version(redis_url: str, tmp_path: Path) -> None:
    field_member = pod("w-0", namespace="team")
    field_member["spec"]["schedulingGroup"] = {"podGroupName": "trainer"}
    write_yaml(tmp_path / "up.yaml", [UPSTREAM, field_member])
    result = invoke(redis_url, "apply", "-f", str(tmp_path / "up.yaml"))
    assert result.exit_code == 0, result.output
    (item,) = listed(redis_url, "-n", "team")
    assert item["apiVersion"] == "scheduling.k8s.io/v1alpha2"
    assert item["spec"] == UPSTREAM["spec"]
    assert (item["status"]["phase"], item["status"]["pods"]) == ("Pending", 1)


def test_one_name_is_one_podgroup_whatever_the_api_version(
    r: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    write_yaml(tmp_path / "a.yaml", [GANG])
    assert invoke(redis_url, "apply", "-f", str(tmp_path / "a.yaml")).exit_code == 0
    same_name = {**UPSTREAM, "metadata": GANG["metadata"]}
    write_yaml(tmp_path / "a.yaml", [same_name])
    result = invoke(redis_url, "apply", "-f", str(tmp_path / "a.yaml"))
    assert result.exit_code == 0, result.output
    assert "podgroup/gang configured" in result.stdout
    assert len(Store(r, Keys("test")).list("PodGroup")[0]) == 1


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        (
            {**GANG, "spec": {"minMember": 0}},
            "bad.yaml: document 2 (PodGroup team/gang): spec.minMember: "
            "must be between 1 and 1000, got 0",
        ),
        (
            {**GANG, "spec": {"minResources": {"cpu": "1"}}},
            "bad.yaml: document 2 (PodGroup team/gang): spec.minMember: required value is missing",
        ),
        (
            {**GANG, "spec": {"minMember": 2, "minResources": {"cpu": "lots"}}},
            "bad.yaml: document 2 (PodGroup team/gang): spec.minResources.cpu: invalid quantity",
        ),
        (
            {**GANG, "spec": {"minMember": 2, "scheduleTimeoutSeconds": -5}},
            "bad.yaml: document 2 (PodGroup team/gang): spec.scheduleTimeoutSeconds: "
            "must be between 0 and",
        ),
        (
            {**GANG, "metadata": {"name": "Gang!", "namespace": "team"}},
            "bad.yaml: document 2 (PodGroup team/Gang!): metadata.name: invalid value",
        ),
        (
            {**UPSTREAM, "spec": {"schedulingPolicy": {"basic": {}, "gang": {"minCount": 2}}}},
            "bad.yaml: document 2 (PodGroup team/trainer): spec.schedulingPolicy: "
            "must specify exactly one of: `basic`, `gang`",
        ),
        (
            {**UPSTREAM, "apiVersion": "scheduling.k8s.io/v1"},
            "bad.yaml: document 2 (PodGroup team/trainer): apiVersion: no matches for kind "
            '"PodGroup" in version "scheduling.k8s.io/v1"',
        ),
        (
            {**member("x"), "spec": {**member("x")["spec"], "schedulingGroup": {}}},
            "bad.yaml: document 2 (Pod team/x): spec.schedulingGroup.podGroupName: "
            "required value is missing",
        ),
    ],
)
def test_a_bad_podgroup_manifest_exits_2_naming_the_field_and_writes_nothing(
    r: redis.Redis, redis_url: str, tmp_path: Path, document: dict, expected: str
) -> None:
    write_yaml(tmp_path / "bad.yaml", [member("ok"), document])
    result = invoke(redis_url, "apply", "-f", str(tmp_path / "bad.yaml"))
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    message = result.stderr.strip()
    assert "\n" not in message
    assert message.startswith(f"error: {tmp_path}/{expected}"), message
    assert stored_keys(r, Keys("test")) == []
