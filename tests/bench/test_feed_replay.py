"""bench/feed_replay: a worker's view re-reads the ledger's change feed a run left."""

from __future__ import annotations

import pytest
import redis

from distsched.bench.feed_replay import replay
from distsched.clock import FakeClock
from distsched.keys import Keys
from distsched.store import Store
from tests.cache.ledger_helpers import SMALL, make_ledger
from tests.store.helpers import make_node


def test_replay_reads_the_feeds_last_versions(r: redis.Redis, keys: Keys, clock: FakeClock) -> None:
    Store(r, keys, clock=clock).create_many([make_node(f"n{i}") for i in range(3)])
    ledger = make_ledger(r, keys, clock)
    for i in range(3):
        ledger.set_node(f"n{i}", SMALL)  # a feed version each, one node record in it
    results = replay(r, keys, [1, 3], repeat=2)
    assert [(back, records) for back, records, _ in results] == [(1, 1), (3, 3)]
    assert all(cpu_s >= 0 for _, _, cpu_s in results)
    with pytest.raises(ValueError, match="the feed has 3 versions"):
        replay(r, keys, [4], repeat=1)
