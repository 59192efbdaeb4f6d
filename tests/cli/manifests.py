"""Manifests the CLI tests write to disk, and runners of ``distsched``: in this process
(:func:`invoke`) and as ``python -m distsched`` (:func:`run_cli`)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import redis
import yaml
from click.testing import CliRunner, Result

from distsched.cli import main
from distsched.keys import Keys
from tests.support import objects
from tests.support.objects import Obj

GPU_TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


def node(name: str, *, cpu: str = "4", memory: str = "8Gi", taint: bool = False) -> Obj:
    """A node as a user's manifest has it (110 pods), optionally tainted dedicated=gpu."""
    taints = [GPU_TAINT] if taint else None
    return objects.node(name, cpu=cpu, memory=memory, pods="110", taints=taints)


def pod(name: str, *, cpu: str = "100m", namespace: str = "default") -> Obj:
    """An nginx pod as a user's manifest has it."""
    return objects.pod(
        name, cpu=cpu, memory="64Mi", namespace=namespace, container="app", image="nginx:1.27"
    )


def write_yaml(path: Path, documents: list[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    return path


def cli_env(**extra: str) -> dict[str, str]:
    """The test's environment without a Redis URL (each call passes its own)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DISTSCHED_REDIS")}
    env.update(extra)
    return env


def invoke(url: str, *args: str, input: str | None = None) -> Result:
    """``distsched ARGS`` in this process (click's runner), on deployment "test"."""
    runner = CliRunner(env={"DISTSCHED_REDIS_URL": None})
    return runner.invoke(main, [*args, "--redis-url", url, "--scheduler", "test"], input=input)


def stored_keys(r: redis.Redis, keys: Keys) -> list[bytes]:
    """Every Redis key of the deployment."""
    return list(r.scan_iter(match=keys.pattern))


def run_cli(*args: str, url: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    """``python -m distsched ARGS --redis-url URL`` as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "distsched", *args, "--redis-url", url],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=cli_env(),
    )


def kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL whatever is left of a process started with start_new_session=True (its
    children share its process group)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)


def live_group_members(pgid: int) -> list[int]:
    """Pids of the process group that are alive (zombies waiting for init excluded)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid pgrp ...": comm may hold spaces, so split after ")".
        state, _ppid, pgrp = stat.rsplit(")", 1)[1].split()[:3]
        if int(pgrp) == pgid and state != "Z":
            members.append(int(entry.name))
    return members
