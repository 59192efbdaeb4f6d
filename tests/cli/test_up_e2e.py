"""The CLI end to end, as a user drives it: `distsched up` in the background on a private
server, `apply -f DIR`, `get`, `queue`, `explain`, then Ctrl-C."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from distsched.embedded import EmbeddedRedis
from tests.cli.manifests import (
    cli_env,
    kill_group,
    live_group_members,
    node,
    pod,
    run_cli,
    write_yaml,
)
from tests.support.waits import wait_for

SCHEDULABLE = 24
ROLES = ["--workers", "2", "--binders", "1"]


def _manifest_dir(root: Path) -> Path:
    """Three nodes (one tainted), pods in YAML and in a JSON List, one pod too big for all."""
    directory = root / "manifests"
    directory.mkdir()
    write_yaml(
        directory / "00-nodes.yaml",
        [node("node-a"), node("node-b"), node("node-gpu", cpu="64", taint=True)],
    )
    write_yaml(directory / "10-web.yaml", [pod(f"web-{i:02d}") for i in range(SCHEDULABLE - 4)])
    batch = {"apiVersion": "v1", "kind": "List", "items": [pod(f"job-{i}") for i in range(4)]}
    (directory / "20-jobs.json").write_text(json.dumps(batch))
    # Needs 32 cpu: node-a/node-b have 4, node-gpu has 64 behind an untolerated taint.
    (directory / "30-too-big.json").write_text(json.dumps(pod("too-big", cpu="32")))
    return directory


def test_up_apply_get_queue_explain_and_ctrl_c(
    private_redis: EmbeddedRedis, tmp_path: Path
) -> None:
    url = private_redis.url
    log = tmp_path / "up.log"
    with log.open("wb") as out:
        up = subprocess.Popen(
            [sys.executable, "-m", "distsched", "up", "--redis-url", url, *ROLES],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=cli_env(),
            start_new_session=True,
        )
    try:
        applied = run_cli("apply", "-f", str(_manifest_dir(tmp_path)), url=url)
        assert applied.returncode == 0, applied.stderr
        assert len(applied.stdout.splitlines()) == 3 + SCHEDULABLE + 1

        def tail() -> str:
            return log.read_text()[-3000:]

        def all_bound() -> dict[str, Any] | None:
            listed = run_cli("get", "pods", "-o", "json", url=url)
            assert listed.returncode == 0, listed.stderr
            document = json.loads(listed.stdout)
            assert document["kind"] == "List"
            nodes = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in document["items"]}
            bound = {name: n for name, n in nodes.items() if n}
            return nodes if len(bound) == SCHEDULABLE and "too-big" not in bound else None

        nodes = wait_for("every schedulable pod bound", all_bound, 30, every=0.25, context=tail)
        placed = {n for name, n in nodes.items() if name != "too-big"}
        assert placed <= {"node-a", "node-b"}  # the tainted node takes none of them

        def queue_settled() -> dict[str, Any] | None:
            status = json.loads(run_cli("queue", "-o", "json", url=url).stdout)
            counts = status["counts"]
            settled = all(counts[q] == 0 for q in ("active", "backoff", "inflight", "assumed"))
            return status if settled and counts["unschedulable"] == 1 else None

        status = wait_for("queue drained", queue_settled, 15, every=0.25, context=tail)
        assert status["counts"]["gated"] == 0 and status["counts"]["dead-lettered"] == 0
        assert status["heads"]["unschedulable"] == ["default/too-big"]

        explained = run_cli("explain", "pod", "too-big", "-n", "default", url=url)
        assert explained.returncode == 0, explained.stderr
        text = explained.stdout
        assert "0/3 nodes are available:" in text, text
        assert "2 Insufficient cpu" in text, text
        assert "1 node(s) had untolerated taint" in text, text
        assert "NodeResourcesFit" in text and "TaintToleration" in text, text

        up.send_signal(signal.SIGINT)
        started = time.monotonic()
        assert up.wait(timeout=15) == 0, log.read_text()[-3000:]
        assert time.monotonic() - started < 15
        # No worker or binder outlives `up` (multiprocessing's resource tracker may take a
        # moment to notice its parent is gone).
        wait_for("no process left", lambda: not live_group_members(up.pid), 3, context=tail)
    finally:
        kill_group(up)
