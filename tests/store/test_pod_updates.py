"""Pod updates the API server refuses are refused by the store too, whoever writes them:
a bound pod's requests (which the ledger holds) never change, and concurrent writers of
one object never leave a mix of their versions."""

from __future__ import annotations

import copy
import threading
from typing import Any

import pytest
import redis

from distsched.clock import FakeClock
from distsched.keys import Keys
from distsched.model import CPU, Pod, pod_requests
from distsched.store import ApplyAction, InvalidUpdate, Store, StoreError, Undecodable
from tests.store.helpers import events, make_pod
from tests.support.objects import node, pod
from tests.workers.harness import InProcessCluster


def with_cpu(pod: dict[str, Any], cpu: str) -> dict[str, Any]:
    out = copy.deepcopy(pod)
    out["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
    return out


def test_a_bound_pods_requests_never_change_and_nothing_is_written(
    store: Store, r: redis.Redis, keys: Keys
) -> None:
    store.create(with_cpu(make_pod("web"), "1"))
    store.bind("default/web", None, "n1")
    before, written = store.get("Pod", "default/web"), len(events(r, keys))
    for write in (store.apply, store.update):
        with pytest.raises(InvalidUpdate) as exc:
            write(with_cpu(make_pod("web"), "3"))
        assert exc.value.field == "spec.containers[0].resources.requests.cpu"
        assert "field is immutable" in str(exc.value)
    assert store.get("Pod", "default/web") == before
    assert len(events(r, keys)) == written, "no event, no rv"


def test_what_may_change_still_does(store: Store) -> None:
    store.create(make_pod("web", schedulingGates=[{"name": "wait"}]))
    new = make_pod("web", tolerations=[{"key": "k", "operator": "Exists"}])
    new["metadata"]["labels"] = {"app": "db"}
    new["spec"]["containers"][0]["image"] = "nginx:2"
    stored, action = store.apply(new)
    assert action == "configured"
    assert stored["spec"]["containers"][0]["image"] == "nginx:2"
    assert "schedulingGates" not in stored["spec"]


def test_an_update_cannot_bind_a_pending_pod(store: Store) -> None:
    store.create(make_pod("web"))
    with pytest.raises(InvalidUpdate) as exc:
        store.apply(make_pod("web", nodeName="n1"))
    assert exc.value.field == "spec.nodeName"
    assert store.get("Pod", "default/web")["spec"].get("nodeName") is None  # type: ignore[index]


def test_apply_many_reports_what_it_wrote_before_a_refusal(store: Store) -> None:
    store.create(make_pod("old"))
    applied: list[tuple[int, ApplyAction]] = []
    batch = [make_pod("new"), make_pod("same"), with_cpu(make_pod("old"), "2")]
    with pytest.raises(InvalidUpdate):
        store.apply_many(batch, applied=lambda i, action: applied.append((i, action)))
    assert applied == [(0, "created"), (1, "created")]
    assert store.get("Pod", "default/new") is not None


def writer_version(i: int) -> dict[str, Any]:
    pod = with_cpu(make_pod("contended"), f"{i + 1}")
    pod["metadata"]["labels"] = {"writer": str(i)}
    pod["spec"]["containers"][0]["image"] = f"img:{i}"
    return pod


def race(store: Store, versions: list[dict[str, Any]], rounds: int) -> list[Any]:
    """Every version applied ``rounds`` times by its own thread, all started together;
    the outcome of each thread's last apply (an action or the exception)."""
    start = threading.Barrier(len(versions))
    outcomes: list[Any] = [None] * len(versions)

    def run(i: int) -> None:
        start.wait()
        for _ in range(rounds):
            try:
                outcomes[i] = store.apply(versions[i])[1]
            except StoreError as exc:
                outcomes[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(versions))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcomes


def projection(pod: dict[str, Any]) -> tuple[Any, ...]:
    container = pod["spec"]["containers"][0]
    return (pod["metadata"]["labels"], container["image"], container["resources"])


def test_concurrent_applies_of_different_requests_leave_one_writers_pod(
    store: Store, r: redis.Redis, keys: Keys
) -> None:
    versions = [writer_version(i) for i in range(6)]
    outcomes = race(Store(r, keys), versions, rounds=1)
    created = [i for i, o in enumerate(outcomes) if o == "created"]
    assert len(created) == 1, outcomes
    refused = [o for o in outcomes if isinstance(o, InvalidUpdate)]
    assert len(refused) == len(versions) - 1, outcomes
    stored = store.get("Pod", "default/contended")
    assert stored is not None
    assert projection(stored) == projection(versions[created[0]])


def test_concurrent_applies_of_mutable_fields_are_serialised_per_object(
    store: Store, r: redis.Redis, keys: Keys
) -> None:
    store.create(writer_version(0))
    # Same requests, different labels and image: every write is allowed; each lands whole.
    versions = [with_cpu(writer_version(i), "1") for i in range(6)]
    outcomes = race(Store(r, keys), versions, rounds=20)
    assert all(o in ("configured", "unchanged") for o in outcomes), outcomes
    stored = store.get("Pod", "default/contended")
    assert stored is not None
    assert projection(stored) in [projection(v) for v in versions]


def test_an_undecodable_record_is_named_or_skipped(
    store: Store, r: redis.Redis, keys: Keys
) -> None:
    store.create_many([make_pod("a"), make_pod("c")])
    r.hset(keys.objects("Pod"), "default/b", b"\xc1garbage")
    r.hset(keys.objects("Pod"), "default/d", b"\x05")  # msgpack of 5: not an object
    with pytest.raises(Undecodable) as exc:
        store.list("Pod")
    assert exc.value.key in ("default/b", "default/d")
    skipped: list[Undecodable] = []
    items, _ = store.list("Pod", on_undecodable=skipped.append)
    assert [o["metadata"]["name"] for o in items] == ["a", "c"]
    assert sorted(e.key for e in skipped) == ["default/b", "default/d"]


def test_a_resize_through_apply_cannot_overcommit_a_node(
    r: redis.Redis, keys: Keys, clock: FakeClock
) -> None:
    # The run: a bound 1-cpu pod re-applied at 3 cpu, then a 2-cpu pod bound to
    # the same 4-cpu node held 5 cpu. The ledger holds what the pod was bound with, so
    # the store must never let the pod's requests drift from it.
    cluster = InProcessCluster(r, keys, clock)
    cluster.create(node("n1", cpu="4"), pod("web", cpu="1"))
    cluster.settle()
    assert cluster.node_of("web") == "n1"
    with pytest.raises(InvalidUpdate):
        cluster.store.apply(pod("web", cpu="3"))
    cluster.create(pod("big", cpu="2"), pod("bigger", cpu="3"))
    cluster.settle()
    on_n1 = [p for p in cluster.store.list("Pod")[0] if p["spec"].get("nodeName") == "n1"]
    assert sum(pod_requests(Pod.from_dict(p)).get(CPU, 0) for p in on_n1) <= 4000
    assert cluster.node_of("big") == "n1" and cluster.node_of("bigger") == ""
