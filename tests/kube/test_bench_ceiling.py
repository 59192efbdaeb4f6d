"""The bench's ceilings through a real API server: ``--bind-only`` binds each pod as it is
created; ``--bind-events`` also writes the Scheduled event a scheduler writes."""

from __future__ import annotations

import pytest

from distsched.bench.kube import KubeBenchConfig, api_writes, run_kube_bench
from distsched.bench.workloads import WORKLOADS
from distsched.kube.client import EVENTS, KubeClient
from distsched.kube.config import load
from distsched.kube.testenv import TestEnv
from tests.kube.helpers import clean

pytestmark = pytest.mark.kube


@pytest.mark.parametrize("with_events", [False, True])
def test_the_bind_only_ceilings_bind_every_pod_and_write_events_when_asked(
    kube: KubeClient, with_events: bool
) -> None:
    clean(kube)
    before = {e["metadata"]["uid"] for e in kube.list(EVENTS)[0]}
    config = KubeBenchConfig(
        WORKLOADS["SchedulingBasic"],
        nodes=4,
        init_pods=0,
        pods=12,
        bind_only=True,
        bind_events=with_events,
        timeout_s=60,
    )
    report = run_kube_bench(kube, config)
    assert report["outcome"] == "complete" and report["bound"] == 12
    assert report["scheduler"] == ("bind-event-only" if with_events else "bind-only")
    # The API server's own count of the measured phase's writes: each pod created and
    # bound, and with events its Scheduled event.
    writes = report["api_writes"]["by_request"]
    assert writes["POST pods"] == 12 and writes["POST pods/binding"] == 12
    assert writes.get("POST events", 0) == (12 if with_events else 0)
    events = [
        e
        for e in kube.list(EVENTS)[0]
        if e["metadata"]["uid"] not in before and e.get("reason") == "Scheduled"
    ]
    assert len(events) == (12 if with_events else 0)
    if with_events:
        assert all(e["note"].startswith("Successfully assigned ") for e in events)


def test_api_writes_need_the_right_to_read_metrics(kube: KubeClient, apiserver: TestEnv) -> None:
    """An admin reads the API server's request counts; a user without that right gets
    None (the bench then reports no ``api_writes``), not a failed run."""
    counts = api_writes(kube)
    assert counts is not None and counts  # the test API server has served writes already
    limited = KubeClient(load(str(apiserver.limited_kubeconfig)))
    try:
        assert api_writes(limited) is None
    finally:
        limited.close()
