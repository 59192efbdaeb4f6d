"""Access control and code execution: least-privilege ACL users per role run a real
scheduling run without one ACL denial and are refused FLUSHALL, CONFIG and foreign keys;
the package never unpickles, unmarshals or evals; metrics listen on loopback by default.
"""

from __future__ import annotations

import ast
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

import distsched
from distsched import metrics
from distsched.acl import ROLES, server_version, setuser_args, setuser_line
from distsched.bench.binder_pool import node_manifest, pod_manifest
from distsched.bench.procs import ProcessGroup
from distsched.cli import main as cli_main
from distsched.embedded import EmbeddedRedis, free_port
from distsched.store import Store
from tests.reliability.harness import (
    KEYS,
    bound_pods,
    client_for,
    create_nodes,
    create_pods,
    drained,
    report,
    start_roles,
    wait_all_bound,
    wait_until,
)

PASSWORDS = {role: f"{role}-pw-7f3a" for role in ROLES}


def role_url(server: EmbeddedRedis, role: str) -> str:
    return f"redis://{role}:{PASSWORDS[role]}@{server.host}:{server.port}/0"


@pytest.fixture
def acl_server(server_binary: Path, tmp_path: Path) -> Iterator[EmbeddedRedis]:
    """A private server of each kind (Redis 7.0, valkey) with the role users its version
    takes (issue 24: the lines for 7.2 and later do not load on 7.0)."""
    server = EmbeddedRedis(
        data_dir=tmp_path / "redis", appendfsync="everysec", binary=server_binary
    ).start()
    admin = client_for(server.url)
    version = server_version(admin)
    for role in ROLES:
        args = setuser_args(role, PASSWORDS[role], version=version)
        admin.execute_command("ACL", "SETUSER", *args)
    admin.execute_command("ACL", "LOG", "RESET")
    admin.close()
    yield server
    server.stop()


def acl_denials(admin: redis.Redis) -> list[str]:
    # acl_log() decodes the entries (the raw command's have bytes keys).
    return [f"{e['username']}: {e['object']} ({e['reason']})" for e in admin.acl_log()]


def test_role_users_schedule_without_a_single_acl_denial(
    acl_server: EmbeddedRedis, group_on: list[ProcessGroup], tmp_path: Path
) -> None:
    admin = client_for(acl_server.url)
    create_nodes(admin, 10)
    # Workers and binders each log in as their own user (the URL is per process).
    group = ProcessGroup(role_url(acl_server, "worker"), log_dir=tmp_path)
    group_on.append(group)
    group.spawn("worker")
    group.spawn("worker")
    binders = start_roles(role_url(acl_server, "binder"), tmp_path / "b", group_on, workers=0)
    assert binders.binders()
    pods = create_pods(admin, 300)
    wait_all_bound(admin, pods, timeout_s=60)
    # The rarer paths: unschedulable pods, preemption, a deleted pod, a node added later.
    store = Store(admin, KEYS)
    store.create_many([pod_manifest(f"big{i}", cpu="5") for i in range(12)])
    wait_until("unschedulable pods", lambda: admin.zcard(KEYS.unschedulable) > 0, 30)
    vip = pod_manifest("vip", cpu="5")
    vip["spec"]["priority"] = 1000
    store.create(vip)
    wait_all_bound(admin, ["default/vip"], timeout_s=30)
    store.delete("Pod", pods[0])
    store.create(node_manifest("late-node", cpu="64", memory="64Gi"))
    wait_until("the queue to drain", lambda: drained(admin), 30)
    wait_until("no unschedulable pod", lambda: admin.zcard(KEYS.unschedulable) == 0, 30)
    # The workload controller as its own user: the shop's Deployment, StatefulSet,
    # DaemonSet and Job get pods, and a deleted Deployment's pods go with it.
    (tmp_path / "c").mkdir()
    controller = ProcessGroup(role_url(acl_server, "controller"), log_dir=tmp_path / "c")
    group_on.append(controller)
    controller.spawn("controller")
    shop = Path(__file__).parents[2] / "examples" / "shop.yaml"
    cli = [sys.executable, "-m", "distsched"]
    admin_url = ["--redis-url", acl_server.url]
    applied = subprocess.run([*cli, "apply", "-f", str(shop), *admin_url], capture_output=True)
    assert applied.returncode == 0, applied.stderr

    def storefront() -> list[str]:
        return [k for k in bound_pods(admin) if k.startswith("shop/storefront-")]

    wait_until("the storefront's pods bound", lambda: len(storefront()) == 2, 60)
    deleted = subprocess.run(
        [*cli, "delete", "deployment", "storefront", "-n", "shop", *admin_url],
        capture_output=True,
    )
    assert deleted.returncode == 0, deleted.stderr
    wait_until("the storefront's pods deleted", lambda: not storefront(), 30)
    for args in (["queue", "-o", "json"], ["get", "pods", "-o", "json"], ["get", "nodes"]):
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "distsched",
                *args,
                "--redis-url",
                role_url(acl_server, "operator"),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
    denials = acl_denials(admin)
    assert denials == [], denials
    bound = bound_pods(admin)
    assert "default/vip" in bound and pods[0] not in bound
    version = ".".join(map(str, server_version(admin)))
    report(
        f"acl roles on Redis {version}: worker, binder, controller and operator users "
        f"scheduled {len(bound)} pods (with unschedulable pods, preemption, a deletion, a "
        "node added, a Deployment created and deleted) with 0 ACL denials"
    )


