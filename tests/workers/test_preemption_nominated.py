"""Issue 10, item 1: nominated pods count in Filter and in preemption (in-process worker)."""

from __future__ import annotations

from collections.abc import Sequence

import redis

from distsched.clock import FakeClock
from distsched.keys import Keys
from distsched.model import Pod
from distsched.queue_types import QueueConfig
from distsched.store import Store, StoreError
from distsched.store.writer import StoreWriter
from tests.support.objects import node, pod
from tests.workers.harness import InProcessCluster


def test_a_lower_priority_pod_does_not_take_the_room_a_preemptor_was_nominated_to(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    # Without SchedulerPopFromBackoffQ: urgent waits out its backoff, sneaky comes first.
    cluster = InProcessCluster(r, keys, clock, pop_from_backoff=False)
    cluster.create(node("only", cpu="2"), pod("victim", cpu="2", nodeName="only", priority=1))
    cluster.handle_events()
    cluster.create(pod("urgent", cpu="2", priority=1000))
    cluster.settle()
    # urgent preempted victim and waits (backoff) with its nomination.
    assert cluster.store.get("Pod", "default/victim") is None
    assert cluster.pod("urgent")["status"]["nominatedNodeName"] == "only"
    assert cluster.node_of("urgent") == ""
    # sneaky arrives during urgent's backoff: kube keeps the nominated room for urgent.
    cluster.create(pod("sneaky", cpu="2", priority=0))
    cluster.settle()
    assert cluster.node_of("sneaky") == ""
    assert "NodeResourcesFit" in cluster.explain("sneaky")["plugins"]
    clock.step(1_100)
    cluster.flush()
    cluster.settle()
    assert cluster.node_of("urgent") == "only"
    assert cluster.node_of("sneaky") == ""
    # Nobody was preempted for nothing: sneaky still exists, pending.
    assert cluster.store.get("Pod", "default/sneaky") is not None


def test_a_preemptor_whose_victims_are_gone_is_not_left_waiting_out_its_backoff(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    # kube 1.33+'s SchedulerPopFromBackoffQ: activeQ empty, the preemptor is popped from
    # backoffQ as soon as its victim is gone, with no clock step and no flush.
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(node("only", cpu="2"), pod("victim", cpu="2", nodeName="only", priority=1))
    cluster.handle_events()
    cluster.create(pod("urgent", cpu="2", priority=1000))
    cluster.settle()
    assert cluster.store.get("Pod", "default/victim") is None
    assert cluster.node_of("urgent") == "only"


def test_preemptors_decided_in_one_batch_see_each_others_nominations(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    """kube adds a preemptor to the nominator when its PostFilter nominates a node, not
    when the status update comes back: the next pod of the batch must not take the same
    node and victims, which would leave one of the two with nothing freed."""
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(
        node("n1", cpu="2"),
        node("n2", cpu="2"),
        pod("low-1", cpu="2", nodeName="n1", priority=1),
        # n1's victim is the cheaper one: alone, every preemptor would pick n1.
        pod("low-2", cpu="2", nodeName="n2", priority=2),
    )
    cluster.handle_events()
    cluster.create(pod("urgent-a", cpu="2", priority=1000), pod("urgent-b", cpu="2", priority=1000))
    cluster.handle_events()
    popped = cluster.pop()
    assert sorted(p.key for p in popped) == ["default/urgent-a", "default/urgent-b"]
    cluster.schedule(popped)
    nominated = {
        name: cluster.pod(name)["status"].get("nominatedNodeName")
        for name in ("urgent-a", "urgent-b")
    }
    assert sorted(nominated.values()) == ["n1", "n2"], nominated
    assert cluster.store.get("Pod", "default/low-1") is None
    assert cluster.store.get("Pod", "default/low-2") is None
    clock.step(1_100)
    cluster.flush()
    cluster.settle()
    assert {cluster.node_of("urgent-a"), cluster.node_of("urgent-b")} == {"n1", "n2"}


def test_a_worker_that_sees_the_victims_room_free_knows_the_nomination(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    """Issue 23: with two workers, a preemptor's room went to another pod. Worker B's
    handlers released the victim (the ledger showed the room free) before B's informer
    read the preemptor's nomination, so B's decision did not count it. Now a worker whose
    handlers used a pod's deletion reads the stream that far before deciding, and the
    nomination comes before the deletions in the stream (test_cluster_writes pins that
    order; this test fails without the first half)."""
    cluster = InProcessCluster(r, keys, clock)
    second = cluster.add_worker()
    cluster.create(node("only", cpu="2"), pod("victim", cpu="2", nodeName="only", priority=1))
    cluster.handle_events()
    while second.informer.poll_once(0):
        pass
    cluster.create(pod("urgent", cpu="2", priority=1000))
    cluster.handle_events()
    cluster.schedule(cluster.pop())  # the first worker preempts: nomination, deletion
    assert cluster.pod("urgent")["status"]["nominatedNodeName"] == "only"
    cluster.create(pod("sneaky", cpu="2", priority=0))
    # The second worker's loop up to its pop, its informer not polled in between: its
    # handlers take the deletion (and sneaky's arrival) from the queue's stream.
    while second.consumer.poll(None):
        pass
    second._informer_past_handled_events()
    second.view.refresh_from_ledger()
    popped = second.queue.pop(10, now_ms=clock.now_ms())
    # urgent comes along from backoffQ (SchedulerPopFromBackoffQ), after sneaky.
    assert [p.key for p in popped] == ["default/sneaky", "default/urgent"]
    second.schedule_one_batch(popped)
    cluster.bind()
    assert cluster.node_of("sneaky") == ""
    assert cluster.node_of("urgent") == "only"


class SlowDeletes(StoreWriter):
    """The store's writer, but each victim's deletion is only "under way" (as against an
    API server) until the test lets it finish: then the deletion reaches the store."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.waiting: list[tuple[Pod, Pod, str]] = []

    def preempt_all(
        self, victims: Sequence[Pod], *, preemptor: Pod, node: str
    ) -> list[StoreError | None]:
        self.waiting += [(victim, preemptor, node) for victim in victims]
        return [None] * len(victims)

    def deleting(self, pod_keys: Sequence[str]) -> bool:
        return any(victim.key in pod_keys for victim, _, _ in self.waiting)

    def finish(self) -> None:
        for victim, preemptor, on in self.waiting:
            super().preempt_all([victim], preemptor=preemptor, node=on)
        self.waiting = []


def test_a_preemptor_stays_leased_while_its_victims_deletions_are_under_way(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    """Issue 23: through an API server, a preemptor tried again before its victims were
    gone found its node still full and preempted elsewhere (kube holds it in
    DefaultPreemption's PreEnqueue meanwhile). The worker keeps it leased until the
    writer's deletions are done, then hands it back with its failure; at half its lease
    at the latest."""
    writer = SlowDeletes(Store(r, keys, clock=clock))
    cluster = InProcessCluster(r, keys, clock, writer=writer)
    cluster.create(node("n1", cpu="2"), node("n2", cpu="2"))
    cluster.create(pod("v1", cpu="2", nodeName="n1", priority=1))
    cluster.create(pod("v2", cpu="2", nodeName="n2", priority=1))
    cluster.handle_events()
    cluster.create(pod("urgent", cpu="2", priority=1000))
    cluster.handle_events()
    cluster.schedule(cluster.pop())
    assert cluster.pod("urgent")["status"]["nominatedNodeName"] in ("n1", "n2")
    assert [v.key for v, _, _ in writer.waiting] in (["default/v1"], ["default/v2"])
    # Held: still leased to the worker, not back in any queue, however long it waits
    # short of half its lease, and nothing else preempted.
    for _ in range(3):
        clock.step(1_000)
        cluster.turn()
        assert cluster.where("urgent") == "inflight"
    assert len(writer.waiting) == 1
    writer.finish()  # the deletion answered: in the store, not yet released in the ledger
    cluster.turn()  # still held at the turn's start; its handlers release the victim
    assert cluster.where("urgent") == "inflight"
    cluster.turn()  # handed back: the deletion during its attempt was a move request
    # ... to backoffQ, and popped from there in the same turn (activeQ is empty) and
    # reserved on its nominated node.
    assert cluster.where("urgent") == "assumed"
    clock.step(2_000)
    cluster.flush()
    cluster.settle()
    assert cluster.node_of("urgent") == cluster.pod("urgent")["status"]["nominatedNodeName"]
    assert (
        cluster.store.get("Pod", "default/v1") is None
        or cluster.store.get("Pod", "default/v2") is None
    )
    assert (
        cluster.store.get("Pod", "default/v1") is not None
        or cluster.store.get("Pod", "default/v2") is not None
    )  # one victim only


def test_a_held_preemptor_goes_back_at_half_its_lease(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    writer = SlowDeletes(Store(r, keys, clock=clock))
    cluster = InProcessCluster(r, keys, clock, writer=writer)
    cluster.create(node("n1", cpu="2"), pod("v1", cpu="2", nodeName="n1", priority=1))
    cluster.handle_events()
    cluster.create(pod("urgent", cpu="2", priority=1000))
    cluster.handle_events()
    cluster.schedule(cluster.pop())
    assert cluster.where("urgent") == "inflight"
    clock.step(cluster.queue.config.lease_ms // 2)
    cluster.turn()
    assert cluster.where("urgent") in ("unschedulable", "backoff", "active")
    assert writer.waiting  # the deletion still under way: the pod went back anyway


class SlowDecision(SlowDeletes):
    """SlowDeletes, and the batch that preempts takes ``slow_ms`` before its hold (as a
    long batch would): the fake clock moves on when the worker asks about the deletions."""

    def __init__(self, store: Store, clock: FakeClock, slow_ms: int) -> None:
        super().__init__(store)
        self.clock, self.slow_ms = clock, slow_ms

    def deleting(self, pod_keys: Sequence[str]) -> bool:
        if self.slow_ms:
            self.clock.step(self.slow_ms)
            self.slow_ms = 0
        return super().deleting(pod_keys)


def test_a_held_preemptors_half_lease_runs_from_its_pop_not_from_its_hold(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    """A hold counted from its own start could outlast the pod's lease after a slow
    batch; it ends half a lease after the pod was taken up."""
    lease_ms = QueueConfig().lease_ms
    writer = SlowDecision(Store(r, keys, clock=clock), clock, slow_ms=lease_ms * 2 // 5)
    cluster = InProcessCluster(r, keys, clock, writer=writer)
    assert cluster.queue.config.lease_ms == lease_ms
    cluster.create(node("n1", cpu="2"), pod("v1", cpu="2", nodeName="n1", priority=1))
    cluster.handle_events()
    cluster.create(pod("urgent", cpu="2", priority=1000))
    cluster.handle_events()
    cluster.schedule(cluster.pop())
    assert cluster.where("urgent") == "inflight" and writer.waiting
    clock.step(lease_ms // 10 + 1)  # half a lease since the pop, 0.1 lease since the hold
    cluster.turn()
    assert cluster.where("urgent") in ("unschedulable", "backoff", "active")


def test_a_preemptor_whose_victim_is_deleted_but_not_yet_released_does_not_preempt_again(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    """CI caught a gang preempting six pods where four made room: a member tried again
    after its victims left the store (and the worker's pod lists) but before the handlers
    released them in the ledger found its nominated node still full, and nothing on it
    being preempted, so it preempted elsewhere. It waits instead, as for a terminating
    victim, and the release moves it."""
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(node("n1", cpu="2"), node("n2", cpu="2"))
    cluster.create(pod("v1", cpu="2", nodeName="n1", priority=1))
    cluster.create(pod("v2", cpu="2", nodeName="n2", priority=1))
    cluster.handle_events()
    cluster.create(pod("urgent", cpu="2", priority=1000))
    cluster.handle_events()
    cluster.schedule(cluster.pop())
    nominated = cluster.pod("urgent")["status"]["nominatedNodeName"]
    victim, spared = ("v1", "v2") if nominated == "n1" else ("v2", "v1")
    assert cluster.store.get("Pod", f"default/{victim}") is None
    held = cluster.worker.ledger.pod_nodes([f"default/{victim}"])
    assert held == {f"default/{victim}": nominated}  # not released: handlers not run
    # The worker's informer reads the deletion (the victim leaves its pod list); urgent
    # is tried again before the handlers release the victim's room.
    popped = cluster.pop_before_the_handlers()
    assert [p.key for p in popped] == ["default/urgent"]
    cluster.schedule(popped)
    assert cluster.store.get("Pod", f"default/{spared}") is not None
    assert cluster.node_of("urgent") == ""
    # The release comes: urgent moves and takes the room it was nominated to.
    cluster.settle()
    clock.step(11_000)
    cluster.flush()
    cluster.settle()
    assert cluster.node_of("urgent") == nominated
    assert cluster.store.get("Pod", f"default/{spared}") is not None
