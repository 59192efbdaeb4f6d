"""Gang scheduling end to end, with worker and binder processes: two workers, a gang that
preempts lower-priority pods only as a whole, and one that can never fit saying so."""

from __future__ import annotations

import redis

from distsched.bench.procs import ProcessGroup
from distsched.cache.ledger import Ledger
from distsched.clock import SYSTEM_CLOCK
from distsched.keys import Keys
from distsched.model.podgroups import POD_GROUP_LABEL
from distsched.store import Store
from distsched.views import pod_explanation
from tests.support.objects import node, pod
from tests.support.readers import bound_nodes
from tests.support.waits import wait_for


def group(name: str, minimum: int) -> dict:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": minimum},
    }


def members(name: str, n: int, cpu: str, priority: int = 0) -> list[dict]:
    return [
        pod(f"{name}-{i}", cpu=cpu, priority=priority, labels={POD_GROUP_LABEL: name})
        for i in range(n)
    ]


def test_a_gang_preempts_as_a_whole_and_one_that_cannot_fit_holds_nothing(
    private_client: redis.Redis, processes: ProcessGroup
) -> None:
    keys = Keys()
    store = Store(private_client, keys)
    store.create_many([node(f"n{i}", cpu="2") for i in range(3)])
    processes.spawn("worker")
    processes.spawn("worker")
    processes.spawn("binder")
    store.create_many([pod(f"low-{i}", cpu="1", priority=1) for i in range(6)])
    wait_for("the low pods to bind", lambda: len(bound_nodes(private_client, keys)) == 6, 20)

    # 4 members of 1 cpu at priority 100: four low pods must go, and only then.
    store.create_many([group("train", 4), *members("train", 4, "1", priority=100)])

    def train_bound() -> bool:
        bound = bound_nodes(private_client, keys)
        return sum(1 for k in bound if k.startswith("default/train-")) == 4

    wait_for("the gang to preempt and bind", train_bound, 30)
    low_left = [p for p in store.list("Pod")[0] if p["metadata"]["name"].startswith("low-")]
    assert len(low_left) == 2

    # 3 members of 3 cpu can never fit on nodes of 2 cpu: nothing held, explain says so.
    store.create_many([group("huge", 3), *members("huge", 3, "3", priority=1000)])

    def explained() -> str:
        found = pod_explanation(private_client, keys, "default/huge-0")
        return "" if found is None else str(found["message"])

    message = wait_for("the gang's explain line", explained, 20)
    assert "gang default/huge can never be placed" in message, message
    held = Ledger(private_client, keys, SYSTEM_CLOCK).pod_nodes(
        [f"default/huge-{i}" for i in range(3)]
    )
    assert held == {}
    assert len(bound_nodes(private_client, keys)) == 6  # nobody was evicted for it
