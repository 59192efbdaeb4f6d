"""rq as the binder pool runs it: msgpack only, allow-listed functions only, no fork.

Each test runs an rq SimpleWorker in this process (burst mode) on a private server.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import sys
import uuid
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest
import redis
from rq import Queue, SimpleWorker
from rq.job import Job
from rq.registry import FailedJobRegistry

from distsched import metrics
from distsched.bench.binder_pool import (
    bind_events,
    create_cluster,
    node_manifest,
    pod_manifest,
    reserve_round_robin,
)
from distsched.binder.cycle import JOB_FUNCTIONS
from distsched.binder.jobs import (
    FAILURE_TTL_S,
    RESULT_TTL_S,
    bind_queue,
    enqueue_bindings,
    queue_name,
)
from distsched.binder.safety import AllowListJob, MsgpackSerializer, allow_list_job_class
from distsched.cache.ledger import Ledger
from distsched.clock import SYSTEM_CLOCK
from distsched.keys import Keys

KEYS = Keys("safety")
CANARY = "tests.binder.canary"
ran_in: list[int] = []


def record(tag: str) -> str:
    ran_in.append(os.getpid())
    return tag


TEST_JOB = allow_list_job_class({"test.record": record})


class OpenOnLoad:
    """A pickle that creates a file when unpickled: what an attacker would store."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[str, str]]:
        return (open, (str(self.path), "w"))


@pytest.fixture
def queue(private_client: redis.Redis) -> Queue:
    return bind_queue(private_client, KEYS, job_class=TEST_JOB)


def work(client: redis.Redis, job_class: type[Job] = TEST_JOB) -> None:
    queue = Queue(
        queue_name(KEYS), connection=client, serializer=MsgpackSerializer, job_class=job_class
    )
    worker = SimpleWorker(
        [queue], connection=client, serializer=MsgpackSerializer, job_class=job_class
    )
    assert worker.work(burst=True, with_scheduler=False)


def craft(client: redis.Redis, data: bytes, **fields: str) -> str:
    """Write an rq job hash by hand (as anyone with Redis access could) and enqueue it."""
    job_id = uuid.uuid4().hex
    job_hash: dict[str, str | bytes] = {
        "data": data,
        "origin": queue_name(KEYS),
        "status": "queued",
        "created_at": "2026-01-01T00:00:00.000000Z",
        "enqueued_at": "2026-01-01T00:00:00.000000Z",
        "description": "crafted",
        "timeout": "60",
        **fields,
    }
    client.hset(f"rq:job:{job_id}", mapping=job_hash)  # type: ignore[arg-type]
    client.rpush(f"rq:queue:{queue_name(KEYS)}", job_id)
    client.sadd("rq:queues", f"rq:queue:{queue_name(KEYS)}")
    return job_id


def failure_of(client: redis.Redis, job_id: str) -> str:
    assert job_id in FailedJobRegistry(queue_name(KEYS), connection=client).get_job_ids()
    job = AllowListJob.fetch(job_id, connection=client, serializer=MsgpackSerializer)
    result = job.latest_result()
    assert result is not None and result.exc_string
    return result.exc_string


@pytest.fixture
def no_canary() -> Iterator[None]:
    sys.modules.pop(CANARY, None)
    yield
    sys.modules.pop(CANARY, None)


def test_allowed_jobs_run_in_the_worker_process_and_keep_no_result(
    private_client: redis.Redis, queue: Queue
) -> None:
    ran_in.clear()
    job = queue.enqueue("test.record", "x", result_ttl=RESULT_TTL_S, failure_ttl=FAILURE_TTL_S)
    work(private_client)
    assert ran_in == [os.getpid()]  # SimpleWorker: no fork per job
    assert not private_client.exists(job.key)  # result_ttl 0: nothing kept


def test_a_pickle_payload_is_rejected_without_running(
    private_client: redis.Redis, queue: Queue, tmp_path: Path
) -> None:
    control = tmp_path / "control"
    pickle.loads(pickle.dumps(OpenOnLoad(control)))
    assert control.exists()  # the payload is live: unpickling it runs code
    targets = [tmp_path / "raw", tmp_path / "compressed"]
    crafted_pickle = pickle.dumps(("test.record", OpenOnLoad(targets[0]), [], {}))
    compressed = zlib.compress(pickle.dumps(("test.record", OpenOnLoad(targets[1]), [], {})))
    ids = [craft(private_client, crafted_pickle), craft(private_client, compressed)]
    ran_in.clear()
    after = queue.enqueue("test.record", "after", failure_ttl=FAILURE_TTL_S)
    work(private_client)
    assert not any(t.exists() for t in targets)
    for job_id in ids:
        assert "DeserializationError" in failure_of(private_client, job_id)
    assert ran_in == [os.getpid()]  # only the legitimate job after them, same worker
    assert after.get_status(refresh=True) == "finished"


