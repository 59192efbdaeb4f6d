"""Start, stop, kill and restart distsched role processes (tests, bench, chaos).

Each role runs as ``python -m distsched <role>`` in its own process, exactly as an
operator runs it, so crash tests can SIGKILL and SIGSTOP real processes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class RoleProcess:
    role: str
    args: list[str]
    env: dict[str, str]
    log_path: Path | None = None
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0

    def start(self) -> RoleProcess:
        cmd = [sys.executable, "-m", "distsched", *self.args]
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        self.process = subprocess.Popen(
            cmd, env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        if self.log_path:
            out.close()  # type: ignore[union-attr]
        self.starts += 1
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive():
            assert self.process is not None
            os.kill(self.process.pid, sig)

    def kill(self) -> None:
        """SIGKILL, and for a binder pool also its children (they share a process group)."""
        if self.alive():
            assert self.process is not None
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self, timeout: float = 15.0) -> None:
        if not self.alive():
            return
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)
        self.process.terminate()
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def restart(self) -> RoleProcess:
        self.kill()
        return self.start()


@dataclass
class ProcessGroup:
    """Workers and binders against one Redis URL and scheduler name."""

    redis_url: str
    scheduler: str = "default"
    log_dir: Path | None = None
    extra_env: dict[str, str] = field(default_factory=dict)
    processes: list[RoleProcess] = field(default_factory=list)

    def _env(self) -> dict[str, str]:
        env = {**os.environ, **self.extra_env}
        env.pop("DISTSCHED_REDIS_URL", None)
        return env

    def spawn(self, role: str, *extra: str) -> RoleProcess:
        args = [role, "--redis-url", self.redis_url, "--scheduler", self.scheduler, *extra]
        index = sum(1 for p in self.processes if p.role == role)
        log = self.log_dir / f"{role}-{index}.log" if self.log_dir else None
        proc = RoleProcess(role, args, self._env(), log)
        self.processes.append(proc)
        return proc.start()

    def workers(self) -> list[RoleProcess]:
        return [p for p in self.processes if p.role == "worker"]

    def binders(self) -> list[RoleProcess]:
        return [p for p in self.processes if p.role == "binder"]

    def stop(self) -> None:
        for proc in self.processes:
            proc.signal(signal.SIGCONT)
            proc.signal(signal.SIGTERM)
        deadline = time.monotonic() + 15
        for proc in self.processes:
            while proc.alive() and time.monotonic() < deadline:
                time.sleep(0.05)
            proc.kill()

    def __enter__(self) -> ProcessGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
