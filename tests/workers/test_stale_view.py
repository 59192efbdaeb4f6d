"""A popped pod whose copy in the worker's view is behind the store.

The store's create script queues a pod at once, so a worker may pop a pod before its
informer has read the pod's events. For a new name the view has no copy and the worker
reads the store; for a name deleted and created again (a StatefulSet's pod) the view
still has the old pod, bound or not. Before, the worker took the old bound copy for the
popped pod's own and dropped the queue entry: the new pod stayed pending for good. Now it
reads such pods from the store and lets its informer catch up, without a relist.
(tests/reliability/test_failover_view.py: the same check when the view holds a binding
Redis lost, where catching up cannot help and the informer relists.)
"""

from __future__ import annotations

import redis

from distsched.clock import FakeClock
from distsched.keys import Keys
from tests.support.objects import node, pod
from tests.support.readers import bound_nodes
from tests.workers.harness import InProcessCluster


def test_a_pod_created_again_under_a_bound_pods_name_is_scheduled(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(node("n1", cpu="4"), pod("web-0", cpu="1"))
    cluster.settle()
    assert cluster.node_of("web-0") == "n1"
    old_uid = cluster.pod("web-0")["metadata"]["uid"]

    cluster.store.delete("Pod", "default/web-0")
    cluster.create(pod("web-0", cpu="2"))
    assert cluster.pod("web-0")["metadata"]["uid"] != old_uid
    cluster.handle_queue_events()  # the ledger lets the old pod go; the informer is behind
    assert cluster.worker.informer.get("Pod", "default/web-0")["metadata"]["uid"] == old_uid
    relists = cluster.worker.informer.relists

    popped = cluster.pop()
    assert [q.key for q in popped] == ["default/web-0"]
    cluster.schedule(popped)
    cluster.bind()
    assert bound_nodes(r, keys)["default/web-0"] == "n1"
    assert cluster.worker.informer.relists == relists  # caught up, not relisted
    cluster.settle()
    state = cluster.worker.ledger.node_state(["n1"])["n1"]
    assert state.requested["cpu"] == 2000  # the new pod's request, not the old one's
    assert cluster.worker.ledger.check_consistency() == []


def test_a_pending_pod_created_again_is_decided_as_it_is_now(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    """The old pod never fit (it asked for more than any node has); the new one under
    its name does: decided on the view's old copy it would be refused."""
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(node("n1", cpu="4"), pod("job-0", cpu="8"))
    cluster.settle()
    assert cluster.where("job-0") == "unschedulable"
    cluster.store.delete("Pod", "default/job-0")
    cluster.create(pod("job-0", cpu="1"))
    cluster.handle_queue_events()
    assert cluster.worker.informer.get("Pod", "default/job-0")["spec"]["containers"]

    popped = cluster.pop()
    assert [q.key for q in popped] == ["default/job-0"]
    cluster.schedule(popped)
    cluster.bind()
    assert bound_nodes(r, keys)["default/job-0"] == "n1"


def test_a_pod_popped_before_the_informer_read_it_is_decided_with_what_came_before_it(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    """The node is written before the pod (as the kube bridge writes a first listing),
    but the worker popped the pod before its informer read either: decided on the view
    it had, the pod found no node at all and was reported unschedulable."""
    cluster = InProcessCluster(r, keys, clock)
    cluster.settle()  # synced on an empty store
    cluster.create(node("n1", cpu="4"), pod("p", cpu="1"))
    cluster.handle_queue_events()
    assert cluster.worker.informer.get("Node", "n1") is None  # behind both

    popped = cluster.pop()
    assert [q.key for q in popped] == ["default/p"]
    cluster.schedule(popped)
    cluster.bind()
    assert bound_nodes(r, keys)["default/p"] == "n1"
    assert cluster.explain("p") == {}
