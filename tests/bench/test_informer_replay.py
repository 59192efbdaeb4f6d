"""bench/informer_replay: a worker's informer replays a stream a run left in Redis."""

from __future__ import annotations

import redis

from distsched.bench.informer_replay import replay
from distsched.clock import FakeClock
from distsched.keys import Keys
from distsched.store import Store
from tests.store.helpers import make_node, make_pod


def test_replay_times_the_entries_past_skip(r: redis.Redis, keys: Keys, clock: FakeClock) -> None:
    store = Store(r, keys, clock=clock)
    store.create_many([make_node("n1"), make_node("n2")])
    store.create_many([make_pod(f"p{i}") for i in range(5)])
    store.bind_many([(f"default/p{i}", None, "n1") for i in range(5)])
    by_type: dict[str, list[float]] = {}
    entries, cpu_s = replay(r, keys, skip=2, by_type=by_type)
    assert entries == 10 and cpu_s >= 0  # five pods created and bound, the nodes untimed
    # Each kind counted apart: the five creations, the five bindings.
    assert {etype: count for etype, (count, _) in by_type.items()} == {"ADDED": 5, "MODIFIED": 5}
    assert all(spent >= 0 for _, spent in by_type.values())
