"""The compose stack as an operator runs it: the commands (README's Compose bullet and
docs/operating.md show exactly these), podman-compose under a project name of the test's
own, the host's CLI against the published Redis, and Prometheus' HTTP API."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.compose.images import run_tool

ROOT = Path(__file__).resolve().parents[2]

# Grafana is left out: no Debian package stands in for its image.
SERVICES = ("redis", "worker", "binder", "controller", "prometheus")
WORKERS = 4
# Arguments of `podman-compose` / `docker compose`, in the order the test runs them. The
# replica counts come from the environment (docker-compose.yml's `scale:`), so that
# podman-compose's `down` knows every replica: it misses those `up --scale` added.
UP = ("up", "-d", "--build", *SERVICES)
SCALE_ENV = {"DISTSCHED_COMPOSE_WORKERS": str(WORKERS)}  # exported before SCALE
SCALE = ("up", "-d", "--no-recreate", *SERVICES)  # not restarting replica 1
DOWN = ("down", "-v")
# Arguments of the host's `distsched`, run from the repository's root.
APPLY = ("apply", "-f", "examples/")
LIST_PODS = ("get", "pods", "-A", "-o", "json")
# The roles Prometheus must scrape, and how many replicas of each run.
ROLES = {"distsched-worker": WORKERS, "distsched-binder": 1, "distsched-controller": 1}
# The one command that runs this test.
TEST_COMMAND = "python -m pytest -m compose tests/compose"


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports nothing listens on (all held open until each is known)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


@dataclass
class Stack:
    project: str
    env: dict[str, str]
    redis_port: int
    prometheus_port: int

    @classmethod
    def create(cls, project: str, podman_env: dict[str, str]) -> Stack:
        redis_port, prometheus_port = free_ports(2)
        # The host's DISTSCHED_* settings must not reach compose (it would hand them to
        # the containers); the stack uses docker-compose.yml's defaults but for the ports.
        env = {k: v for k, v in podman_env.items() if not k.startswith("DISTSCHED_")}
        env["DISTSCHED_COMPOSE_REDIS_PORT"] = str(redis_port)
        env["DISTSCHED_COMPOSE_PROMETHEUS_PORT"] = str(prometheus_port)
        return cls(project, env, redis_port, prometheus_port)

    @property
    def redis_url(self) -> str:
        return f"redis://127.0.0.1:{self.redis_port}/0"

    def compose(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return run_tool(["podman-compose", "-p", self.project, *args], self.env, timeout, ROOT)

    def distsched(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DISTSCHED_")}
        env["DISTSCHED_REDIS_URL"] = self.redis_url
        return subprocess.run(
            [sys.executable, "-m", "distsched", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def podman(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return run_tool(["podman", *args], self.env, timeout)

    @property
    def label(self) -> str:
        return f"label=io.podman.compose.project={self.project}"

    def containers(self) -> list[str]:
        """``name status`` of each container of the project."""
        out = self.podman("ps", "-a", "--filter", self.label, "--format", "{{.Names}} {{.Status}}")
        return out.stdout.splitlines()

    def describe(self, tail: int = 15) -> str:
        """Each container's state and last log lines (for a failure message)."""
        parts = []
        for line in self.containers():
            name = line.split()[0]
            logs = self.podman("logs", "--tail", str(tail), name)
            parts.append(f"--- {line}\n{logs.stdout}{logs.stderr}")
        return "\n".join(parts) or "(no container)"

    def sweep(self) -> list[str]:
        """Remove whatever of the project is left (after `down`); returns what was left."""
        left = []
        ids = self.podman("ps", "-aq", "--filter", self.label).stdout.split()
        if ids:
            left.append(f"{len(ids)} containers")
            self.podman("rm", "-f", "-t", "0", *ids)
        for pod in self.podman(
            "pod", "ps", "-q", "--filter", f"name=^pod_{self.project}$"
        ).stdout.split():
            left.append(f"pod {pod}")
            self.podman("pod", "rm", "-f", pod)
        volumes = self.podman("volume", "ls", "-q", "--filter", self.label).stdout.split()
        if volumes:
            left.append(f"volumes {volumes}")
            self.podman("volume", "rm", "-f", *volumes)
        network = f"{self.project}_default"
        if self.podman("network", "exists", network).returncode == 0:
            left.append(f"network {network}")
            self.podman("network", "rm", "-f", network)
        return left

    def prometheus(self, path: str, **params: str) -> Any:
        url = f"http://127.0.0.1:{self.prometheus_port}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=5) as response:
            body = json.load(response)
        assert body["status"] == "success", body
        return body["data"]

    def healthy_targets(self) -> dict[str, set[str]]:
        """Per scrape job, the instances whose last scrape succeeded."""
        healthy: dict[str, set[str]] = {}
        for target in self.prometheus("/api/v1/targets", state="active")["activeTargets"]:
            if target["health"] == "up":
                healthy.setdefault(target["labels"]["job"], set()).add(target["labels"]["instance"])
        return healthy

    def query(self, expr: str) -> float | None:
        result = self.prometheus("/api/v1/query", query=expr)["result"]
        return float(result[0]["value"][1]) if result else None
