"""When the measured phase takes its exact count of bound pods (ExactSchedule), on a fake
clock: the count is what costs Redis, the estimate is free."""

from __future__ import annotations

from distsched.bench.phase import PROGRESS_INTERVAL_S, ExactSchedule

GOAL = 1000


def ticks(schedule: ExactSchedule, estimates: list[int], *, start: float = 0.0) -> list[float]:
    """Feed one estimate per progress tick; the times at which a count was due (and taken)."""
    counted = []
    for i, estimate in enumerate(estimates):
        now = start + (i + 1) * PROGRESS_INTERVAL_S
        if schedule.due(now, estimate, GOAL):
            schedule.counted(now)
            counted.append(now)
    return counted


def test_patient_schedule_waits_while_the_estimate_climbs() -> None:
    schedule = ExactSchedule(2.0, 0.0, patient=True)
    # 20 ticks (5 s) of steady progress: the fixed interval would have counted twice.
    assert ticks(schedule, [40 * i for i in range(1, 21)]) == []


def test_patient_schedule_counts_when_the_estimate_reaches_the_goal() -> None:
    schedule = ExactSchedule(2.0, 0.0, patient=True)
    assert ticks(schedule, [500, 900, GOAL]) == [3 * PROGRESS_INTERVAL_S]


def test_patient_schedule_counts_an_estimate_that_stands_still() -> None:
    schedule = ExactSchedule(2.0, 0.0, patient=True)
    # climbs for 1 s, then stuck below the goal: counted 2 s after its last move, then
    # every 2 s (the phase's stall detection runs on those counts)
    counted = ticks(schedule, [100, 200, 300, 400] + [400] * 20)
    assert counted == [3.0, 5.0]


def test_patient_schedule_has_a_backstop() -> None:
    schedule = ExactSchedule(2.0, 0.0, patient=True)
    # an estimate that never stops moving is still checked, BACKSTOP intervals apart
    counted = ticks(schedule, [i for i in range(1, 61)])
    assert counted == [10.0]


def test_fixed_schedule_counts_every_interval() -> None:
    schedule = ExactSchedule(2.0, 0.0, patient=False)
    assert ticks(schedule, [40 * i for i in range(1, 21)]) == [0.25, 2.25, 4.25]


def test_every_tick_schedule_counts_at_every_tick() -> None:
    schedule = ExactSchedule(PROGRESS_INTERVAL_S, 0.0, patient=False)
    assert len(ticks(schedule, [10 * i for i in range(1, 9)])) == 8
