"""Random operation sequences on both queues: the Redis queue must match the memory oracle.

After every step the two queues must hold the same pods in the same places with the same
scores, info records and counters, and every pod must be in exactly one place. Each rule
also compares what the two queues returned.
"""

from __future__ import annotations

import redis
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from distsched.clock import FakeClock
from distsched.keys import Keys
from distsched.queue_memory import MemoryQueue
from distsched.queue_redis import RedisQueue
from distsched.queue_types import PodEntry, QueueConfig, queue_invariant_violations

POOL = [f"ns/p{i}" for i in range(6)]
PRIORITIES = [-2147483648, -1, 0, 1, 2147483647]
PLUGINS = ["NodeAffinity", "NodePorts", "TaintToleration"]
# Steps straddle the interesting boundaries: backoff 1-10 s, leftover 1 s, lease 4 s.
STEPS_MS = [1, 499, 1_000, 4_000, 10_000, 300_000]
# Short leases and few deliveries, so that dead letters happen within a short run; a
# leftover timeout equal to the first backoff, so that the two boundaries meet.
CONFIG = QueueConfig(lease_ms=4_000, max_deliveries=1, unschedulable_max_ms=1_000)

keys_ = st.sampled_from(POOL)
entries_ = st.builds(
    PodEntry,
    key=keys_,
    uid=st.sampled_from(["uid-1", "uid-2"]),
    priority=st.sampled_from(PRIORITIES),
    gated=st.integers(0, 3).map(lambda i: i == 0),
)
plugin_sets = st.frozensets(st.sampled_from(PLUGINS))


