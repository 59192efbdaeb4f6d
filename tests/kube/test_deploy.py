"""deploy/kubernetes against a real API server: every manifest is accepted (server-side
dry run), and the ServiceAccount may do exactly what distsched does (kubectl auth can-i)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from distsched.kube.testenv import TestEnv, find_binary

pytestmark = pytest.mark.kube

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
SA = "system:serviceaccount:distsched-system:distsched"

ALLOWED = [
    ["get", "nodes"], ["list", "nodes"], ["watch", "nodes"],
    ["list", "pods"], ["watch", "pods"], ["delete", "pods"],
    ["create", "pods", "--subresource=binding"], ["patch", "pods", "--subresource=status"],
    ["list", "namespaces"], ["watch", "priorityclasses.scheduling.k8s.io"],
    ["watch", "poddisruptionbudgets.policy"], ["watch", "persistentvolumeclaims"],
    ["list", "persistentvolumes"], ["watch", "storageclasses.storage.k8s.io"],
    ["list", "csinodes.storage.k8s.io"], ["watch", "csidrivers.storage.k8s.io"],
    ["list", "csistoragecapacities.storage.k8s.io"],
    ["create", "events.events.k8s.io"], ["patch", "events.events.k8s.io"],
]  # fmt: skip
DENIED = [
    ["create", "pods"], ["update", "pods"], ["delete", "nodes"], ["update", "nodes"],
    ["list", "secrets"], ["get", "configmaps"], ["create", "deployments.apps"],
    ["patch", "nodes", "--subresource=status"],
]  # fmt: skip


@pytest.fixture(scope="module")
def kubectl(apiserver: TestEnv) -> list[str]:
    path = find_binary("kubectl")
    if path is None:
        pytest.skip("kubectl not found in $DISTSCHED_KUBE_ASSETS, the default folder or PATH")
    return [path, "--kubeconfig", str(apiserver.kubeconfig)]


def run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def test_every_manifest_is_accepted_by_the_api_server(kubectl: list[str]) -> None:
    for name in ("namespace.yaml", "rbac.yaml"):
        done = run([*kubectl, "apply", "-f", str(DEPLOY / name)])
        assert done.returncode == 0, done.stderr
    dry = run([*kubectl, "apply", "--dry-run=server", "-k", str(DEPLOY)])
    assert dry.returncode == 0, dry.stderr
    kinds = {line.split("/")[0] for line in dry.stdout.splitlines()}
    assert {"deployment.apps", "statefulset.apps", "configmap", "service"} <= kinds


@pytest.mark.parametrize("verb", ALLOWED + DENIED, ids=lambda v: " ".join(v))
def test_the_service_account_may_do_exactly_what_distsched_does(
    kubectl: list[str], verb: list[str]
) -> None:
    run([*kubectl, "apply", "-f", str(DEPLOY / "namespace.yaml"), "-f", str(DEPLOY / "rbac.yaml")])
    answer = run([*kubectl, "auth", "can-i", *verb, f"--as={SA}", "-A"]).stdout.strip()
    assert answer == ("yes" if verb in ALLOWED else "no")
