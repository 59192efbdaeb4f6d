"""The bench's and the tests' role processes: workers and binders against one Redis URL,
each logging to a file of its own, with extra environment (fault injection) per spawn.

The processes themselves are :class:`distsched.launcher.RoleProcess`: each in a session
of its own, so crash tests can SIGKILL and SIGSTOP real processes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from distsched.connection import RedisOptions
from distsched.launcher import RoleProcess, redis_args, role_env, stop_all


@dataclass
class ProcessGroup:
    """Workers and binders against one Redis URL and scheduler name."""

    redis_url: str
    scheduler: str = "default"
    log_dir: Path | None = None  # None: the roles' output is dropped
    extra_env: dict[str, str] = field(default_factory=dict)
    processes: list[RoleProcess] = field(default_factory=list)

    def spawn(self, role: str, *extra: str) -> RoleProcess:
        options = RedisOptions(self.redis_url)
        args = [*redis_args(options, self.scheduler), *extra]
        env = role_env(options, {**os.environ, **self.extra_env})
        index = sum(1 for p in self.processes if p.role == role)
        log = self.log_dir / f"{role}-{index}.log" if self.log_dir else Path(os.devnull)
        proc = RoleProcess(role, args, env, log)
        self.processes.append(proc)
        return proc.start()

    def workers(self) -> list[RoleProcess]:
        return [p for p in self.processes if p.role == "worker"]

    def binders(self) -> list[RoleProcess]:
        return [p for p in self.processes if p.role == "binder"]

    def stop(self) -> None:
        stop_all(self.processes)

    def __enter__(self) -> ProcessGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
