"""Issue 23, item 2: with even_placement a worker whose view lags another worker's
reservations does not pile pods onto the node that looked emptiest; the workers' shares
of the nodes, with a slack for that lag, keep such collisions rare (in process: real
Redis, fake clock, two or four workers)."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from typing import Any

import redis

from distsched.cache.ledger_types import Decision, ReserveResult
from distsched.clock import FakeClock
from distsched.keys import Keys
from distsched.workers.schedule_one import MIN_SHARE_POP, SchedulingWorker
from tests.support.objects import node, pod
from tests.support.readers import bound_nodes
from tests.workers.harness import InProcessCluster


def race(r: redis.Redis, keys: Keys, clock: FakeClock, *, even: bool) -> tuple[str, str, int]:
    """n1 is roomier, so both workers' views prefer it; the second decides on a view
    that does not have the first one's pod yet."""
    cluster = InProcessCluster(r, keys, clock)
    second = cluster.add_worker()
    for worker in cluster.workers:
        worker.config.even_placement = even
    cluster.create(node("n1", cpu="16", pods="10"), node("n2", cpu="8", pods="10"))
    return _race_on(cluster, second, r, keys, clock)


def _race_on(
    cluster: InProcessCluster,
    second: SchedulingWorker,
    r: redis.Redis,
    keys: Keys,
    clock: FakeClock,
) -> tuple[str, str, int]:
    for worker in cluster.workers:  # both live consumers: even placement applies
        worker.run_once()
    for worker in cluster.workers:
        worker._share_due = 0.0
        worker.run_once()
    cluster.handle_events()
    while second.informer.poll_once(0):
        pass
    second.view.refresh_from_ledger()
    cluster.create(pod("a", cpu="1"), pod("b", cpu="1"))
    cluster.handle_events()
    first_pop = cluster.pop(1)
    second_pop = second.queue.pop(1, now_ms=clock.now_ms())
    second._set_tie_slack(len(second_pop))  # as run_once does: the first's pod undecided
    cluster.schedule(first_pop)
    second.schedule_one_batch(second_pop)  # its view: n1 still empty
    cluster.bind()
    bound = bound_nodes(r, keys)
    return bound["default/a"], bound["default/b"], second.conflicts


