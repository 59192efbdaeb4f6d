"""Which pod updates kube's ValidatePodUpdate lets through, rule by rule."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from distsched.model import ManifestError
from distsched.model.pod_update import first_difference, validate_pod_update

Pod = dict[str, Any]
TOLERATION = {"key": "k", "operator": "Equal", "value": "v", "effect": "NoExecute"}


def pod(**spec: Any) -> Pod:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web-1", "namespace": "default"},
        "spec": {
            "containers": [
                {"name": "app", "image": "nginx:1", "resources": {"requests": {"cpu": "1"}}}
            ],
            "schedulerName": "default-scheduler",
            "priority": 0,
            "preemptionPolicy": "PreemptLowerPriority",
            **spec,
        },
        "status": {"phase": "Pending"},
    }


def changed(old: Pod, change: Callable[[dict[str, Any]], None]) -> Pod:
    new = copy.deepcopy(old)
    change(new["spec"])
    return new


def refusal(new: Pod, old: Pod) -> tuple[str, str]:
    with pytest.raises(ManifestError) as exc:
        validate_pod_update(new, old)
    return exc.value.field, exc.value.reason


GATED = pod(schedulingGates=[{"name": "a"}, {"name": "b"}], nodeSelector={"zone": "a"})
AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
            ]
        }
    }
}
GATED_AFFINITY = pod(schedulingGates=[{"name": "a"}], affinity=AFFINITY)


def _add_requirement(spec: dict[str, Any]) -> None:
    term = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    term["nodeSelectorTerms"][0]["matchExpressions"].append({"key": "disk", "operator": "Exists"})


def _change_requirement(spec: dict[str, Any]) -> None:
    term = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    term["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] = ["b"]


def _add_term(spec: dict[str, Any]) -> None:
    term = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    term["nodeSelectorTerms"].append({"matchExpressions": [{"key": "x", "operator": "Exists"}]})


ALLOWED: list[tuple[str, Pod, Callable[[dict[str, Any]], None]]] = [
    ("image", pod(), lambda s: s["containers"][0].update(image="nginx:2")),
    ("init-image", pod(initContainers=[{"name": "i", "image": "a"}]),
     lambda s: s["initContainers"][0].update(image="b")),
    ("deadline-set", pod(), lambda s: s.update(activeDeadlineSeconds=30)),
    ("deadline-lowered", pod(activeDeadlineSeconds=30),
     lambda s: s.update(activeDeadlineSeconds=10)),
    ("toleration-added", pod(), lambda s: s.update(tolerations=[TOLERATION])),
    ("toleration-seconds", pod(tolerations=[TOLERATION]),
     lambda s: s["tolerations"][0].update(tolerationSeconds=60)),
    ("gate-removed", GATED, lambda s: s.update(schedulingGates=[{"name": "b"}])),
    ("all-gates-removed", GATED, lambda s: s.pop("schedulingGates")),
    ("gated-selector-added", GATED, lambda s: s["nodeSelector"].update(disk="ssd")),
    ("gated-affinity-narrowed", GATED_AFFINITY, _add_requirement),
    ("gated-affinity-set", GATED, lambda s: s.update(affinity=AFFINITY)),
    ("empty-is-absent", pod(), lambda s: s.update(tolerations=[], nodeSelector={})),
    ("grace-from-negative", pod(terminationGracePeriodSeconds=-1),
     lambda s: s.update(terminationGracePeriodSeconds=1)),
]  # fmt: skip

REFUSED: list[tuple[str, Pod, Callable[[dict[str, Any]], None], str, str]] = [
    ("requests", pod(), lambda s: s["containers"][0]["resources"]["requests"].update(cpu="3"),
     "spec.containers[0].resources.requests.cpu", "field is immutable"),
    ("limits-added", pod(), lambda s: s["containers"][0]["resources"].update(limits={"cpu": "2"}),
     "spec.containers[0].resources.limits.cpu", "field is immutable"),
    ("container-added", pod(), lambda s: s["containers"].append({"name": "b", "image": "x"}),
     "spec.containers", "may not add or remove containers"),
    ("node-name", pod(), lambda s: s.update(nodeName="n1"), "spec.nodeName", "field is immutable"),
    ("priority", pod(), lambda s: s.update(priority=5), "spec.priority", "field is immutable"),
    ("host-port", pod(), lambda s: s["containers"][0].update(ports=[{"containerPort": 80}]),
     "spec.containers[0].ports", "field is immutable"),
    ("selector-not-gated", pod(), lambda s: s.update(nodeSelector={"zone": "a"}),
     "spec.nodeSelector.zone", "field is immutable"),
    ("deadline-raised", pod(activeDeadlineSeconds=10), lambda s: s.update(activeDeadlineSeconds=30),
     "spec.activeDeadlineSeconds", "less than or equal to previous value"),
    ("deadline-removed", pod(activeDeadlineSeconds=10), lambda s: s.pop("activeDeadlineSeconds"),
     "spec.activeDeadlineSeconds", "must not update from a positive integer to nil"),
    ("toleration-removed", pod(tolerations=[TOLERATION]), lambda s: s.pop("tolerations"),
     "spec.tolerations", "existing toleration can not be modified"),
    ("toleration-changed", pod(tolerations=[TOLERATION]),
     lambda s: s["tolerations"][0].update(value="w"),
     "spec.tolerations", "existing toleration can not be modified"),
    ("gate-added", GATED, lambda s: s["schedulingGates"].append({"name": "c"}),
     "spec.schedulingGates[2].name",
     "only deletion is allowed, but found new scheduling gate \"c\""),
    ("gate-added-ungated", pod(), lambda s: s.update(schedulingGates=[{"name": "a"}]),
     "spec.schedulingGates[0].name", "only deletion is allowed"),
    ("gated-selector-changed", GATED, lambda s: s["nodeSelector"].update(zone="b"),
     "spec.nodeSelector", "only additions to spec.nodeSelector are allowed"),
    ("gated-affinity-changed", GATED_AFFINITY, _change_requirement,
     "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]",
     "only additions are allowed"),
    ("gated-affinity-term-added", GATED_AFFINITY, _add_term,
     "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
     "no additions/deletions"),
    ("gated-pod-affinity", GATED, lambda s: s.update(affinity={"podAffinity": {"x": 1}}),
     "spec.affinity.podAffinity.x", "field is immutable"),
    ("scheduler", pod(), lambda s: s.update(schedulerName="other"), "spec.schedulerName",
     "field is immutable"),
]  # fmt: skip


@pytest.mark.parametrize(("old", "change"), [c[1:] for c in ALLOWED], ids=[c[0] for c in ALLOWED])
def test_what_a_pod_update_may_change(old: Pod, change: Callable[[dict[str, Any]], None]) -> None:
    new = changed(old, change)
    assert new != old or new["spec"].get("tolerations") == []
    validate_pod_update(new, old)


@pytest.mark.parametrize(
    ("old", "change", "field", "reason"),
    [c[1:] for c in REFUSED],
    ids=[c[0] for c in REFUSED],
)
def test_what_a_pod_update_may_not_change(
    old: Pod, change: Callable[[dict[str, Any]], None], field: str, reason: str
) -> None:
    got_field, got_reason = refusal(changed(old, change), old)
    assert got_field == field
    assert reason in got_reason


def test_metadata_and_status_are_not_judged() -> None:
    old = pod()
    new = copy.deepcopy(old)
    new["metadata"]["labels"] = {"app": "db"}
    new["metadata"]["annotations"] = {"a": "b"}
    new["status"] = {"phase": "Succeeded"}
    validate_pod_update(new, old)


def test_the_first_difference_is_named_in_the_old_objects_order() -> None:
    old = {"a": {"x": 1, "y": [1, 2]}, "b": "s"}
    assert first_difference({"a": {"x": 1, "y": [1, 3]}, "b": "t"}, old, "spec") == "spec.a.y[1]"
    assert first_difference({"a": {"x": 1, "y": [1]}, "b": "s"}, old, "spec") == "spec.a.y"
    assert first_difference({**old, "c": 0}, old, "spec") == "spec.c"
    assert first_difference({**old, "c": None, "d": []}, old, "spec") is None
    assert first_difference({"n": 1.0}, {"n": 1}, "") is None
    assert first_difference({"n": "1"}, {"n": 1}, "") == ".n"
    assert first_difference({"m": {"k": {"v": 1}}}, {}, "") == ".m.k.v"
    assert first_difference({}, {"m": {"k": 1}}, "") == ".m.k"
