"""Issue 10, item 9: label values in node selector terms are validated as kube does (a
term with an invalid value matches nothing in kube's scheduler and API servers refuse
the pod); Gt/Lt keep taking integers."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from distsched.model import Pod
from distsched.model.errors import ManifestError
from distsched.model.manifest import load_manifests

BAD = "invalid value: ___@#$%^"


def pod_with(requirement: dict[str, Any], where: str = "matchExpressions") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {
            "containers": [{"name": "c"}],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{where: [requirement]}]
                    },
                    "preferredDuringSchedulingIgnoredDuringExecution": [],
                }
            },
        },
    }


@pytest.mark.parametrize("operator", ["In", "NotIn"])
def test_an_invalid_label_value_in_a_node_selector_term_is_refused(operator: str) -> None:
    data = pod_with({"key": "foo", "operator": operator, "values": ["ok", BAD]})
    with pytest.raises(ManifestError) as info:
        load_manifests("pods.yaml", yaml.safe_dump(data))
    message = str(info.value)
    assert message.startswith("pods.yaml: document 1")
    assert (
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        ".nodeSelectorTerms[0].matchExpressions[0].values[1]: invalid value" in message
    )
    assert "\n" not in message
    with pytest.raises(ManifestError):
        Pod.from_dict(data)


def test_preferred_terms_are_validated_too() -> None:
    data = pod_with({"key": "foo", "operator": "In", "values": ["ok"]})
    affinity = data["spec"]["affinity"]["nodeAffinity"]
    affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
        {
            "weight": 1,
            "preference": {
                "matchExpressions": [{"key": "foo", "operator": "NotIn", "values": [BAD]}]
            },
        }
    ]
    with pytest.raises(ManifestError, match=r"preference\.matchExpressions\[0\]\.values\[0\]"):
        Pod.from_dict(data)


@pytest.mark.parametrize(
    ("operator", "values"), [("Gt", ["-5"]), ("Lt", ["10"]), ("In", ["a.b-c_d", ""])]
)
def test_valid_values_are_accepted(operator: str, values: list[str]) -> None:
    pod = Pod.from_dict(pod_with({"key": "foo", "operator": operator, "values": values}))
    assert pod.spec.affinity is not None
