"""The bench's gang pieces: the layout of a run's PodGroups, the sampler that catches a
partly held gang during the run, the GangContention verdict and the gang figures."""

from __future__ import annotations

import redis

from distsched.bench.gangs import GangLayout, GangSampler, contention_outcome, gang_figures
from distsched.bench.measure import WorkerCounters
from distsched.bench.workloads import WORKLOADS, Names
from distsched.keys import Keys


def layout(pods: int = 6) -> GangLayout:
    workload, names = WORKLOADS["GangScheduling"], Names()
    return GangLayout.of(
        workload.setup_objects(names, 10, pods), workload.measured_pods(names, 0, pods)
    )


def test_layout_of_upstream_gangs() -> None:
    found = layout(6)
    assert found.minimum == {"gang-0/gang-0": 3, "gang-0/gang-1": 3}
    assert found.members["gang-0/gang-1"] == [
        "gang-0/test-gang-scheduling-3",
        "gang-0/test-gang-scheduling-4",
        "gang-0/test-gang-scheduling-5",
    ]


def test_sampler_reports_a_partly_held_gang_and_drops_whole_ones(
    r: redis.Redis, keys: Keys
) -> None:
    gangs = layout(6)
    whole, partial = gangs.members["gang-0/gang-0"], gangs.members["gang-0/gang-1"]
    r.hset(keys.ledger_pods, mapping={k: "n1 t" for k in [*whole, partial[0]]})
    sampler = GangSampler(r, keys, gangs)
    sampler._open = sorted(gangs.members)
    sampler.sample()
    assert (sampler.samples, sampler.partial_samples) == (1, 1)
    assert sampler.partial_gangs == {"gang-0/gang-1"}
    assert sampler.messages[0].startswith(
        "gang: gang-0/gang-1 had 1 of its minimum 3 members reserved or bound at +"
    )
    assert sampler._open == ["gang-0/gang-1"]  # gang-0 was seen whole: admitted
    r.hdel(keys.ledger_pods, whole[0])  # lost after admission: not sampled any more
    r.hset(keys.ledger_pods, mapping={k: "n1 t" for k in partial})
    sampler.sample()
    assert (sampler.samples, sampler.partial_samples, sampler._open) == (2, 1, [])


def test_contention_outcome() -> None:
    workload, names = WORKLOADS["GangContention"], Names()
    gangs = GangLayout.of(workload.setup_objects(names, 2, 4), workload.measured_pods(names, 0, 4))
    a, b = (gangs.members[f"gang-0/{g}"] for g in ("contention-a", "contention-b"))
    assert contention_outcome(gangs, set(a)) == "one-gang-bound"
    assert contention_outcome(gangs, set()) == "no-gang-bound"
    assert contention_outcome(gangs, {*a, b[0]}) == "partial-gang"


def test_gang_figures_from_metrics_or_bind_times() -> None:
    gangs = layout(6)
    keys = [k for members in gangs.members.values() for k in members]
    created = dict.fromkeys(keys, 10.0)
    bound = {k: 10.5 + i * 0.1 for i, k in enumerate(keys)}
    counters = WorkerCounters(
        0.0, {}, {}, {"scheduled": 2.0}, {"scheduled": 0.01}, {"scheduled": 2.0}
    )
    figures = gang_figures(
        gangs,
        start=10.0,
        bound_at=bound,
        created_at=created,
        placed=set(keys),
        counters=counters,
        sampler=None,
    )
    assert (figures["whole"], figures["partial"], figures["pending"]) == (2, 0, 0)
    assert figures["gangs_per_s"]["overall"] == round(2 / 1.0, 1)  # whole at 10.7 and 11.0
    assert figures["attempts"] == {"scheduled": 2}
    assert figures["attempt_duration"]["average_s"] == 0.005
    assert figures["attempt_duration"]["source"].startswith("metric")
    fallback = gang_figures(
        gangs,
        start=10.0,
        bound_at=bound,
        created_at=created,
        placed=set(keys),
        counters=None,
        sampler=None,
    )["attempt_duration"]
    assert fallback["source"].startswith("bind times")
    assert abs(fallback["average_s"] - (0.7 + 1.0) / 2) < 1e-9
