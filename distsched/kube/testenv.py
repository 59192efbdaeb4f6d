"""A real API server for tests and benchmarks: etcd + kube-apiserver on loopback, as
controller-runtime's envtest runs them. Nothing here builds Kubernetes: the binaries are
found, as envtest finds its assets, in ``$DISTSCHED_KUBE_ASSETS``, then in
``~/.local/share/distsched/kube-assets``, then on ``PATH`` (kube-apiserver, etcd, and for
the comparisons kube-scheduler and kubectl). :func:`find_assets` says what is missing, so
tests skip with that reason.

The API server runs with what a loopback cluster without a controller-manager needs:
``--endpoint-reconciler-type=none``, the ServiceAccount admission plugin off (no token
controller), a static token file (an admin token in ``system:masters`` and a
``distsched-limited`` user with no rights, for RBAC tests), RBAC authorization, and the
TaintNodesByCondition admission plugin off: it puts ``node.kubernetes.io/not-ready`` on
every new node and, with no kubelet and no node lifecycle controller, nothing would take
it off (a kubelet's Ready status would). etcd keeps its data on tmpfs without fsync when
``/dev/shm`` exists: it is a test cluster.

``python -m distsched.kube.testenv --dir DIR`` starts one in the foreground and writes
``DIR/kubeconfig`` (Ctrl-C stops it).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import click

ASSETS_ENV = "DISTSCHED_KUBE_ASSETS"
DEFAULT_ASSETS = Path.home() / ".local" / "share" / "distsched" / "kube-assets"
ADMIN_TOKEN = "distsched-testenv-admin"
LIMITED_TOKEN = "distsched-testenv-limited"
LIMITED_USER = "distsched-limited"


class AssetsMissing(RuntimeError):
    """The binaries to run a real API server are not here (tests skip with this reason)."""


def find_binary(name: str) -> str | None:
    for folder in (os.environ.get(ASSETS_ENV), str(DEFAULT_ASSETS)):
        if folder:
            candidate = Path(folder) / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
    return shutil.which(name)


def find_assets(*names: str) -> dict[str, str]:
    """Paths of the named binaries; :class:`AssetsMissing` naming what is not found."""
    found = {name: find_binary(name) for name in names}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        raise AssetsMissing(
            f"{', '.join(missing)} not found in ${ASSETS_ENV}, {DEFAULT_ASSETS} or PATH "
            "(tests against a real API server need them)"
        )
    return {name: path for name, path in found.items() if path is not None}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class TestEnv:
    """etcd and kube-apiserver in ``workdir``: :meth:`start`, :meth:`stop`,
    :meth:`restart_apiserver`."""

    workdir: Path
    apiserver_args: list[str] = field(default_factory=list)
    # Admission plugins off (see the module docstring); the benchmarks also turn off
    # Priority, as scheduler_perf does, so that a pod may carry spec.priority itself.
    admission_off: tuple[str, ...] = ("ServiceAccount", "TaintNodesByCondition")
    etcd: subprocess.Popen[bytes] | None = None
    apiserver: subprocess.Popen[bytes] | None = None
    apiserver_port: int = 0
    etcd_port: int = 0

    __test__ = False  # not a pytest class

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.apiserver_port}"

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    @property
    def limited_kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig-limited"

    def start(self, timeout_s: float = 60.0) -> TestEnv:
        assets = find_assets("kube-apiserver", "etcd")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._write_credentials()
        self.etcd_port, peer = free_port(), free_port()
        shm = Path("/dev/shm")
        data = Path(tempfile.mkdtemp(prefix="distsched-etcd-", dir=shm if shm.is_dir() else None))
        self._etcd_data = data
        self.etcd = self._spawn(
            "etcd",
            [
                assets["etcd"],
                "--data-dir", str(data),
                "--listen-client-urls", f"http://127.0.0.1:{self.etcd_port}",
                "--advertise-client-urls", f"http://127.0.0.1:{self.etcd_port}",
                "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                "--initial-cluster", f"default=http://127.0.0.1:{peer}",
                "--unsafe-no-fsync",
            ],
        )  # fmt: skip
        self.apiserver_port = free_port()
        self._apiserver_cmd = [
            assets["kube-apiserver"],
            f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.apiserver_port}",
            f"--cert-dir={self.workdir / 'certs'}",
            f"--token-auth-file={self.workdir / 'tokens.csv'}",
            "--authorization-mode=RBAC",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={self.workdir / 'sa.pub'}",
            f"--service-account-signing-key-file={self.workdir / 'sa.key'}",
            "--endpoint-reconciler-type=none",
            f"--disable-admission-plugins={','.join(self.admission_off)}",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--allow-privileged=true",
            *self.apiserver_args,
        ]
        self.apiserver = self._spawn("kube-apiserver", self._apiserver_cmd)
        self._wait_ready(timeout_s)
        self._write_kubeconfigs()
        return self

    def restart_apiserver(self, down_s: float = 0.0, timeout_s: float = 60.0) -> None:
        """Stop the API server (SIGTERM), wait ``down_s``, start it again on the same port."""
        self._terminate(self.apiserver)
        time.sleep(down_s)
        self.apiserver = self._spawn("kube-apiserver", self._apiserver_cmd)
        self._wait_ready(timeout_s)

    def stop(self) -> None:
        self._terminate(self.apiserver)
        self._terminate(self.etcd)
        self.apiserver = self.etcd = None
        data = getattr(self, "_etcd_data", None)
        if data is not None:
            shutil.rmtree(data, ignore_errors=True)

    def __enter__(self) -> TestEnv:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- plumbing -----------------------------------------------------------------------
    def _spawn(self, name: str, cmd: list[str]) -> subprocess.Popen[bytes]:
        log = open(self.workdir / f"{name}.log", "ab")  # noqa: SIM115 - the child keeps it
        try:
            return subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        finally:
            log.close()

    @staticmethod
    def _terminate(proc: subprocess.Popen[bytes] | None) -> None:
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        request = urllib.request.Request(
            f"{self.server}/readyz", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
        )
        while time.monotonic() < deadline:
            for proc, name in ((self.etcd, "etcd"), (self.apiserver, "kube-apiserver")):
                if proc is not None and proc.poll() is not None:
                    tail = (self.workdir / f"{name}.log").read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"{name} exited with {proc.returncode}:\n{tail}")
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(request, timeout=2, context=context) as reply,
            ):
                if reply.status == 200:
                    return
            time.sleep(0.2)
        raise RuntimeError(f"kube-apiserver not ready after {timeout_s:.0f}s (see {self.workdir})")

    def _write_credentials(self) -> None:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        (self.workdir / "sa.key").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.TraditionalOpenSSL,
                serialization.NoEncryption(),
            )
        )
        (self.workdir / "sa.pub").write_bytes(
            key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        (self.workdir / "tokens.csv").write_text(
            f"{ADMIN_TOKEN},distsched-admin,1,system:masters\n{LIMITED_TOKEN},{LIMITED_USER},2\n"
        )

    def _write_kubeconfigs(self) -> None:
        ca = self.workdir / "certs" / "apiserver.crt"
        for path, user, token in (
            (self.kubeconfig, "admin", ADMIN_TOKEN),
            (self.limited_kubeconfig, LIMITED_USER, LIMITED_TOKEN),
        ):
            path.write_text(
                "apiVersion: v1\nkind: Config\n"
                f"clusters:\n- name: testenv\n  cluster:\n    server: {self.server}\n"
                f"    certificate-authority: {ca}\n"
                f"users:\n- name: {user}\n  user:\n    token: {token}\n"
                f"contexts:\n- name: testenv\n  context:\n    cluster: testenv\n    user: {user}\n"
                "current-context: testenv\n"
            )
            path.chmod(0o600)


@click.command()
@click.option("--dir", "workdir", type=click.Path(file_okay=False, path_type=Path), required=True)
def main(workdir: Path) -> None:
    """Run etcd + kube-apiserver until Ctrl-C; writes DIR/kubeconfig."""
    try:
        env = TestEnv(workdir).start()
    except AssetsMissing as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    click.echo(f"API server {env.server} ready; KUBECONFIG={env.kubeconfig}")
    try:
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    except KeyboardInterrupt:
        pass
    finally:
        env.stop()


if __name__ == "__main__":
    main()