def test_the_documented_acl_lines_are_the_tested_ones() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "reliability.md").read_text()
    for role in ROLES:
        assert setuser_line(role, version=(7, 2, 0)) in doc, role
    assert "distsched acl" in doc


@pytest.mark.parametrize("role", ROLES)
def test_role_user_cannot_flush_configure_or_touch_other_keys(
    acl_server: EmbeddedRedis, role: str
) -> None:
    client = redis.Redis.from_url(role_url(acl_server, role))
    client.ping()
    refused = [
        ("FLUSHALL",),
        ("FLUSHDB",),
        ("CONFIG", "GET", "dir"),
        ("CONFIG", "SET", "dir", "/tmp"),
        ("MODULE", "LIST"),
        ("EVAL", "return 1", "0"),
        ("KEYS", "*"),
        ("SHUTDOWN",),
        ("ACL", "LIST"),
        ("SET", "not-distsched", "1"),
        ("GET", "{ds:other}:store:rv"),
    ]
    if role == "operator":
        refused.append(("HSET", "{ds:default}:store:meta:Pod", "x", "1"))
    for command in refused:
        with pytest.raises(redis.exceptions.NoPermissionError):
            client.execute_command(*command)
    client.close()


# --------------------------------------------------------------------------- code


FORBIDDEN_MODULES = {"pickle", "cPickle", "_pickle", "marshal", "shelve", "dill", "cloudpickle"}
FORBIDDEN_CALLS = {"eval", "exec", "compile", "__import__"}


def forbidden_uses(path: Path) -> list[str]:
    """Imports of unpickling modules and calls of eval/exec/compile/__import__ (names,
    not attributes: ``client.eval`` runs Lua in Redis, not Python)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module.split(".")[0]]
        elif isinstance(node, ast.Name) and node.id in FORBIDDEN_MODULES:
            names = [node.id]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in FORBIDDEN_CALLS
        ):
            found.append(f"{path}:{node.lineno}: {node.func.id}()")
        found += [f"{path}:{node.lineno}: {n}" for n in names if n in FORBIDDEN_MODULES]
    return found


def test_nothing_in_the_package_unpickles_or_evals() -> None:
    package = Path(distsched.__file__).parent
    files = sorted(package.rglob("*.py"))
    assert len(files) > 50
    found = [use for path in files for use in forbidden_uses(path)]
    assert found == []


def test_the_scan_finds_what_it_looks_for(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import pickle\nfrom marshal import loads\nx = eval('1')\nclient.eval('x')\n")
    assert len(forbidden_uses(bad)) == 3


# --------------------------------------------------------------------------- metrics


def listening_addresses(port: int) -> set[str]:
    """Local addresses of LISTEN sockets on ``port`` (from /proc/net/tcp and tcp6)."""
    found = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            addr, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port and len(addr) == width:
                if width == 8:
                    found.add(socket.inet_ntop(socket.AF_INET, bytes.fromhex(addr)[::-1]))
                else:
                    words = [bytes.fromhex(addr[i : i + 8])[::-1] for i in range(0, 32, 8)]
                    found.add(socket.inet_ntop(socket.AF_INET6, b"".join(words)))
    return found


def test_metrics_listen_on_loopback_by_default() -> None:
    for command in ("worker", "binder", "up"):
        params = {p.name: p for p in cli_main.commands[command].params}
        assert params["metrics_addr"].default == "127.0.0.1", command
    port = free_port()
    metrics.serve(port)
    assert listening_addresses(port) == {"127.0.0.1"}
