"""The worker's CPU by phase of a turn (workers/phases.py): laps of a clock charged to
phases, published as ``distsched_worker_phase_cpu_seconds_total``; in a real turn on real
Redis, every phase the turn went through is charged and nothing outside a turn is."""

from __future__ import annotations

import redis

from distsched import metrics
from distsched.clock import FakeClock
from distsched.keys import Keys
from distsched.workers import phases as ph
from distsched.workers.phases import PhaseClock
from tests.support.objects import node, pod
from tests.workers.harness import InProcessCluster

METRIC = "distsched_worker_phase_cpu_seconds_total"


def charged() -> dict[str, float]:
    return {p: metrics.REGISTRY.get_sample_value(METRIC, {"phase": p}) or 0.0 for p in ph.PHASES}


def delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {p: after[p] - before[p] for p in ph.PHASES if after[p] != before[p]}


def test_laps_are_charged_to_their_phase_and_published_once() -> None:
    now = [10.0]
    clock = PhaseClock(lambda: now[0])
    before = charged()
    clock.lap(ph.DECIDE)  # not started: nothing to charge
    clock.start()
    now[0] += 0.5
    clock.lap(ph.FOLLOW)
    now[0] += 0.25
    clock.lap(ph.DECIDE)
    now[0] += 0.125
    clock.lap(ph.FOLLOW)
    assert clock.spent[ph.FOLLOW] == 0.625 and clock.spent[ph.DECIDE] == 0.25
    clock.publish()
    now[0] += 1.0
    clock.lap(ph.DECIDE)  # published: counting stopped until the next start
    clock.publish()
    assert delta(before, charged()) == {ph.FOLLOW: 0.625, ph.DECIDE: 0.25}
    assert set(clock.spent.values()) == {0.0}


def test_a_turn_charges_the_phases_it_went_through(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(*(node(f"n{i}", cpu="4") for i in range(4)))
    cluster.create(*(pod(f"p{i}", cpu="100m") for i in range(40)))
    cluster.handle_events()
    popped = cluster.pop()
    before = charged()
    cluster.schedule(popped)  # outside a turn: not charged
    assert delta(before, charged()) == {}
    cluster.create(*(pod(f"q{i}", cpu="100m") for i in range(100)))
    before = charged()
    assert cluster.turn() > 0
    spent = delta(before, charged())
    assert {ph.FOLLOW, ph.POP, ph.PREPARE, ph.DECIDE, ph.RESERVE, ph.BIND} <= set(spent)
    assert all(seconds > 0 for seconds in spent.values())
    assert set(spent) <= set(ph.PHASES)