def test_a_function_outside_the_allow_list_is_refused_logged_and_never_imported(
    private_client: redis.Redis,
    queue: Queue,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    no_canary: None,
) -> None:
    caplog.set_level(logging.ERROR, logger="distsched.binder.safety")
    touched = tmp_path / "touched"
    canary_file = tmp_path / "canary"
    shell = queue.enqueue("os.system", f"touch {touched}", failure_ttl=FAILURE_TTL_S)
    canary = queue.enqueue(f"{CANARY}.run", str(canary_file), failure_ttl=FAILURE_TTL_S)
    work(private_client)
    assert not touched.exists() and not canary_file.exists()
    assert CANARY not in sys.modules
    for job in (shell, canary):
        assert "RefusedJob" in failure_of(private_client, job.id)
        assert "is not allow-listed" in failure_of(private_client, job.id)
    refused = [r.getMessage() for r in caplog.records if "refused job" in r.getMessage()]
    assert any("'os.system'" in m for m in refused)
    assert any(f"'{CANARY}.run'" in m for m in refused)
    # Control: rq's own job class imports and runs the same job.
    queue.enqueue(f"{CANARY}.run", str(canary_file))
    work(private_client, job_class=Job)
    assert canary_file.exists() and CANARY in sys.modules


def test_callbacks_and_webhooks_are_refused_and_never_imported(
    private_client: redis.Redis, tmp_path: Path, no_canary: None
) -> None:
    ran_in.clear()
    data = MsgpackSerializer.dumps(["test.record", None, ["x"], {}])
    callback = craft(private_client, data, failure_callback_name=f"{CANARY}.run")
    success = craft(private_client, data, success_callback_name=f"{CANARY}.run")
    hook = {"url": "http://127.0.0.1:9/hook", "job_status": "finished", "method": "GET"}
    webhook = craft(private_client, data, webhooks=json.dumps([hook]))
    work(private_client)
    assert ran_in == []
    assert CANARY not in sys.modules
    for job_id in (callback, success, webhook):
        assert "RefusedJob" in failure_of(private_client, job_id)


def test_msgpack_serializer_refuses_ext_types() -> None:
    assert MsgpackSerializer.loads(MsgpackSerializer.dumps(["f", None, [1], {}])) == [
        "f",
        None,
        [1],
        {},
    ]
    with pytest.raises(ValueError, match="ext type"):
        MsgpackSerializer.loads(msgpack.packb(msgpack.ExtType(1, b"x")))


def bound_total(result: str) -> float:
    value = metrics.REGISTRY.get_sample_value("distsched_bindings_total", {"result": result})
    return value or 0.0


def test_bindings_enqueued_twice_bind_once_and_count_as_duplicates(
    private_client: redis.Redis,
) -> None:
    nodes = ["n1", "n2"]
    create_cluster(
        private_client,
        KEYS,
        [node_manifest(n) for n in nodes],
        [pod_manifest(f"p{i}") for i in range(5)],
        SYSTEM_CLOCK,
    )
    bindings = reserve_round_robin(private_client, KEYS, nodes, SYSTEM_CLOCK)
    queue = bind_queue(private_client, KEYS)
    jobs = [enqueue_bindings(queue, KEYS, bindings) for _ in range(2)]
    # the description names the batch without rq's repr of every binding
    job = Job.fetch(jobs[0], connection=private_client, serializer=MsgpackSerializer)
    assert job.description == "distsched.bind_batch('safety', <5 bindings>)"
    bound, duplicate = bound_total("bound"), bound_total("duplicate")
    work(private_client, job_class=allow_list_job_class(JOB_FUNCTIONS))
    # In-process counters moved: the jobs ran here, not in a forked child.
    assert bound_total("bound") - bound == 5
    assert bound_total("duplicate") - duplicate == 5
    assert bind_events(private_client, KEYS) == {b.pod_key: 1 for b in bindings}
    assert not any(private_client.exists(f"rq:job:{j}") for j in jobs)
    ledger = Ledger(private_client, KEYS, SYSTEM_CLOCK)
    assert ledger.assumed_pods() == {} and ledger.check_consistency() == []
