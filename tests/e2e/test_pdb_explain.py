"""A PodDisruptionBudget steers preemption in a running worker, and `distsched explain`
says so: zk-0 (priority 0) is cheaper to evict than batch (priority 5), but its budget
allows no disruption, so the preemptor evicts batch. The pod is held between Reserve and
Bind (no binder yet) so that its explanation can be read; then a binder binds it and the
checker's invariants hold."""

from __future__ import annotations

from pathlib import Path

import redis
from click.testing import CliRunner

from distsched.bench.checker import check
from distsched.bench.procs import ProcessGroup
from distsched.cli import main
from distsched.embedded import EmbeddedRedis
from distsched.keys import Keys
from distsched.store import Store
from tests.support.readers import bound_nodes
from tests.support.waits import wait_for

MANIFEST = Path(__file__).parent / "manifests" / "pdb-preemption.yaml"


def cli(url: str, *args: str) -> str:
    result = CliRunner(env={"DISTSCHED_REDIS_URL": None}).invoke(main, [*args, "--redis-url", url])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_a_budget_protects_a_cheaper_victim_and_explain_says_so(
    private_redis: EmbeddedRedis, private_client: redis.Redis, processes: ProcessGroup
) -> None:
    url, keys = private_redis.url, Keys()
    cli(url, "apply", "-f", str(MANIFEST))
    processes.spawn("worker")
    expected = (
        "0/2 nodes are available: 2 Insufficient cpu. preemption: nominated node n2; "
        "PodDisruptionBudget default/zk-pdb protected pod default/zk-0: node n1 passed over "
        "(1 violation(s))."
    )
    wait_for("the PDB note", lambda: expected in cli(url, "explain", "pod", "urgent"), 30)
    store = Store(private_client, keys)
    assert store.get("Pod", "default/batch") is None  # the victim
    assert store.get("Pod", "default/zk-0") is not None  # protected
    processes.spawn("binder")
    wait_for("urgent bound", lambda: "default/urgent" in bound_nodes(private_client, keys), 30)
    assert bound_nodes(private_client, keys) == {"default/urgent": "n2", "default/zk-0": "n1"}
    assert check(private_client, keys, expect_bound={"default/urgent", "default/zk-0"}) == []
