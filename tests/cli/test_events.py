"""``distsched get events`` and the events of ``describe pod``, as kubectl prints them
(issue 25, item 3): kube's event columns (printers.go: LAST SEEN, TYPE, REASON, OBJECT,
MESSAGE; ``-o wide`` in kubectl's order), a series' age in describe (``62s (x2 over
2m2s)``), field selectors on the involved object. Entries are written with the ids (times)
of a scheduler run at T0 + 60/100/120/150 s; the CLI's clock reads T0 + 182 s."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import redis

from distsched.event_log import PodEvent
from distsched.store import Store
from tests.cli.conftest import KEYS, T0_MS
from tests.cli.manifests import cli_env, invoke
from tests.support.objects import node, pod

pytestmark = pytest.mark.usefixtures("frozen_clock")

NO_FIT = "0/3 nodes are available: 3 Insufficient cpu."


def at(r: redis.Redis, seconds: int, event: PodEvent) -> None:
    r.xadd(KEYS.recorded_events, event.fields(), id=f"{T0_MS + seconds * 1000}-0")


@pytest.fixture
def history(r: redis.Redis, store: Store) -> str:
    """web-1 failed twice, then was bound; prod/other was preempted for it. Returns
    web-1's uid."""
    store.create_many([node("n1"), pod("web-1"), pod("other", namespace="prod")])
    uid = store.get("Pod", "default/web-1")["metadata"]["uid"]
    failed = PodEvent("default/web-1", uid, "Warning", "FailedScheduling", NO_FIT)
    at(r, 60, failed)
    preempted = PodEvent(
        "prod/other",
        "u2",
        "Normal",
        "Preempted",
        f"Preempted by pod {uid} on node n1",
        related="default/web-1",
    )
    at(r, 100, preempted)
    at(r, 120, failed)
    scheduled = "Successfully assigned default/web-1 to n1"
    at(r, 150, PodEvent("default/web-1", uid, "Normal", "Scheduled", scheduled))
    store.bind("default/web-1", None, "n1")
    return uid


def test_get_events_lists_the_current_namespace_by_last_occurrence(
    redis_url: str, history: str
) -> None:
    result = invoke(redis_url, "get", "events")
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "LAST SEEN   TYPE      REASON             OBJECT      MESSAGE\n"
        "62s         Warning   FailedScheduling   pod/web-1   " + NO_FIT + "\n"
        "32s         Normal    Scheduled          pod/web-1   "
        "Successfully assigned default/web-1 to n1\n"
    )
    every = invoke(redis_url, "get", "ev", "-A").stdout.splitlines()
    assert every[0].split() == ["NAMESPACE", "LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert [line.split()[:4] for line in every[1:]] == [
        ["prod", "82s", "Normal", "Preempted"],
        ["default", "62s", "Warning", "FailedScheduling"],
        ["default", "32s", "Normal", "Scheduled"],
    ]


def test_get_events_wide_has_kubectls_columns(redis_url: str, history: str) -> None:
    lines = invoke(redis_url, "get", "events", "-n", "prod", "-o", "wide").stdout.splitlines()
    header = "LAST SEEN   TYPE     REASON      OBJECT      SUBOBJECT   SOURCE              MESSAGE"
    assert lines[0].startswith(header)
    assert lines[0].endswith("FIRST SEEN   COUNT   NAME")
    cells = lines[1].split("   ")
    assert [c.strip() for c in cells if c.strip()][:5] == [
        "82s",
        "Normal",
        "Preempted",
        "pod/other",
        "default-scheduler",
    ]
    assert lines[1].rstrip().endswith(f"82s          1       other.{(T0_MS + 100_000) * 10**6:x}")


def test_field_selectors_on_the_involved_object(redis_url: str, history: str) -> None:
    result = invoke(
        redis_url,
        "get",
        "events",
        "-A",
        "--field-selector",
        "involvedObject.name=web-1,type=Warning",
        "-o",
        "json",
    )
    assert result.exit_code == 0, result.output
    [event] = json.loads(result.stdout)["items"]
    assert (event["reason"], event["count"]) == ("FailedScheduling", 2)
    assert event["involvedObject"]["namespace"] == "default"
    assert event["firstTimestamp"] == "2023-11-14T22:14:20Z"  # T0 + 60 s
    assert event["lastTimestamp"] == "2023-11-14T22:15:20Z"  # T0 + 120 s
    bad = invoke(redis_url, "get", "events", "--field-selector", "spec.nodeName=n1")
    assert bad.exit_code == 2 and "field label not supported: spec.nodeName" in bad.stderr


def test_one_event_by_name_and_none_found(redis_url: str, history: str) -> None:
    name = f"web-1.{(T0_MS + 60_000) * 10**6:x}"
    result = invoke(redis_url, "get", "event", name, "-o", "yaml")
    assert result.exit_code == 0, result.output
    assert f"name: {name}" in result.stdout and "count: 2" in result.stdout
    none = invoke(redis_url, "get", "events", "-n", "empty")
    assert none.exit_code == 0 and none.stderr == "No resources found in empty namespace.\n"


def test_describe_pod_shows_the_recorded_series(redis_url: str, history: str) -> None:
    out = invoke(redis_url, "describe", "pod", "web-1").stdout.splitlines()
    events = out[out.index("Events:") :]
    assert events == [
        "Events:",
        "  Type     Reason            Age                 From               Message",
        "  ----     ------            ----                ----               -------",
        "  Warning  FailedScheduling  62s (x2 over 2m2s)  default-scheduler  " + NO_FIT,
        "  Normal   Scheduled         32s                 default-scheduler  "
        "Successfully assigned default/web-1 to n1",
    ]


def test_another_incarnation_does_not_inherit_the_events(
    r: redis.Redis, redis_url: str, store: Store, history: str
) -> None:
    store.delete("Pod", "default/web-1")
    store.create(pod("web-1"))
    out = invoke(redis_url, "describe", "pod", "web-1").stdout.splitlines()
    assert out[-1].split() == ["Events:", "<none>"]


def test_watch_prints_an_event_each_time_it_is_recorded(r: redis.Redis, redis_url: str) -> None:
    from distsched import event_log

    event_log.record(r, KEYS, [PodEvent("default/a", "u", "Warning", "FailedScheduling", NO_FIT)])
    watcher = subprocess.Popen(
        [sys.executable, "-m", "distsched", "get", "events", "-w", "--request-timeout", "4s",
         "--redis-url", redis_url, "--scheduler", "test"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(),
    )  # fmt: skip
    try:
        assert watcher.stdout is not None
        first = [watcher.stdout.readline() for _ in range(2)]  # the table: it is watching
        later = [
            PodEvent("default/a", "u", "Normal", "Scheduled", "Successfully assigned default/a"),
            PodEvent("prod/b", "v", "Normal", "Scheduled", "another namespace: not shown"),
        ]
        event_log.record(r, KEYS, later)
        out, err = watcher.communicate(timeout=30)
    finally:
        watcher.kill()
    assert watcher.returncode == 0, err
    rows = [line.split(None, 3) for line in first + out.splitlines()]
    assert [row[1:3] for row in rows] == [
        ["SEEN", "TYPE"],
        ["Warning", "FailedScheduling"],
        ["Normal", "Scheduled"],
    ]
