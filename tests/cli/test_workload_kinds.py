"""`distsched apply/get/delete` with the kinds of issue 12: Namespace, PriorityClass,
PodDisruptionBudget and the workload objects; priority admission on apply."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import redis

from distsched.keys import Keys
from distsched.store import Store
from tests.cli.manifests import invoke, stored_keys
from tests.controllers.helpers import MANIFESTS


def test_the_public_examples_apply_unchanged_and_get_lists_them(
    r: redis.Redis, redis_url: str
) -> None:
    result = invoke(redis_url, "apply", "-f", str(MANIFESTS))
    assert result.exit_code == 0, result.output
    for line in (
        "deployment/frontend created", "statefulset/zk created",
        "poddisruptionbudget/zk-pdb created", "daemonset/fluentd-elasticsearch created",
        "job/pi created", "priorityclass/frontend-critical created",
    ):  # fmt: skip
        assert line in result.stdout
    again = invoke(redis_url, "apply", "-f", str(MANIFESTS))
    assert "deployment/frontend unchanged" in again.stdout
    listed = invoke(redis_url, "get", "deploy,sts,ds,jobs,pdb,pc", "-A", "-o", "json")
    kinds = sorted(o["kind"] for o in json.loads(listed.stdout)["items"])
    assert kinds == [
        "DaemonSet", "Deployment", "Deployment", "Job", "PodDisruptionBudget",
        "PriorityClass", "StatefulSet",
    ]  # fmt: skip
    store = Store(r, Keys("test"))
    zk = store.get("StatefulSet", "default/zk")
    assert zk is not None
    # Fields distsched does not model are kept as given.
    assert zk["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "datadir"
    assert zk["apiVersion"] == "apps/v1"
    table = invoke(redis_url, "get", "deployments")
    assert "frontend" in table.stdout and "redis-leader" in table.stdout
    deleted = invoke(redis_url, "delete", "deploy", "frontend")
    assert deleted.exit_code == 0 and store.get("Deployment", "default/frontend") is None


def test_a_pod_gets_its_class_priority_and_the_global_default(
    r: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    (tmp_path / "classes.yaml").write_text(
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: high}\n"
        "value: 1000\npreemptionPolicy: Never\n---\n"
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: normal}\n"
        "value: 10\nglobalDefault: true\n"
    )
    (tmp_path / "pods.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: urgent}\n"
        "spec: {priorityClassName: high, containers: [{name: c, image: x}]}\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: plain}\n"
        "spec: {containers: [{name: c, image: x}]}\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: critical, namespace: kube-system}\n"
        "spec: {priorityClassName: system-node-critical, containers: [{name: c, image: x}]}\n"
    )
    result = invoke(redis_url, "apply", "-f", str(tmp_path))
    assert result.exit_code == 0, result.output
    store = Store(r, Keys("test"))

    def spec(key: str) -> tuple:
        pod = store.get("Pod", key)
        assert pod is not None
        s = pod["spec"]
        return s["priority"], s.get("priorityClassName"), s["preemptionPolicy"]

    assert spec("default/urgent") == (1000, "high", "Never")
    assert spec("default/plain") == (10, "normal", "PreemptLowerPriority")
    assert spec("kube-system/critical") == (
        2000001000,
        "system-node-critical",
        "PreemptLowerPriority",
    )


BAD = {
    "unknown-class": (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
        "spec: {priorityClassName: gold, containers: [{name: c, image: x}]}\n",
        [
            "document 2",
            "(Pod default/p)",
            "spec.priorityClassName",
            'no PriorityClass with name "gold"',
        ],
    ),
    "priority-not-the-class-value": (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
        "spec: {priority: 5, containers: [{name: c, image: x}]}\n",
        ["document 2", "spec.priority", "must not be provided"],
    ),
    "second-global-default": (
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: two}\n"
        "value: 2\nglobalDefault: true\n---\n"
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: three}\n"
        "value: 3\nglobalDefault: true\n",
        ["document 3", "(PriorityClass three)", "globalDefault", "Only one default"],
    ),
    "selector-not-matching-template": (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n"
        "  selector: {matchLabels: {app: a}}\n  template:\n    metadata: {labels: {app: b}}\n"
        "    spec: {containers: [{name: c, image: x}]}\n",
        ["document 2", "(Deployment default/d)", "spec.template.metadata.labels", "does not match"],
    ),
    "bad-template-quantity": (
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: s}\nspec:\n"
        "  selector: {matchLabels: {app: a}}\n  template:\n    metadata: {labels: {app: a}}\n"
        "    spec: {containers: [{name: c, image: x, resources: {requests: {cpu: lots}}}]}\n",
        ["document 2", "spec.template.spec.containers[0].resources.requests.cpu", "lots"],
    ),
    "deployment-with-wrong-api-version": (
        "apiVersion: extensions/v1beta1\nkind: Deployment\nmetadata: {name: d}\nspec: {}\n",
        ["document 2", "apiVersion", '"apps/v1"'],
    ),
    "job-restart-always": (
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  template:\n"
        "    spec: {restartPolicy: Always, containers: [{name: c, image: x}]}\n",
        ["document 2", "spec.template.spec.restartPolicy", "Always"],
    ),
    "negative-replicas": (
        "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: r}\nspec:\n  replicas: -1\n"
        "  selector: {matchLabels: {app: a}}\n  template:\n    metadata: {labels: {app: a}}\n"
        "    spec: {containers: [{name: c, image: x}]}\n",
        ["document 2", "spec.replicas", "must be between 0"],
    ),
    "pdb-both-bounds": (
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: b}\n"
        "spec: {minAvailable: 1, maxUnavailable: 1, selector: {matchLabels: {app: a}}}\n",
        ["document 2", "spec.minAvailable", "cannot be both set"],
    ),
    "pdb-bad-percent": (
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: b}\n"
        "spec: {maxUnavailable: 150%, selector: {matchLabels: {app: a}}}\n",
        ["document 2", "spec.maxUnavailable", "150%"],
    ),
    "priority-class-too-high": (
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: big}\n"
        "value: 2000000000\n",
        ["document 2", "value", "1000000000"],
    ),
    "namespace-not-a-label": (
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: a.b}\n",
        ["document 2", "(Namespace a.b)", "metadata.name", "RFC 1123 label"],
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_workload_input_exits_2_naming_file_document_field_and_writes_nothing(
    r: redis.Redis, redis_url: str, tmp_path: Path, case: str
) -> None:
    text, expected = BAD[case]
    good_node = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n---\n"
    (tmp_path / "m.yaml").write_text(good_node + text)
    result = invoke(redis_url, "apply", "-f", str(tmp_path / "m.yaml"))
    assert result.exit_code == 2, result.output
    message = result.stderr.strip()
    assert "\n" not in message and message.startswith(f"error: {tmp_path / 'm.yaml'}: ")
    for part in expected:
        assert part in message, (part, message)
    assert stored_keys(r, Keys("test")) == []


def test_a_second_global_default_is_refused_against_the_store(
    r: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    first = (
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: one}\n"
        "value: 1\nglobalDefault: true\n"
    )
    (tmp_path / "one.yaml").write_text(first)
    assert invoke(redis_url, "apply", "-f", str(tmp_path / "one.yaml")).exit_code == 0
    (tmp_path / "two.yaml").write_text(first.replace("one", "two"))
    result = invoke(redis_url, "apply", "-f", str(tmp_path / "two.yaml"))
    assert result.exit_code == 2 and '"one" is already marked as default' in result.stderr.replace(
        "'", '"'
    )
    # Re-applying the same default class is fine.
    assert invoke(redis_url, "apply", "-f", str(tmp_path / "one.yaml")).exit_code == 0


def test_get_pods_nodes_json_is_one_kube_list(
    r: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    shutil.copy(MANIFESTS / "nodes.yaml", tmp_path / "nodes.yaml")
    (tmp_path / "pod.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
        "spec: {containers: [{name: c, image: x}]}\n"
    )
    assert invoke(redis_url, "apply", "-f", str(tmp_path)).exit_code == 0
    listed = json.loads(invoke(redis_url, "get", "pods,nodes", "-o", "json").stdout)
    assert listed["kind"] == "List"
    assert [o["kind"] for o in listed["items"]] == ["Pod"] + ["Node"] * 7
    bad = invoke(redis_url, "get", "widgets")
    assert bad.exit_code == 2 and "unknown kind 'widgets'" in bad.stderr
