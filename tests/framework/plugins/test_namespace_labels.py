"""namespaceSelector sees the labels of Namespace objects (issue 12), recorded by each
worker's informer from the store into the namespace lister its plugins' Handle carries."""

from __future__ import annotations

import redis

from distsched.framework.interface import Handle
from distsched.framework.listers import Listers, NamespaceLabels
from distsched.framework.plugins import inter_pod_affinity
from distsched.keys import Keys
from distsched.model.objects import LabelSelector
from distsched.store import Informer, Store
from distsched.workers.local_cache import namespace_handler
from tests.framework.builders import run_filter, snapshot_of
from tests.framework.plugins.affinity_builders import (
    AFFINITY_FAIL,
    affinity,
    node,
    pod,
    reason,
    term,
)


def test_namespace_selector_matches_a_namespace_objects_labels() -> None:
    listers = Listers()
    listers.namespaces.set("team-a", {"env": "prod"})
    listers.namespaces.set("team-b", {"env": "dev"})

    def plugin() -> inter_pod_affinity.InterPodAffinity:
        return inter_pod_affinity.new({}, Handle(listers=listers))

    wants_prod_web = pod(
        aff=affinity(
            [
                term(
                    LabelSelector(match_labels={"app": "web"}),
                    ns_selector=LabelSelector(match_labels={"env": "prod"}),
                )
            ]
        )
    )
    in_prod = [pod("e", {"app": "web"}, node="n1", namespace="team-a")]
    in_dev = [pod("e", {"app": "web"}, node="n1", namespace="team-b")]
    nodes = [node("n1", region="r1")]
    assert run_filter(plugin(), wants_prod_web, snapshot_of(nodes, in_prod))["n1"] is None
    dev = run_filter(plugin(), wants_prod_web, snapshot_of(nodes, in_dev))["n1"]
    assert reason(dev) == AFFINITY_FAIL


def test_the_workers_informer_records_namespace_labels(r: redis.Redis, keys: Keys) -> None:
    store = Store(r, keys)
    informer = Informer(r, keys, ("Namespace",))
    namespaces = NamespaceLabels()
    informer.add_handler("Namespace", namespace_handler(namespaces))
    namespace_labels = namespaces.of
    store.create({"kind": "Namespace", "metadata": {"name": "team-a", "labels": {"env": "prod"}}})
    informer.poll_once()
    assert namespace_labels("team-a") == {"env": "prod", "kubernetes.io/metadata.name": "team-a"}
    store.update({"kind": "Namespace", "metadata": {"name": "team-a", "labels": {"env": "dev"}}})
    informer.poll_once()
    assert namespace_labels("team-a")["env"] == "dev"
    store.delete("Namespace", "team-a")
    informer.poll_once()
    assert namespace_labels("team-a") == {"kubernetes.io/metadata.name": "team-a"}
