"""The README's Quick start manifests apply and schedule as their comments say."""

from __future__ import annotations

from pathlib import Path

import redis

from distsched.bench.checker import check
from distsched.bench.procs import ProcessGroup
from distsched.keys import Keys
from distsched.redis_text import as_text
from distsched.store import Store
from distsched.views import pod_explanation
from tests.controllers.helpers import apply_path
from tests.support.objects import ZONE
from tests.support.readers import bound_nodes
from tests.support.waits import wait_for

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# The pods, the shop's storefront 2 + orders-db 2 + node-exporter 3 + nightly-report 2,
# and the training gang mnist's 4 (llm-finetune's 4 do not fit together: none is placed).
BOUND = 5 + 9 + 4


def test_examples_schedule_as_documented(
    private_client: redis.Redis, processes: ProcessGroup
) -> None:
    keys = Keys()
    store = Store(private_client, keys)
    apply_path(store, EXAMPLES)
    processes.spawn("worker")
    processes.spawn("binder")
    processes.spawn("controller")
    wait_for("the pods to bind", lambda: len(bound_nodes(private_client, keys)) == BOUND, 60)
    bound = bound_nodes(private_client, keys)
    assert {bound[f"default/web-{i}"] for i in (1, 2, 3)} == {"node-a", "node-b", "node-c"}
    assert bound["default/db-1"] == "node-a"  # the other SSD node is tainted
    assert bound["default/train-1"] in ("node-a", "node-b", "node-c")
    assert "default/huge-1" not in bound

    def shop(prefix: str) -> dict[str, str]:
        return {k: v for k, v in bound.items() if k.startswith(f"shop/{prefix}")}

    storefront = shop("storefront-")
    assert sorted(storefront.values()) == ["node-a", "node-b"]  # anti-affinity; c is tainted
    for key in storefront:
        pod = store.get("Pod", key)
        assert pod is not None and pod["spec"]["priority"] == 100000
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in store.list("Node")[0]}
    db_zones = sorted(nodes[n][ZONE] for n in shop("orders-db-").values())
    assert sorted(shop("orders-db-")) == ["shop/orders-db-0", "shop/orders-db-1"]
    assert db_zones == ["zone-a", "zone-b"]  # spread: zone-c counts, but is tainted
    assert sorted(shop("node-exporter-").values()) == ["node-a", "node-b", "node-c"]
    report = shop("nightly-report-")
    assert len(report) == 2
    pod = store.get("Pod", next(iter(report)))
    assert pod is not None and (pod["spec"]["priority"], pod["spec"]["preemptionPolicy"]) == (
        -10,
        "Never",
    )
    mnist = {k: v for k, v in bound.items() if k.startswith("ml/mnist-")}
    assert len(mnist) == 4 and set(mnist.values()) == {"node-c"}
    assert not [k for k in bound if k.startswith("ml/llm-finetune-")]
    ledger_pods = {as_text(k) for k in private_client.hkeys(keys.ledger_pods)}
    assert not [k for k in ledger_pods if k.startswith("ml/llm-finetune-")]  # nothing held
    explanation = pod_explanation(private_client, keys, llm_pod(store))
    assert explanation is not None
    assert "gang ml/llm-finetune: " in explanation["message"], explanation
    assert check(private_client, keys, expect_bound=set(bound)) == []


def llm_pod(store: Store) -> str:
    pods = store.list("Pod", "ml")[0]
    return next(
        f"ml/{p['metadata']['name']}"
        for p in pods
        if p["metadata"]["name"].startswith("llm-finetune-")
    )
