"""kubeconfig and in-cluster configuration (no API server needed)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from distsched.kube.config import KubeConfigError, in_cluster, load_kubeconfig

KUBECONFIG = """
apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: c1
  cluster:
    server: https://10.0.0.1:6443
    certificate-authority-data: {ca}
contexts:
- name: dev
  context: {{cluster: c1, user: u1, namespace: team}}
- name: other
  context: {{cluster: c1, user: u2}}
users:
- name: u1
  user: {{token: secret-token}}
- name: u2
  user: {{client-certificate: certs/client.crt, client-key: certs/client.key}}
- name: u3
  user: {{exec: {{command: aws}}}}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config"
    path.write_text(text)
    return path


def test_current_context_token_and_inline_ca(tmp_path: Path) -> None:
    ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nx\n").decode()
    config = load_kubeconfig(str(write(tmp_path, KUBECONFIG.format(ca=ca))))
    assert config.server == "https://10.0.0.1:6443"
    assert config.bearer_token() == "secret-token" and config.namespace == "team"
    assert config.ca_file is not None and Path(config.ca_file).read_bytes().startswith(b"-----")


def test_client_certificates_are_relative_to_the_file(tmp_path: Path) -> None:
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs" / "client.crt").write_text("cert")
    (tmp_path / "certs" / "client.key").write_text("key")
    config = load_kubeconfig(str(write(tmp_path, KUBECONFIG.format(ca="eA=="))), context="other")
    assert config.client_cert == str(tmp_path / "certs" / "client.crt")
    assert config.client_key == str(tmp_path / "certs" / "client.key")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{}", "current-context: no context selected"),
        ("current-context: x\ncontexts: []", "contexts: no entry named 'x'"),
        ("- a list", "not a kubeconfig"),
        (
            KUBECONFIG.replace("current-context: dev", "current-context: other").format(ca="eA=="),
            "users[u2].client-certificate:",
        ),
        (
            KUBECONFIG.replace("user: u2", "user: u3")
            .replace("current-context: dev", "current-context: other")
            .format(ca="eA=="),
            "users[u3].exec: credential plugins are not supported",
        ),
        (KUBECONFIG.replace("https://10.0.0.1:6443", "10.0.0.1").format(ca="eA=="), "server"),
    ],
)
def test_bad_kubeconfigs_name_the_file_and_field(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(KubeConfigError) as info:
        load_kubeconfig(str(path))
    assert str(info.value).startswith(str(path)) and message in str(info.value)


def test_in_cluster_reads_the_service_account(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "token").write_text("t1\n")
    (tmp_path / "namespace").write_text("sched")
    (tmp_path / "ca.crt").write_text("ca")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    config = in_cluster(tmp_path)
    assert config.server == "https://10.96.0.1:443" and config.namespace == "sched"
    assert config.bearer_token() == "t1"
    (tmp_path / "token").write_text("t2")  # rotated: read again
    assert config.bearer_token() == "t2"
