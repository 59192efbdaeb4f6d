"""Every redis-cli recipe of docs/operating.md, run against a server the demo ran on, and
the doc's key layout and metrics list checked against the code."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from distsched.clock import FakeClock
from distsched.embedded import EmbeddedRedis
from distsched.keys import Keys
from distsched.queue_redis import RedisQueue
from distsched.queue_types import PodEntry, QueueConfig
from tests.cli.manifests import cli_env, pod
from tests.ops.scrape import exposed_families

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "operating.md").read_text()
ERROR_PREFIXES = ("ERR", "WRONGTYPE", "NOAUTH", "WRONGPASS", "(error)", "Could not connect")


def recipes() -> list[str]:
    """The redis-cli lines of the doc's ```sh blocks."""
    blocks = re.findall(r"```sh\n(.*?)```", DOC, re.S)
    return [
        line.strip()
        for block in blocks
        for line in block.splitlines()
        if line.strip().startswith("redis-cli ")
    ]


# What a recipe's output must contain on the prepared server (others: no error, any output).
EXPECTED = {
    "ZRANGE '{ds:default}:q:active'": ["demo/extra-2\n-100\n", "demo/extra-3\n0\n"],
    "ZRANGE '{ds:default}:q:backoff'": ["demo/extra-1"],
    "ZRANGE '{ds:default}:q:unschedulable'": ["demo/too-big"],
    "ZRANGE '{ds:default}:q:inflight'": ["demo/extra-0"],
    "ZRANGE '{ds:default}:q:gated'": ["demo/held"],
    "ZRANGE '{ds:default}:q:dead'": ["demo/crasher"],
    "HGET '{ds:default}:q:info' demo/too-big": ["unschedulable|", "NodeResourcesFit"],
    "HGET '{ds:default}:q:explain' demo/too-big": ["0/20 nodes are available"],
    "XLEN": [],  # checked as a number below
    "XRANGE '{ds:default}:store:events' - + COUNT 3": ["ADDED", "node-00"],
    "XINFO GROUPS": ["queue-handlers"],
    "HGET '{ds:default}:store:meta:Pod' demo/demo-000": ["|node-"],
    "HGETALL '{ds:default}:cache:node:node-00'": ["alloc:cpu", "8000", "live", "topo:"],
    "HGET '{ds:default}:cache:capacity' node-00": ["cpu=8000,", "pods="],
    "HGET '{ds:default}:cache:usage' node-00": ["|cpu=", "pods="],
    "SMEMBERS '{ds:default}:cache:nodepods:node-00'": ["demo/demo-"],
    "HGET '{ds:default}:cache:pods' demo/demo-000": ["node-", "cpu=", "pods=1"],
    "LLEN rq:queue:distsched-bind-default": ["0"],
}


def _prepare_queue(client: redis.Redis) -> None:
    """Leave a pod in every sub-queue, as a busy or troubled deployment would."""
    from distsched.store import Store

    keys = Keys()
    # The queue moves below are made by hand: the store must not enqueue the pods itself.
    client.delete(keys.profiles)
    Store(client, keys).create_many(
        [pod(n, namespace="demo") for n in ("extra-0", "extra-1", "extra-2", "extra-3", "held")]
        + [pod("crasher", namespace="demo")]
    )
    config = QueueConfig()
    queue = RedisQueue(client, keys, config=config)
    clock = FakeClock(int(time.time() * 1000))

    def entry(name: str, priority: int = 0, *, gated: bool = False) -> PodEntry:
        return PodEntry(key=f"demo/{name}", uid=name, priority=priority, gated=gated)

    # A pod whose every delivery dies with its worker: leases expire until it is dead-lettered.
    queue.add([entry("crasher")], now_ms=clock.now_ms())
    for _ in range(config.max_deliveries):
        assert [p.key for p in queue.pop(1, now_ms=clock.now_ms())] == ["demo/crasher"]
        clock.step(config.lease_ms + 1)
        assert queue.reclaim_expired_leases(now_ms=clock.now_ms()) == ["demo/crasher"]
    assert queue.pop(1, now_ms=clock.now_ms()) == []
    queue.add([entry("extra-0"), entry("extra-1")], now_ms=clock.now_ms())
    queue.pop(1, now_ms=clock.now_ms())  # extra-0 stays inflight
    failed = queue.pop(1, now_ms=clock.now_ms())[0]  # extra-1 fails with an error: backoffQ
    queue.add([entry("extra-3"), entry("extra-2", 100)], now_ms=clock.now_ms())
    queue.add([entry("held", gated=True)], now_ms=clock.now_ms())
    where = queue.add_unschedulable_if_not_present(
        failed.key, epoch=failed.epoch, plugins=[], now_ms=clock.now_ms(), error=True
    )
    assert where == "backoff"