class QueueMachine(RuleBasedStateMachine):
    def __init__(self, client: redis.Redis) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.memory = MemoryQueue(config=CONFIG)
        self.redis = RedisQueue(client, Keys("stateful"), config=CONFIG)
        self.redis.clear()

    def now(self) -> int:
        return self.clock.now_ms()

    def epoch_of(self, key: str, stale: bool) -> int:
        info = self.memory.info(key)
        epoch = info["e"] if info is not None else 1
        return epoch - 1 if stale else epoch

    @rule(entries=st.lists(entries_, max_size=4))
    def add(self, entries: list[PodEntry]) -> None:
        assert self.memory.add(entries, now_ms=self.now()) == self.redis.add(
            entries, now_ms=self.now()
        )

    @rule(entry=entries_)
    def update(self, entry: PodEntry) -> None:
        assert self.memory.update(entry, now_ms=self.now()) == self.redis.update(
            entry, now_ms=self.now()
        )

    @rule(keys=st.lists(keys_, max_size=3))
    def delete(self, keys: list[str]) -> None:
        assert self.memory.delete(keys) == self.redis.delete(keys)

    @rule(max_pods=st.integers(1, 4))
    def pop(self, max_pods: int) -> None:
        assert self.memory.pop(max_pods, now_ms=self.now()) == self.redis.pop(
            max_pods, now_ms=self.now()
        )

    @rule(
        plugins=plugin_sets,
        outcome=st.sampled_from(["done", "assumed", "unschedulable", "error"]),
    )
    def schedule_one(self, plugins: frozenset[str], outcome: str) -> None:
        """A worker's whole cycle: pop one pod, then reserve it or report its failure."""
        popped = self.memory.pop(1, now_ms=self.now())
        assert popped == self.redis.pop(1, now_ms=self.now())
        if not popped:
            return
        pod = popped[0]
        if outcome == "done":
            assert self.memory.done(pod.key, epoch=pod.epoch)
            assert self.redis.done(pod.key, epoch=pod.epoch)
        elif outcome == "assumed":
            lease = [(pod.key, pod.epoch, pod.uid)]
            assert self.memory.assume(lease) == self.redis.assume(lease) == [True]
        else:
            self.fail(key=pod.key, stale=False, plugins=plugins, error=outcome == "error")

    @precondition(lambda self: self.memory.counts()["inflight"] > 0)
    @rule(data=st.data(), stale=st.booleans())
    def done(self, data: st.DataObject, stale: bool) -> None:
        key = data.draw(st.sampled_from(self.memory.heads(len(POOL))["inflight"]))
        epoch = self.epoch_of(key, stale)
        assert self.memory.done(key, epoch=epoch) == self.redis.done(key, epoch=epoch)

    def leased(self) -> list[str]:
        """Pods a worker holds: popped and not back in a sub-queue."""
        state = self.memory.dump()
        return [key for key, info in state.infos.items() if info["w"] in ("inflight", "")]

    @precondition(lambda self: self.leased())
    @rule(data=st.data(), plugins=plugin_sets, error=st.booleans())
    def fail_leased(self, data: st.DataObject, plugins: frozenset[str], error: bool) -> None:
        key = data.draw(st.sampled_from(sorted(self.leased())))
        self.fail(key=key, stale=False, plugins=plugins, error=error)

    @rule(key=keys_, stale=st.booleans(), plugins=plugin_sets, error=st.booleans())
    def fail(self, key: str, stale: bool, plugins: frozenset[str], error: bool) -> None:
        epoch = self.epoch_of(key, stale)
        results = [
            queue.add_unschedulable_if_not_present(
                key, epoch=epoch, plugins=plugins, now_ms=self.now(), error=error
            )
            for queue in (self.memory, self.redis)
        ]
        assert results[0] == results[1]

    @rule()
    def flush_backoff(self) -> None:
        assert self.memory.flush_backoff_completed(
            now_ms=self.now()
        ) == self.redis.flush_backoff_completed(now_ms=self.now())

    @rule()
    def flush_leftover(self) -> None:
        assert self.memory.flush_unschedulable_leftover(
            now_ms=self.now()
        ) == self.redis.flush_unschedulable_leftover(now_ms=self.now())

    @rule(
        interested=st.none() | plugin_sets,
        keys=st.none() | st.lists(keys_, max_size=4),
    )
    def move_all(self, interested: frozenset[str] | None, keys: list[str] | None) -> None:
        results = [
            queue.move_all_to_active_or_backoff(
                "Event", now_ms=self.now(), interested_plugins=interested, keys=keys
            )
            for queue in (self.memory, self.redis)
        ]
        assert results[0] == results[1]

    @rule()
    def reclaim(self) -> None:
        assert self.memory.reclaim_expired_leases(
            now_ms=self.now()
        ) == self.redis.reclaim_expired_leases(now_ms=self.now())

    @rule()
    def workers_crash(self) -> None:
        """Every lease runs out: the reaper requeues all inflight pods."""
        self.clock.step(CONFIG.lease_ms)
        self.reclaim()

    @rule(data=st.data(), stale=st.booleans(), other_uid=st.booleans())
    def assume(self, data: st.DataObject, stale: bool, other_uid: bool) -> None:
        key = data.draw(keys_)
        info = self.memory.info(key)
        uid = "uid-x" if other_uid or info is None else info["uid"]
        lease = [(key, self.epoch_of(key, stale), uid)]
        assert self.memory.assume(lease) == self.redis.assume(lease)

    @rule(keys=st.lists(keys_, max_size=3))
    def requeue_released(self, keys: list[str]) -> None:
        """The reaper released assumed pods (their binder died)."""
        assert self.memory.requeue_released(keys, now_ms=self.now()) == self.redis.requeue_released(
            keys, now_ms=self.now()
        )

    @rule(keys=st.lists(keys_, max_size=3), stale=st.booleans())
    def hand_back(self, keys: list[str], stale: bool) -> None:
        """A worker gives back pods it never attempted (maybe long after their pop)."""
        leases = [(key, self.epoch_of(key, stale)) for key in keys]
        assert self.memory.hand_back(leases) == self.redis.hand_back(leases)

    @rule(keys=st.lists(keys_, max_size=3))
    def forget(self, keys: list[str]) -> None:
        assert self.memory.forget(keys) == self.redis.forget(keys)

    @rule(ms=st.sampled_from(STEPS_MS), run_timers=st.booleans())
    def tick(self, ms: int, run_timers: bool) -> None:
        """Time passes, and maybe the periodic work runs right then, as its timers would."""
        self.clock.step(ms)
        if run_timers:
            self.flush_backoff()
            self.flush_leftover()
            self.reclaim()

    @invariant()
    def same_state_and_every_pod_in_one_place(self) -> None:
        expected, actual = self.memory.dump(), self.redis.dump()
        assert actual == expected
        assert queue_invariant_violations(actual) == []
        assert self.redis.counts() == self.memory.counts()
        assert self.redis.heads(3) == self.memory.heads(3)
        assert self.redis.unschedulable_pods() == self.memory.unschedulable_pods()


def test_redis_queue_matches_the_memory_oracle(r: redis.Redis) -> None:
    run_state_machine_as_test(
        lambda: QueueMachine(r),
        settings=settings(max_examples=500, stateful_step_count=30, deadline=None, database=None),
    )
