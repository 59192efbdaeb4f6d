"""Manifests the CLI tests write to disk, and a runner for ``python -m distsched``."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml


def node(name: str, *, cpu: str = "4", memory: str = "8Gi", taint: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if taint:
        spec["taints"] = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": spec,
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"}},
    }


def pod(name: str, *, cpu: str = "100m", namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "nginx:1.27",
                    "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}},
                }
            ]
        },
    }


def write_yaml(path: Path, documents: list[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    return path


def cli_env(**extra: str) -> dict[str, str]:
    """The test's environment without a Redis URL (each call passes its own)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DISTSCHED_REDIS")}
    env.update(extra)
    return env


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
