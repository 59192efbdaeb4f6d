"""Queue fixtures: every contract test runs on the in-memory twin and on Redis."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import redis

from distsched.keys import Keys
from distsched.queue_memory import MemoryQueue
from distsched.queue_redis import RedisQueue
from distsched.queue_types import QueueConfig, SchedulingQueue
from tests.queue.invariants import assert_every_pod_in_one_place

QueueFactory = Callable[..., SchedulingQueue]


@pytest.fixture(params=["memory", "redis"])
def make_queue(request: pytest.FixtureRequest) -> Iterator[QueueFactory]:
    """A factory: ``make_queue(config=...)``; each queue's invariants are checked at teardown."""
    made: list[SchedulingQueue] = []
    # Set the Redis fixtures up now, so that they are torn down (flushed) after the checks.
    client: redis.Redis | None = None
    if request.param == "redis":
        client = request.getfixturevalue("r")
    keys: Keys = request.getfixturevalue("keys")

    def make(*, config: QueueConfig | None = None) -> SchedulingQueue:
        queue: SchedulingQueue
        if client is None:
            queue = MemoryQueue(config=config)
        else:
            queue = RedisQueue(client, keys, config=config)
        made.append(queue)
        return queue

    yield make
    for queue in made:
        assert_every_pod_in_one_place(queue)


@pytest.fixture
def queue(make_queue: QueueFactory) -> SchedulingQueue:
    return make_queue()
