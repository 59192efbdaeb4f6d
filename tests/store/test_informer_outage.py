"""The informer survives a Redis outage (a real redis-server of our own, killed and restarted)."""

from __future__ import annotations

import logging
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from distsched.clock import FakeClock
from distsched.embedded import server_binary
from distsched.keys import Keys
from distsched.store import Informer, Store
from tests.store.helpers import Recorder, make_pod
from tests.support.waits import wait_for

REDIS_SERVER = str(server_binary())  # the embedded valkey, else redis-server on PATH


class RedisProcess:
    """A redis-server on a free port with its data (AOF, fsync always) in ``data_dir``."""

    def __init__(self, data_dir: Path) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.data_dir = data_dir
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        assert REDIS_SERVER is not None
        args = ["--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.data_dir)]
        args += ["--save", "", "--appendonly", "yes", "--appendfsync", "always"]
        self._proc = subprocess.Popen(
            [REDIS_SERVER, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        probe = redis.Redis(port=self.port, socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0))
        # Waiting for a process to listen, not for a timeout.
        wait_for("the server to listen", probe.ping, 5, every=0.02, retry=(redis.ConnectionError,))
        probe.close()

    def kill(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait(5)
            self._proc = None


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisProcess]:
    if REDIS_SERVER is None:
        pytest.skip("redis-server binary not on PATH")
    server = RedisProcess(tmp_path / "data")
    server.start()
    yield server
    server.kill()


class WarningSeen(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.seen.set()


@pytest.mark.parametrize("data_survives", [True, False], ids=["persisted", "data-lost"])
def test_informer_resumes_after_redis_restart(
    own_redis: RedisProcess, tmp_path: Path, data_survives: bool
) -> None:
    started = time.monotonic()
    keys, clock = Keys("outage"), FakeClock()
    # No client-side retries: the informer's own backoff is what is under test.
    client = redis.Redis(
        port=own_redis.port,
        socket_timeout=2,
        socket_connect_timeout=0.5,
        retry=Retry(NoBackoff(), 0),
    )
    store = Store(client, keys, clock)
    store.create(make_pod("before"))
    informer = Informer(client, keys, block_ms=200, backoff_initial_s=0.05, backoff_max_s=0.4)
    pods = Recorder()
    informer.add_handler("Pod", pods)
    warned = WarningSeen()
    logger = logging.getLogger("distsched.store.informer")
    logger.addHandler(warned)
    informer.start()
    try:
        assert informer.wait_synced(5)
        own_redis.kill()
        assert warned.seen.wait(5), "the informer noticed the outage"
        assert informer._thread is not None and informer._thread.is_alive()
        if not data_survives:
            shutil.rmtree(own_redis.data_dir)
        own_redis.start()
        store.create(make_pod("after"))
        if data_survives:
            calls = pods.wait_for(2)
            assert [c[:2] for c in calls] == [("add", "before"), ("add", "after")]
            assert calls[1] == ("add", "after", "2", False)
        else:
            calls = pods.wait_for(3)
            assert calls[0] == ("add", "before", "1", True)
            assert set(calls[1:]) == {("delete", "before", "1", True), ("add", "after", "1", False)}
        names = sorted(p["metadata"]["name"] for p in informer.list("Pod"))
        assert names == (["after", "before"] if data_survives else ["after"])
    finally:
        informer.stop()
        logger.removeHandler(warned)
        client.close()
    assert time.monotonic() - started < 10
