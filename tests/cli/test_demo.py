"""`distsched up --demo` with no Redis URL: an embedded server, and nothing else touched.

While the demo runs, the test samples every TCP connection of the `up` process tree
(from /proc): every connection must go to the embedded server's port, none to the
machine's Redis on 6379.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from tests.cli.manifests import cli_env, kill_group

MACHINE_REDIS_PORT = 6379
URL_RE = r"^redis://:([A-Za-z0-9_-]+)@127\.0\.0\.1:(\d+)/0$"
ESTABLISHED = "01"


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = {root}, [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _socket_inodes(pids: set[int]) -> set[str]:
    inodes = set()
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                target = fd.readlink().as_posix()
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue  # exited meanwhile
    return inodes


def _connections(inodes: set[str]) -> set[tuple[int, int]]:
    """(local port, remote port) of the established TCP connections with these inodes."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, remote, state, inode = fields[1], fields[2], fields[3], fields[9]
            if state == ESTABLISHED and inode in inodes:
                found.add((int(local.rsplit(":", 1)[1], 16), int(remote.rsplit(":", 1)[1], 16)))
    return found


def test_demo_runs_on_an_embedded_server_without_touching_the_machine_redis(
    tmp_path: Path,
) -> None:
    # No URL anywhere, and a HOME of its own: there is nothing pointing at 6379.
    env = cli_env(HOME=str(tmp_path), TMPDIR=str(tmp_path))
    out_path = tmp_path / "demo.out"
    with out_path.open("wb") as out:
        up = subprocess.Popen(
            [sys.executable, "-m", "distsched", "up", "--demo"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    try:
        seen: set[tuple[int, int]] = set()
        command_lines: list[str] = []
        embedded_port, password = None, None
        deadline = time.monotonic() + 90
        while up.poll() is None and time.monotonic() < deadline:
            if embedded_port is None:
                text = out_path.read_text()
                match = re.search(r"embedded Redis at (redis://\S+)", text)
                url = re.fullmatch(URL_RE, match.group(1)) if match else None
                embedded_port = int(url.group(2)) if url else None
                password = url.group(1) if url else None
            tree = _descendants(up.pid)
            seen |= _connections(_socket_inodes(tree))
            command_lines += _command_lines(tree)
            time.sleep(0.1)
        assert up.wait(timeout=5) == 0, out_path.read_text()[-3000:]
    finally:
        kill_group(up)
    output = out_path.read_text()
    assert embedded_port is not None and embedded_port != MACHINE_REDIS_PORT, output
    assert "300/300 schedulable pods bound" in output, output
    assert "0/20 nodes are available:" in output, output  # demo/too-big's diagnosis
    # The server side of each connection has local port == embedded_port; every other
    # end must point at it.
    clients = {(local, remote) for local, remote in seen if local != embedded_port}
    assert clients, "sampling saw no connection at all"
    assert {remote for _, remote in clients} == {embedded_port}, seen
    assert all(MACHINE_REDIS_PORT not in pair for pair in seen)
    # Its password reached every role, and no command line (any local user reads those).
    assert password is not None and command_lines
    assert not [line for line in command_lines if password in line]
    # The embedded server and its temporary data directory are gone.
    assert not list(tmp_path.glob("distsched-redis-*"))


def _serve(tmp_path: Path, name: str, *args: str) -> tuple[subprocess.Popen[bytes], re.Match[str]]:
    """``distsched server ARGS`` in the background, and the URL it printed."""
    env = cli_env(HOME=str(tmp_path), TMPDIR=str(tmp_path))
    out_path = tmp_path / f"{name}.out"
    with out_path.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "distsched", "server", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    deadline = time.monotonic() + 15
    match = None
    while match is None and time.monotonic() < deadline:
        match = re.search(URL_RE, out_path.read_text(), re.M)
        time.sleep(0.05)
    if match is None:
        kill_group(server)
        raise AssertionError(out_path.read_text())
    return server, match


def _queue_answers(url: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "distsched", "queue", "-o", "json"],
        capture_output=True,
        text=True,
        env=cli_env(DISTSCHED_REDIS_URL=url),
        timeout=30,
    )
    assert result.returncode == 0, result.stderr


def test_server_prints_its_url_and_stops_on_sigterm(tmp_path: Path) -> None:
    server, match = _serve(tmp_path, "server")
    try:
        assert int(match.group(2)) != MACHINE_REDIS_PORT
        _queue_answers(match.group(0))
        assert list(tmp_path.glob("distsched-redis-*"))  # its data directory, while it runs
        server.terminate()
        assert server.wait(timeout=10) == 0
        assert not list(tmp_path.glob("distsched-redis-*"))
    finally:
        kill_group(server)


def _raw_reply(port: int, command: bytes) -> bytes:
    """What a client that sends no password gets (no client library in between)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(command)
        return sock.recv(512)


def _command_lines(pids: set[int]) -> list[str]:
    lines = []
    for pid in pids:
        try:
            lines.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
            continue
    return lines


def test_the_embedded_server_requires_its_password(tmp_path: Path) -> None:
    """Issue 24: the embedded server had no password, so any local user had full access.
    Now it needs one, generated once per data directory, kept there with mode 0600, never
    on a command line; the printed URL carries it, and a restart keeps it."""
    data = tmp_path / "data"
    urls = []
    for run in range(2):
        server, match = _serve(tmp_path, f"server-{run}", "--data-dir", str(data))
        try:
            url, password, port = match.group(0), match.group(1), int(match.group(2))
            urls.append(url)
            password_file = data / "password"
            assert password_file.stat().st_mode & 0o777 == 0o600
            assert password_file.read_text().strip() == password
            assert len(password) >= 32

            assert _raw_reply(port, b"GET x\r\n").startswith(b"-NOAUTH")
            assert _raw_reply(port, b"CONFIG GET dir\r\n").startswith(b"-NOAUTH")
            wrong = redis.Redis(host="127.0.0.1", port=port, password="guess", socket_timeout=5)
            with pytest.raises(redis.AuthenticationError):
                wrong.ping()
            wrong.close()
            assert all(password not in line for line in _command_lines(_descendants(server.pid)))

            _queue_answers(url)
            server.terminate()
            assert server.wait(timeout=10) == 0
        finally:
            kill_group(server)
    assert urls[0].split("@")[0] == urls[1].split("@")[0]  # the same password after a restart
