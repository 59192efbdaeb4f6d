"""`distsched worker`'s loop (workers/main.py run_worker), in process against real Redis:
after each turn the worker settles its garbage collector (gc_tuning.Settler), so no
collection walks what it holds while it schedules."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import redis

from distsched import gc_tuning
from distsched.connection import RedisOptions
from distsched.keys import Keys
from distsched.workers import main as worker_main
from distsched.workers.schedule_one import SchedulingWorker


def test_the_worker_settles_the_collector_after_each_turn(
    r: redis.Redis, redis_url: str, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps: list[str] = []
    stop = threading.Event()
    turn = SchedulingWorker.run_once

    def run_once(self: SchedulingWorker) -> int:
        steps.append("turn")
        return turn(self)

    class RecordingSettler:
        def __init__(self, *_args: Any, **_kwargs: Any) -> None:
            pass

        def settle(self) -> None:
            steps.append("settle")
            if steps.count("settle") == 2:
                stop.set()

    # The test process's own collector stays as it is: no thresholds, no freezing.
    monkeypatch.setattr(gc_tuning, "tune", lambda: None)
    monkeypatch.setattr(gc_tuning, "freeze_initial_state", lambda: None)
    monkeypatch.setattr(gc_tuning, "Settler", RecordingSettler)
    monkeypatch.setattr(SchedulingWorker, "run_once", run_once)
    runner = threading.Thread(
        target=worker_main.run_worker,
        args=(RedisOptions(redis_url), keys),
        kwargs={"stop": stop},
        daemon=True,
    )
    runner.start()
    try:
        runner.join(timeout=30)
        assert not runner.is_alive(), "the loop never settled twice"
    finally:
        stop.set()
        runner.join(timeout=30)
    assert steps == ["turn", "settle", "turn", "settle"]
