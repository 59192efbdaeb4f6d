"""WaitOnPermit across processes: verdicts on a Redis list per waiting pod."""

from __future__ import annotations

import dataclasses
import threading

import redis

from distsched.binder.cycle import Binder
from distsched.cache.ledger import Ledger
from distsched.clock import FakeClock, SystemClock
from distsched.framework import permit
from distsched.keys import Keys
from distsched.queue_redis import RedisQueue
from distsched.store import Store
from tests.binder.helpers import TTL, reserved


def waiting(binding, plugins, deadline_ms):  # type: ignore[no-untyped-def]
    return dataclasses.replace(
        binding, permit_plugins=tuple(plugins), permit_deadline_ms=deadline_ms
    )


def test_a_waiting_pod_binds_once_every_plugin_allowed_it(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    first, second = reserved(r, keys, clock, 2)
    far = clock.now_ms() + 60_000
    held = waiting(first, ["Gang", "Quota"], far)
    binder = Binder(r, keys, clock=clock, ledger_config=TTL)

    def allow_later() -> None:
        permit.allow(r, keys, held.pod_key, "Gang")
        permit.allow(r, keys, held.pod_key, "Quota")

    threading.Timer(0.2, allow_later).start()
    outcome = binder.bind([held, second])
    assert sorted(outcome.bound) == sorted([held.pod_key, second.pod_key])
    assert r.exists(keys.permit(held.pod_key)) == 0


def test_a_rejected_or_timed_out_waiting_pod_is_unreserved_and_requeued(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    rejected, timed_out, plain = reserved(r, keys, clock, 3)
    binder = Binder(r, keys, clock=clock, ledger_config=TTL)
    permit.reject(r, keys, rejected.pod_key, "Gang", "group incomplete")
    outcome = binder.bind(
        [
            waiting(rejected, ["Gang"], clock.now_ms() + 60_000),
            waiting(timed_out, ["Gang"], clock.now_ms() - 1),
            plain,
        ]
    )
    assert outcome.bound == [plain.pod_key]
    assert "group incomplete" in outcome.failed[rejected.pod_key]
    assert "timeout" in outcome.failed[timed_out.pod_key]
    store, ledger, queue = Store(r, keys, clock=clock), Ledger(r, keys, clock), RedisQueue(r, keys)
    for b in (rejected, timed_out):
        assert store.get("Pod", b.pod_key)["spec"].get("nodeName", "") == ""
        assert ledger.pod(b.pod_key) is None
        assert queue.where(b.pod_key) == "backoff"
    assert ledger.check_consistency() == []


def test_wait_on_permit_times_out_on_a_real_clock(r: redis.Redis, keys: Keys) -> None:
    clock = SystemClock()
    deadline = clock.now_ms() + 300
    result = permit.wait_on_permit(r, keys, {"ns/p": (["Slow"], deadline)}, clock)
    assert not result["ns/p"].is_success()
    assert clock.now_ms() >= deadline


def test_a_waiting_pod_deleted_meanwhile_is_rejected_and_leaves_no_verdict_list(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    (held,) = reserved(r, keys, clock, 1)
    binder = Binder(r, keys, clock=clock, ledger_config=TTL)
    store, ledger = Store(r, keys, clock=clock), Ledger(r, keys, clock)

    def delete_while_waiting() -> None:
        # What the delete and its handler do: the store's delete, the ledger's release.
        store.delete("Pod", held.pod_key)
        ledger.pod_deleted(held.pod_key)

    threading.Timer(0.2, delete_while_waiting).start()
    outcome = binder.bind([waiting(held, ["Gang"], clock.now_ms() + 60_000)])
    assert outcome.bound == []
    assert permit.LOST_RESERVATION in outcome.failed[held.pod_key]
    assert r.exists(keys.permit(held.pod_key)) == 0
    assert ledger.check_consistency() == []


def test_deleting_a_pod_deletes_its_verdicts_and_explain_record(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    (held,) = reserved(r, keys, clock, 1)
    permit.allow(r, keys, held.pod_key, "Gang")
    r.hset(keys.explain, held.pod_key, "{}")
    Store(r, keys, clock=clock).delete("Pod", held.pod_key)
    assert r.exists(keys.permit(held.pod_key)) == 0
    assert r.hexists(keys.explain, held.pod_key) == 0