def test_without_it_the_lagging_worker_picks_the_same_node(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    assert race(r, keys, clock, even=False) == ("n1", "n1", 0)


def test_with_it_the_ledger_refuses_and_the_pod_is_decided_again(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    a, b, conflicts = race(r, keys, clock, even=True)
    assert conflicts == 1  # "node usage changed": decided again on the refreshed view
    assert (a, b) == ("n1", "n2")


def _seen_pods_sent(
    r: redis.Redis, keys: Keys, clock: FakeClock, *, nodes: int, batch: int
) -> list[int]:
    """The race on ``nodes`` equal nodes with the shares of the nodes on and pops of
    ``batch``: the node pod counts the second worker's decisions carried (-1: none, the
    ledger does not check)."""
    cluster = InProcessCluster(r, keys, clock)
    second = cluster.add_worker()
    for worker in cluster.workers:
        worker.config.share_ties = True
        worker.config.batch = batch
    cluster.create(*(node(f"n{i}", cpu="8", pods="10") for i in range(1, nodes + 1)))
    sent: list[int] = []
    reserve = second.ledger.reserve_batch

    def noting(decisions: Sequence[Decision], **kwargs: Any) -> list[ReserveResult]:
        sent.extend(d.seen_pods for d in decisions)
        return reserve(decisions, **kwargs)

    second.ledger.reserve_batch = noting  # type: ignore[method-assign]
    _race_on(cluster, second, r, keys, clock)
    return sent


def test_even_placement_checks_only_where_the_lag_can_move_a_level(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    """The first worker's one undecided pod over the nodes of its share: n1 and n2 both
    hash to its share, half a pod per node: checked. Of n1..n6, n1..n3 hash to its share
    (n4..n6 to the second's), a third of a pod per node, and each share holds a pop: the
    decision carries no pod count (the bench's large clusters: no refusals, no cost).
    The same 6 nodes with pops bigger than a share (at least MIN_SHARE_POP nodes): one
    pop could move a node's level by more than a pod, checked again."""
    assert min(_seen_pods_sent(r, keys, clock, nodes=2, batch=16)) >= 0
    r.flushdb()
    assert _seen_pods_sent(r, keys, clock, nodes=6, batch=16) == [-1]
    r.flushdb()
    assert min(_seen_pods_sent(r, keys, clock, nodes=6, batch=MIN_SHARE_POP + 1)) >= 0


def test_workers_split_the_nodes_they_prefer_among_ties(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    """Every live worker prefers a share of the nodes (by name hash): the shares of two
    workers are disjoint and cover every node."""
    cluster = InProcessCluster(r, keys, clock)
    second = cluster.add_worker()
    cluster.create(*(node(f"n{i}") for i in range(40)))
    for worker in cluster.workers:
        worker.config.share_ties = True
        worker.run_once()  # informer, handlers (so each is a live consumer), share
    for worker in cluster.workers:
        worker._share_due = 0.0
        worker.run_once()
    shares = []
    for worker in cluster.workers:
        mask = worker.snapshot.tie_preference
        assert mask is not None
        slots = [int(s) for s in worker.snapshot.node_indices()]
        shares.append({worker.snapshot.node_name(s) for s in slots if s < mask.size and mask[s]})
    assert shares[0].isdisjoint(shares[1])
    assert shares[0] | shares[1] == {f"n{i}" for i in range(40)}
    assert 5 < len(shares[0]) < 35
    assert second.conflicts == 0


def lockstep_placement(
    r: redis.Redis,
    keys: Keys,
    clock: FakeClock,
    *,
    slack: bool,
    even: bool = False,
    first_pops_one_in: int = 1,
    slack_to_the_end: bool = False,
) -> tuple[int, int, float]:
    """Four workers, 200 equal nodes, 840 pods; every round all workers sync, then all
    pop and decide on those views, so each decides without the others' batches of the
    round (the lag the slack is for). ``first_pops_one_in``: the first worker pops that
    much less than the others (a slower worker). ``slack_to_the_end``: the slack kept
    while fewer pods than nodes are queued. Returns min, max and stddev of pods per
    node."""
    cluster = InProcessCluster(r, keys, clock, batch=256, seed=0)  # ties: seeded
    for _ in range(3):
        cluster.add_worker()
    for worker in cluster.workers:
        worker.config.share_ties = True
        worker.config.even_placement = even  # without: the shares and their slack alone
    cluster.create(*(node(f"n{i:03d}", cpu="4", memory="32Gi") for i in range(200)))
    for worker in cluster.workers:
        worker.run_once()
    for worker in cluster.workers:
        worker._share_due = 0.0
        worker.run_once()
    for i in range(840):
        cluster.store.create(pod(f"p{i:03d}", cpu="100m", memory="500Mi"))
    while True:
        for worker in cluster.workers:
            while worker.informer.poll_once(0):
                pass
            worker.view.refresh_from_ledger()
            while worker.consumer.poll(None):
                pass
        sizes = [w._share_size for w in cluster.workers]
        sizes[0] //= first_pops_one_in
        pops = [
            w.queue.pop(n, now_ms=clock.now_ms())
            for w, n in zip(cluster.workers, sizes, strict=True)
        ]
        if not any(pops):
            break
        for worker, popped in zip(cluster.workers, pops, strict=True):
            worker._set_tie_slack(len(popped))  # as run_once does, right after its pop
            if not slack:
                worker.snapshot.tie_slack_pods = 0
            elif slack_to_the_end and worker._lag_per_node > 0:
                worker.snapshot.tie_slack_pods = 1
        for worker, popped in zip(cluster.workers, pops, strict=True):
            worker.schedule_one_batch(popped)
        cluster.bind()
    per_node = Counter(bound_nodes(r, keys).values())
    counts = [per_node.get(f"n{i:03d}", 0) for i in range(200)]
    return min(counts), max(counts), statistics.pstdev(counts)


def test_lagging_workers_stay_in_their_share_within_a_slack(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    """Without the slack a worker leaves its share as soon as its own nodes look one pod
    fuller than the others' (whose pods of the round it cannot see yet), and piles pods
    on them (3..6 per node, stddev 0.58-0.72 over seeds 0-7); with it, the issue's target
    (max - min <= 2, stddev <= 0.45; 4..5 or 4..6, 0.40-0.41 over those seeds)."""
    low, high, spread = lockstep_placement(r, keys, clock, slack=True)
    assert high - low <= 2 and spread <= 0.45
    r.flushdb()
    low, high, spread = lockstep_placement(r, keys, clock, slack=False)
    assert high - low >= 3 and spread > 0.55


def test_the_last_level_of_pods_goes_where_the_cluster_is_emptiest(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    """A worker that decides half as fast leaves its share a level behind the others'
    (they fill theirs within the slack). Kept to the end, the slack leaves that gap in
    the result (3..5, stddev 0.52-0.55 over seeds 0-3), as 4 workers on 2 cores did in
    about one bench run in five; dropped once fewer pods than nodes are queued (where
    the ledger refuses collisions), the last level goes to the emptiest nodes, and every
    seed ends 4..5, stddev 0.40."""
    low, high, spread = lockstep_placement(
        r, keys, clock, slack=True, even=True, first_pops_one_in=2
    )
    assert (low, high) == (4, 5) and spread <= 0.45
    r.flushdb()
    low, high, spread = lockstep_placement(
        r, keys, clock, slack=True, even=True, first_pops_one_in=2, slack_to_the_end=True
    )
    assert low == 3 and spread > 0.5
