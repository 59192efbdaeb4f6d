"""The kinds of issue 12 in the model: decoding, defaults, kept fields, admission."""

from __future__ import annotations

import pytest

from distsched.controllers.naming import ALPHANUMS, generated_name, safe_encode, template_hash
from distsched.model import ManifestError, load_manifests
from distsched.model.admission import PriorityClasses, PriorityClassInfo, admit_pod
from distsched.model.workloads import PodDisruptionBudget, PriorityClass, Workload

DEPLOY = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  selector: {matchExpressions: [{key: app, operator: In, values: [web]}]}
  progressDeadlineSeconds: 600
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: x}]}
"""


def test_a_workload_keeps_every_field_and_gets_kube_defaults() -> None:
    (deploy,) = load_manifests("d.yaml", DEPLOY)
    assert isinstance(deploy, Workload)
    assert deploy.replicas == 1 and deploy.key == "shop/web"
    raw = deploy.to_dict()
    assert raw["spec"]["replicas"] == 1 and raw["spec"]["progressDeadlineSeconds"] == 600
    assert raw["metadata"]["namespace"] == "shop"
    assert deploy.template_pod.metadata.labels == {"app": "web"}


def test_job_replicas_are_parallelism_capped_by_completions() -> None:
    job = """
apiVersion: batch/v1
kind: Job
metadata: {name: j}
spec:
  parallelism: 4
  completions: 2
  template: {spec: {restartPolicy: Never, containers: [{name: c}]}}
"""
    (obj,) = load_manifests("j.yaml", job)
    assert isinstance(obj, Workload) and obj.replicas == 2
    with pytest.raises(ManifestError, match="manualSelector"):
        load_manifests("j.yaml", job.replace("  parallelism: 4\n", "  selector: {}\n"))


def test_namespace_gets_its_name_label_and_pdb_takes_int_or_percent() -> None:
    docs = """
apiVersion: v1
kind: Namespace
metadata: {name: shop, labels: {team: a}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: b}
spec: {maxUnavailable: "25%", selector: {matchLabels: {app: a}}}
"""
    ns, pdb = load_manifests("n.yaml", docs)
    assert ns.to_dict()["metadata"]["labels"] == {
        "team": "a",
        "kubernetes.io/metadata.name": "shop",
    }
    assert isinstance(pdb, PodDisruptionBudget) and pdb.max_unavailable == "25%"


def test_priority_class_rules() -> None:
    (pc,) = load_manifests(
        "p.yaml", "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: x}\n"
        "value: 7\nglobalDefault: true\n"
    )  # fmt: skip
    assert isinstance(pc, PriorityClass) and pc.global_default and pc.value == 7
    with pytest.raises(ManifestError, match='prefix "system-" is reserved'):
        load_manifests(
            "p.yaml",
            "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\n"
            "metadata: {name: system-x}\nvalue: 1\n",
        )


def test_admission_default_class_is_the_lowest_marked_and_keeps_other_fields() -> None:
    classes = PriorityClasses(
        [PriorityClassInfo("a", 50, True), PriorityClassInfo("b", 20, True, "Never")]
    )
    pod = {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [], "x": 1}}
    admitted = admit_pod(pod, classes)
    assert admitted["spec"] == {
        "containers": [], "x": 1, "priority": 20, "priorityClassName": "b",
        "preemptionPolicy": "Never",
    }  # fmt: skip
    assert admit_pod(pod, PriorityClasses())["spec"]["priority"] == 0
    assert "priorityClassName" not in admit_pod(pod, PriorityClasses())["spec"]


def test_names_follow_kubes_shapes() -> None:
    assert safe_encode("0123456789") == "".join(ALPHANUMS[ord(c) % 27] for c in "0123456789")
    first = template_hash({"spec": {"containers": [{"name": "c"}]}})
    assert first == template_hash({"spec": {"containers": [{"name": "c"}]}})  # stable
    assert first != template_hash({"spec": {"containers": [{"name": "d"}]}})
    assert set(first) <= set(ALPHANUMS) and len(first) <= 10
    name = generated_name("a" * 80, "uid", "0")
    assert len(name) == 63 and name[:57] == "a" * 57 and name[57] == "-"
    assert generated_name("web", "uid", "0") != generated_name("web", "uid", "1")
    assert generated_name("web", "uid", "0") == generated_name("web", "uid", "0")
