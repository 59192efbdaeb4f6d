"""The README's Quick start manifests apply and schedule as their comments say."""

from __future__ import annotations

from pathlib import Path

import redis

from distsched.bench.procs import ProcessGroup
from distsched.keys import Keys
from distsched.model import load_path
from distsched.store import Store
from tests.e2e.cluster import bound_nodes, wait_for

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_examples_schedule_as_documented(
    private_client: redis.Redis, processes: ProcessGroup
) -> None:
    keys = Keys()
    Store(private_client, keys).apply_many([o.to_dict() for o in load_path(str(EXAMPLES))])
    processes.spawn("worker")
    processes.spawn("binder")
    wait_for(lambda: len(bound_nodes(private_client, keys)) == 5, 30, "five pods to bind")
    bound = bound_nodes(private_client, keys)
    assert {bound[f"default/web-{i}"] for i in (1, 2, 3)} == {"node-a", "node-b", "node-c"}
    assert bound["default/db-1"] == "node-a"  # the other SSD node is tainted
    assert bound["default/train-1"] in ("node-a", "node-b", "node-c")
    assert "default/huge-1" not in bound
