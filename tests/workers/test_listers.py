"""Issue 19, item 2: each scheduling worker's plugins read the listers its own informer
feeds (framework/listers.py), carried by its profiles' Handle: no module state, so
in-process workers, here on one Redis, never see each other's budgets or namespace labels.
"""

from __future__ import annotations

from typing import Any

import redis

from distsched.clock import FakeClock
from distsched.keys import Keys
from distsched.workers.schedule_one import SchedulingWorker
from tests.support.objects import HOSTNAME, node, pod
from tests.workers.harness import InProcessCluster

Obj = dict[str, Any]


def namespace(name: str, **labels: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def budget(name: str, app: str) -> Obj:
    """A budget allowing no disruption (what its controller would write: none of its
    pods may go)."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": app}}},
        "status": {"disruptionsAllowed": 0},
    }


def budget_keys(worker: SchedulingWorker) -> list[str]:
    return sorted(b.key for b in worker.profiles.handle.listers.budgets.all())


def test_every_worker_has_its_own_listers_fed_by_its_own_informer(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    cluster = InProcessCluster(r, keys, clock)
    first, second = cluster.worker, cluster.add_worker()
    for worker in (first, second):
        # The informer feeds what every profile's plugins read.
        assert worker.view.listers is worker.profiles.handle.listers
        # Their time is the worker's (DefaultPreemption ages victims' conditions by it).
        assert worker.profiles.handle.listers.clock is clock
        for fw in worker.profiles.values():
            assert fw.handle.listers is worker.view.listers
    assert first.view.listers is not second.view.listers
    cluster.create(budget("zk-pdb", "zk"), namespace("team-a", env="prod"))
    while first.informer.poll_once(0):
        pass
    assert budget_keys(first) == ["default/zk-pdb"]
    assert first.view.listers.namespaces.of("team-a")["env"] == "prod"
    # The second worker's informer has not read the events yet: it knows of neither.
    assert budget_keys(second) == []
    assert "env" not in second.view.listers.namespaces.of("team-a")
    while second.informer.poll_once(0):
        pass
    assert budget_keys(second) == ["default/zk-pdb"]


def deployment(r: redis.Redis, name: str, clock: FakeClock, *objs: Obj) -> InProcessCluster:
    cluster = InProcessCluster(r, Keys(name), clock)
    cluster.create(*objs)
    return cluster


def test_namespace_labels_of_one_deployment_do_not_leak_into_another(
    r: redis.Redis, clock: FakeClock
) -> None:
    """Two deployments in one process: team-a is env=prod in one, env=dev in the other. A
    pod wanting to be next to web pods of env=prod namespaces fits only in the first."""
    affinity = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "web"}},
                    "namespaceSelector": {"matchLabels": {"env": "prod"}},
                    "topologyKey": HOSTNAME,
                }
            ]
        }
    }
    clusters = {}
    for name, env in (("prod", "prod"), ("dev", "dev")):
        clusters[name] = deployment(
            r,
            name,
            clock,
            namespace("team-a", env=env),
            node("n1"),
            pod("web", labels={"app": "web"}, namespace="team-a", nodeName="n1"),
        )
    for cluster in clusters.values():  # both informers read before either schedules
        cluster.handle_events()
    for cluster in clusters.values():
        cluster.create(pod("near-prod-web", affinity=affinity))
        cluster.settle()
    assert clusters["prod"].node_of("near-prod-web") == "n1"
    assert clusters["dev"].node_of("near-prod-web") == ""
    assert "InterPodAffinity" in clusters["dev"].explain("near-prod-web")["plugins"]


def test_budgets_of_one_deployment_do_not_steer_preemption_in_another(
    r: redis.Redis, clock: FakeClock
) -> None:
    """zk-0 (priority 0) is cheaper to evict than batch (priority 5): without a budget the
    preemptor takes n1; where zk-pdb protects zk-0 it takes n2."""
    clusters = {}
    for name, extra in (("guarded", [budget("zk-pdb", "zk")]), ("open", [])):
        clusters[name] = deployment(
            r,
            name,
            clock,
            *extra,
            node("n1", cpu="4"),
            node("n2", cpu="4"),
            pod("zk-0", cpu="3", labels={"app": "zk"}, nodeName="n1"),
            pod("batch", cpu="3", labels={"app": "batch"}, nodeName="n2", priority=5),
        )
    for cluster in clusters.values():
        cluster.handle_events()
    for cluster in clusters.values():
        cluster.create(pod("urgent", cpu="2", priority=1000))
        cluster.settle()
    nominated = {
        name: cluster.pod("urgent")["status"].get("nominatedNodeName")
        for name, cluster in clusters.items()
    }
    assert nominated == {"guarded": "n2", "open": "n1"}
    assert clusters["guarded"].store.get("Pod", "default/zk-0") is not None
    assert clusters["open"].store.get("Pod", "default/zk-0") is None
