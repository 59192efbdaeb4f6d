"""docker-compose.yml run for real with podman and podman-compose, as README's Compose
bullet says (issue 25, item 6): the stack comes up, the host's CLI applies the examples,
workers scale to 4, every pod the examples can fit is bound, and Prometheus scrapes every
replica of every role.

Only with `python -m pytest -m compose tests/compose` (conftest.py). Without podman,
podman-compose or (to build the stand-in images, see images.py) debootstrap, the test is
skipped with the reason; with ``CI`` set it fails instead.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import NoReturn

import pytest
import redis

from distsched.bench.checker import check
from distsched.keys import Keys
from tests.compose import images
from tests.compose.stack import (
    APPLY,
    DOWN,
    LIST_PODS,
    ROLES,
    ROOT,
    SCALE,
    SCALE_ENV,
    TEST_COMMAND,
    UP,
    Stack,
)
from tests.support.waits import wait_for

# What the examples cannot fit (tests/cli/test_examples.py checks why): huge-1 fits no
# node, and the llm-finetune gang's 4 members never fit together, so none is placed.
FITS_NOWHERE = re.compile(r"default/huge-1|ml/llm-finetune-.*")
BOUND = 18  # every other pod: default 5, the shop's 9, the mnist gang's 4


def unavailable(reason: str) -> NoReturn:
    if os.environ.get("CI"):
        pytest.fail(f"compose test cannot run under CI: {reason}")
    pytest.skip(reason)


def ok(proc: subprocess.CompletedProcess[str], what: str) -> None:
    assert proc.returncode == 0, (
        f"{what} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )


@pytest.mark.compose
def test_compose_stack_schedules_the_examples_on_four_workers_and_prometheus_scrapes_all(
    tmp_path: Path,
) -> None:
    if missing := [tool for tool in ("podman", "podman-compose") if not shutil.which(tool)]:
        unavailable(f"not installed: {', '.join(missing)}")
    timings: dict[str, float] = {}
    try:
        podman, prepared = images.prepare(tmp_path, os.environ)
    except images.Unavailable as exc:
        unavailable(str(exc))
    timings.update(prepared)
    stack = Stack.create(f"distsched-test-{os.getpid()}", podman.env)
    passed = False
    try:
        start = time.monotonic()
        ok(stack.compose(*UP, timeout=900), "podman-compose " + " ".join(UP))
        timings["up (build included)"] = time.monotonic() - start
        client = redis.Redis.from_url(stack.redis_url)
        wait_for(
            "the published Redis",
            client.ping,
            60,
            every=0.2,
            retry=(redis.RedisError,),
            context=stack.describe,
        )
        ok(stack.distsched(*APPLY), "distsched " + " ".join(APPLY))
        start = time.monotonic()
        stack.env.update(SCALE_ENV)  # `export`: the `down` below sees it too
        ok(stack.compose(*SCALE), "podman-compose " + " ".join(SCALE))
        scaled = time.monotonic()
        timings["scale to 4 workers"] = scaled - start

        last: dict[str, str | None] = {}

        def placed() -> set[str] | None:
            listed = stack.distsched(*LIST_PODS)
            if listed.returncode != 0:
                return None
            last.clear()
            for pod in json.loads(listed.stdout)["items"]:
                meta = pod["metadata"]
                last[f"{meta.get('namespace', 'default')}/{meta['name']}"] = pod["spec"].get(
                    "nodeName"
                )
            bound = {key for key, node in last.items() if node}
            fits = {key for key in last if not FITS_NOWHERE.fullmatch(key)}
            return bound if len(fits) == BOUND and bound == fits else None

        start = time.monotonic()
        bound = wait_for(
            f"the {BOUND} pods the examples can fit to be bound (and no other)",
            placed,
            120,
            every=0.5,
            context=lambda: f"pods: {last}\n{stack.describe()}",
        )
        timings["apply to all bound"] = time.monotonic() - start

        violations: list[str] = []

        def consistent() -> bool:
            violations[:] = check(client, Keys(), expect_bound=bound)
            return not violations

        wait_for(
            "the invariant checker to pass",
            consistent,
            30,
            every=0.5,
            context=lambda: "\n".join(violations),
        )

        wait_for(
            f"Prometheus to scrape every role ({ROLES})",
            lambda: all(
                len(stack.healthy_targets().get(job, ())) == count for job, count in ROLES.items()
            ),
            120,
            every=1,
            retry=(OSError, ValueError),
            context=lambda: f"healthy targets: {stack.healthy_targets()}\n{stack.describe()}",
        )
        timings["scale to every target up"] = time.monotonic() - scaled
        bindings = 'sum(distsched_bindings_total{job="distsched-binder",result="bound"})'
        wait_for(
            f"Prometheus to have the binder's {len(bound)} bindings",
            lambda: stack.query(bindings) == len(bound),
            60,
            every=1,
            retry=(OSError, ValueError),
            context=lambda: f"{bindings} = {stack.query(bindings)}",
        )
        scheduled = 'sum(distsched_schedule_attempts_total{result="scheduled"})'
        assert (stack.query(scheduled) or 0) >= len(bound), stack.query(scheduled)
        passed = True
    finally:
        start = time.monotonic()
        down = stack.compose(*DOWN)
        timings["down"] = time.monotonic() - start
        left = stack.sweep()
        for note in podman.notes:
            print(f"note: {note}")
        for step, seconds in timings.items():
            print(f"{step}: {seconds:.1f} s")
    if passed:
        ok(down, "podman-compose " + " ".join(DOWN))
        assert not left, f"`podman-compose {' '.join(DOWN)}` left {left}"


def section(text: str, start: str, end: str) -> str:
    begin = text.index(start)
    return text[begin : text.index(end, begin + len(start))]


def test_the_docs_show_the_commands_this_test_runs() -> None:
    """README's Compose bullet and docs/operating.md's Compose section: these commands."""
    readme = (ROOT / "README.md").read_text()
    operating = (ROOT / "docs" / "operating.md").read_text()
    export = " ".join(f"{k}={v}" for k, v in SCALE_ENV.items())
    commands = [
        "podman-compose " + " ".join(UP),
        "distsched " + " ".join(APPLY),
        f"export {export}",
        "podman-compose " + " ".join(SCALE),
        "podman-compose " + " ".join(DOWN),
        TEST_COMMAND,
    ]
    for name, text in (
        ("README.md", section(readme, "- **Compose**", "\n- **")),
        ("docs/operating.md", section(operating, "\n## Compose\n", "\n## ")),
    ):
        missing = [command for command in commands if command not in text]
        assert not missing, f"{name} does not show {missing}"
        lines = [line.strip() for line in text.splitlines()]
        ordered = [next(i for i, line in enumerate(lines) if c in line) for c in commands[:5]]
        assert ordered == sorted(ordered), f"{name}: the commands in another order"
