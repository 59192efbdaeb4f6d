"""Fault injection for crash tests: pause a role process once at a named point.

Crash tests must SIGKILL or SIGSTOP a process at an exact step of the pipeline (after a
pop, after a reservation, in the middle of a binding job). These environment variables,
read once when a process starts, make it sleep there so the test can act:

``DISTSCHED_FAULT_PAUSE_AFTER``
    the point: ``pop`` or ``reserve`` (scheduling worker), ``bind-claimed`` (binder: the
    reservations are claimed, nothing is bound yet) or ``bind-stored`` (binder: the store
    holds the bindings, the ledger has not confirmed them).
``DISTSCHED_FAULT_PAUSE_S``
    how long to sleep there, seconds (default 30).
``DISTSCHED_FAULT_MARKER``
    a file the process creates (exclusively) when it starts pausing, holding
    ``{"pid", "point", "pods"}`` as JSON: the test's signal that the process is there,
    and which pods it holds. Only the process that creates the file pauses, so respawned
    children and other processes started with the same environment run normally.
    Without a marker, each process pauses the first time it reaches the point.

Unset, :func:`pause_at` is one comparison. Nothing in production sets them.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

POINT_ENV = "DISTSCHED_FAULT_PAUSE_AFTER"
SECONDS_ENV = "DISTSCHED_FAULT_PAUSE_S"
MARKER_ENV = "DISTSCHED_FAULT_MARKER"
POINTS = frozenset({"pop", "reserve", "bind-claimed", "bind-stored"})


@dataclass
class FaultPlan:
    point: str
    seconds: float
    marker: Path | None
    fired: bool = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> FaultPlan | None:
        point = environ.get(POINT_ENV, "")
        if not point:
            return None
        if point not in POINTS:
            raise ValueError(f"{POINT_ENV}={point!r}: expected one of {sorted(POINTS)}")
        marker = environ.get(MARKER_ENV)
        return cls(point, float(environ.get(SECONDS_ENV, "30")), Path(marker) if marker else None)

    def claim(self, pods: Sequence[str]) -> bool:
        """Whether this process is the one to pause (at most once, and once per marker)."""
        if self.fired:
            return False
        self.fired = True
        if self.marker is None:
            return True
        try:
            fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as out:
            json.dump({"pid": os.getpid(), "point": self.point, "pods": list(pods)}, out)
        return True


_PLAN = FaultPlan.from_env()


def pause_at(point: str, pods: Sequence[str]) -> None:
    """Sleep here if the environment asked for a pause at ``point`` (see module doc)."""
    plan = _PLAN
    if plan is None or plan.point != point or not plan.claim(pods):
        return
    log.warning(
        "fault injection: pausing %.1fs after %s holding %d pods", plan.seconds, point, len(pods)
    )
    time.sleep(plan.seconds)
