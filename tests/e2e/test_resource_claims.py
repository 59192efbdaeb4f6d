"""A pod with resource claims waits, through the worker processes, with explain saying why
(DynamicResources is not modelled); the pods around it are scheduled as usual."""

from __future__ import annotations

import redis

from distsched.bench.procs import ProcessGroup
from distsched.explain_record import read_explanation
from distsched.keys import Keys
from distsched.store import Store
from tests.support.objects import node, pod
from tests.support.readers import bound_nodes
from tests.support.waits import wait_for


def test_a_pod_with_resource_claims_waits_and_explain_says_why(
    private_client: redis.Redis, processes: ProcessGroup
) -> None:
    keys = Keys()
    store = Store(private_client, keys)
    store.create(node("only", cpu="4"))
    trainer = pod("trainer", cpu="1")
    trainer["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "gpu"}]
    store.create_many([trainer, pod("web", cpu="1")])
    processes.spawn("worker")
    processes.spawn("binder")
    wait_for("web to bind", lambda: "default/web" in bound_nodes(private_client, keys), 20)
    wait_for(
        "the trainer's explain record",
        lambda: read_explanation(private_client, keys, "default/trainer") is not None,
        20,
    )
    explanation = read_explanation(private_client, keys, "default/trainer")
    assert explanation is not None
    assert 'pod has resource claims ("gpu")' in explanation.message
    assert explanation.plugins == ("DynamicResources",)
    assert "default/trainer" not in bound_nodes(private_client, keys)
