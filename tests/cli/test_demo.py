"""`distsched up --demo` with no Redis URL: an embedded server, and nothing else touched.

While the demo runs, the test samples every TCP connection of the `up` process tree
(from /proc): every connection must go to the embedded server's port, none to the
machine's Redis on 6379.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

from tests.cli.manifests import cli_env, kill_group

MACHINE_REDIS_PORT = 6379
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
        embedded_port = None
        deadline = time.monotonic() + 90
        while up.poll() is None and time.monotonic() < deadline:
            if embedded_port is None:
                text = out_path.read_text()
                match = re.search(r"embedded Redis at redis://127\.0\.0\.1:(\d+)/0", text)
                embedded_port = int(match.group(1)) if match else None
            seen |= _connections(_socket_inodes(_descendants(up.pid)))
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
    # The embedded server and its temporary data directory are gone.
    assert not list(tmp_path.glob("distsched-redis-*"))


def test_server_prints_its_url_and_stops_on_sigterm(tmp_path: Path) -> None:
    env = cli_env(HOME=str(tmp_path), TMPDIR=str(tmp_path))
    out_path = tmp_path / "server.out"
    with out_path.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "distsched", "server"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 15
        match = None
        while match is None and time.monotonic() < deadline:
            match = re.search(r"^redis://127\.0\.0\.1:(\d+)/0$", out_path.read_text(), re.M)
            time.sleep(0.05)
        assert match is not None, out_path.read_text()
        assert int(match.group(1)) != MACHINE_REDIS_PORT
        result = subprocess.run(
            [sys.executable, "-m", "distsched", "queue", "-o", "json"],
            capture_output=True,
            text=True,
            env=cli_env(DISTSCHED_REDIS_URL=match.group(0)),
            timeout=30,
        )
        assert result.returncode == 0, result.stderr
        assert list(tmp_path.glob("distsched-redis-*"))  # its data directory, while it runs
        server.terminate()
        assert server.wait(timeout=10) == 0
        assert not list(tmp_path.glob("distsched-redis-*"))
    finally:
        kill_group(server)
