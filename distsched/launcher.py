"""Start, stop, kill and restart role processes: ``python -m distsched <role>``.

Each role runs in a process of its own, exactly as an operator runs it, whoever starts
it: ``distsched up``, ``distsched replay``, the bench and the crash tests. A process
started with ``own_session`` (the bench's and the tests') leads a process group of its
own, so that :meth:`RoleProcess.kill` takes a binder pool's children with it and a
terminal's Ctrl-C does not reach it; ``up`` starts its roles in its own group instead,
so that Ctrl-C (and a closed terminal) reach every role as they reach ``up``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from distsched.connection import URL_ENV, RedisOptions

STOP_TIMEOUT_S = 15.0


def tls_args(options: RedisOptions) -> list[str]:
    """The TLS and acknowledgement options as flags, for a role's command line."""
    args: list[str] = []
    if options.min_replicas_ack is not None:
        args += ["--min-replicas-ack", str(options.min_replicas_ack)]
    for flag, value in (
        ("--redis-ca", options.ca_cert),
        ("--redis-cert", options.cert),
        ("--redis-key", options.key),
    ):
        if value:
            args += [flag, value]
    return args


def redis_args(options: RedisOptions, scheduler: str) -> list[str]:
    """Where a role finds its deployment, as flags: the scheduler name, TLS and acks. The
    URL goes in its environment (:func:`role_env`)."""
    return ["--scheduler", scheduler, *tls_args(options)]


def role_env(options: RedisOptions, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with the Redis URL: it may carry a
    password, which the environment keeps from other local users and a command line
    does not (ps)."""
    return {**(os.environ if base is None else base), URL_ENV: options.url}


@dataclass
class RoleProcess:
    """One ``python -m distsched <role> <args>`` process; :meth:`start` again restarts it."""

    role: str
    args: list[str]
    env: dict[str, str] | None = None  # None: this process's environment
    log_path: Path | None = None  # stdout and stderr, appended; None: this process's own
    own_session: bool = True
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0

    def start(self) -> RoleProcess:
        cmd = [sys.executable, "-m", "distsched", self.role, *self.args]
        with contextlib.ExitStack() as files:
            out = files.enter_context(open(self.log_path, "ab")) if self.log_path else None
            self.process = subprocess.Popen(
                cmd,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT if out else None,
                start_new_session=self.own_session,
            )
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
        """SIGKILL; in its own session also its children (a binder pool's share its group)."""
        if self.alive():
            assert self.process is not None
            with contextlib.suppress(ProcessLookupError):
                if self.own_session:
                    os.killpg(self.process.pid, signal.SIGKILL)
                else:
                    self.process.kill()
            self.process.wait(timeout=10)

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        stop_all([self], timeout_s)

    def restart(self) -> RoleProcess:
        self.kill()
        return self.start()


def stop_all(processes: Sequence[RoleProcess], timeout_s: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM to all at once (SIGCONT first: a stopped process cannot act on it), then
    SIGKILL to those still running after ``timeout_s``."""
    for proc in processes:
        proc.signal(signal.SIGCONT)
        proc.signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    for proc in processes:
        if proc.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.process.wait(timeout=max(0.1, deadline - time.monotonic()))
        proc.kill()