@pytest.fixture(scope="module")
def demo_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = EmbeddedRedis(data_dir=tmp_path_factory.mktemp("recipes"), appendfsync="everysec")
    server.start()
    try:
        demo = subprocess.run(
            [sys.executable, "-m", "distsched", "up", "--demo", "--redis-url", server.url],
            capture_output=True,
            text=True,
            timeout=120,
            env=cli_env(),
        )
        assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-2000:]
        client = redis.Redis.from_url(server.url)
        _prepare_queue(client)
        client.close()
        yield server.url
    finally:
        server.stop()


def test_the_doc_has_the_recipes_operators_need() -> None:
    found = recipes()
    for wanted in (
        "ZRANGE '{ds:default}:q:active' 0 -1 WITHSCORES",
        "ZRANGE '{ds:default}:q:backoff' 0 -1 WITHSCORES",
        "ZRANGE '{ds:default}:q:unschedulable' 0 -1 WITHSCORES",
        "ZRANGE '{ds:default}:q:inflight' 0 -1 WITHSCORES",
        "HGET '{ds:default}:q:info' ",
        "XLEN '{ds:default}:store:events'",
        "XRANGE '{ds:default}:store:events' - + COUNT 3",
        "HGETALL '{ds:default}:cache:node:",
    ):
        assert any(wanted in line for line in found), wanted
    for key in EXPECTED:
        assert any(key in line for line in found), key


@pytest.mark.parametrize("recipe", recipes())
def test_recipe_runs(demo_server: str, recipe: str) -> None:
    if shutil.which("redis-cli") is None and not os.environ.get("CI"):
        pytest.skip("redis-cli is not installed here (CI's machine has it)")
    result = subprocess.run(
        ["bash", "-c", recipe],
        capture_output=True,
        text=True,
        errors="replace",  # stream entries carry msgpack objects
        timeout=10,
        env={**os.environ, "URL": demo_server},
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert not any(line.startswith(ERROR_PREFIXES) for line in output.splitlines()), output
    for key, wanted in EXPECTED.items():
        if key in recipe:
            assert output.strip(), f"{recipe}: no output"
            for part in wanted:
                assert part in output, (recipe, part, output[:500])
    if "q:active" in recipe:  # pop order: the higher priority first
        assert output.index("demo/extra-2") < output.index("demo/extra-3")
    if "XLEN" in recipe:
        assert int(output.strip()) >= 20 + 301  # the demo's nodes and pods, then bindings


def test_the_key_layout_names_every_key_of_keys_py() -> None:
    keys = Keys()
    table = DOC[DOC.index("## Redis key layout") : DOC.index("## redis-cli recipes")]
    names = [
        name
        for name in dir(Keys)
        if isinstance(getattr(Keys, name), property) and name not in ("tag", "pattern")
    ]
    assert len(names) >= 15
    for name in names:
        documented = getattr(keys, name).replace(keys.tag, "T")
        assert f"`{documented}`" in table or f"`{documented}`," in table, name
    for kind in ("Pod", "Node"):
        assert f"`T:store:obj:{kind}`" in table and f"`T:store:meta:{kind}`" in table


def test_the_metrics_list_documents_every_exposed_series(r: redis.Redis) -> None:
    table = DOC[DOC.index("## Metrics") :]
    documented = set(re.findall(r"^\| `(distsched_[a-z0-9_]+)`", table, re.M))
    assert documented == set(exposed_families(r))
