"""The vectorized snapshot: slots, resource accounting, indexes and masks."""

from __future__ import annotations

import numpy as np
import pytest

from distsched.framework.podinfo import PodInfo
from distsched.framework.snapshot import CPU_COL, MEMORY_COL, PODS_COL, Snapshot
from distsched.model import HostPort
from distsched.model.objects import Affinity, PodAffinity, PodAffinityTerm, Taint
from tests.framework.builders import GI, MI, container, host_port, make_node, make_pod, snapshot_of


def names(snapshot: Snapshot, mask: np.ndarray) -> set[str]:
    return {snapshot.node_name(int(i)) for i in snapshot.node_indices() if mask[i]}


def test_slots_are_stable_and_reused_lowest_first():
    snapshot = snapshot_of([make_node(f"n{i}") for i in range(5)])
    assert [snapshot.index_of(f"n{i}") for i in range(5)] == [0, 1, 2, 3, 4]
    snapshot.remove_node("n1")
    snapshot.remove_node("n3")
    assert snapshot.node_indices().tolist() == [0, 2, 4]
    assert snapshot.index_of("n4") == 4
    assert not snapshot.valid[1] and "n1" not in snapshot
    assert snapshot.add_node(make_node("x")) == 1
    assert snapshot.add_node(make_node("y")) == 3
    assert snapshot.add_node(make_node("z")) == 5  # grows past the initial capacity
    assert snapshot.capacity >= 6 and snapshot.num_nodes == 6


def test_capacity_growth_keeps_everything():
    snapshot = Snapshot(capacity=1)
    for i in range(40):
        snapshot.add_node(make_node(f"n{i}", cpu=1000 + i, labels={"i": str(i)}))
        snapshot.add_pod(make_pod(f"p{i}", node_name=f"n{i}", requests={"cpu": i}))
    index = snapshot.index_of("n33")
    assert snapshot.allocatable[index, CPU_COL] == 1033
    assert snapshot.requested[index, CPU_COL] == 33
    assert snapshot.free[index, CPU_COL] == 1000
    assert names(snapshot, snapshot.label_mask("i", "33")) == {"n33"}
    assert snapshot.allocatable.flags.f_contiguous


def test_pod_accounting_with_init_containers_and_overhead():
    snapshot = snapshot_of([make_node("n1", cpu=4000, memory=8 * GI, pods=3)])
    pod = make_pod(
        "p",
        node_name="n1",
        containers=[container("a", requests={"cpu": 100, "memory": 64 * MI}), container("b")],
        init_containers=[container("i", requests={"cpu": 500})],
        overhead={"cpu": 10},
    )
    snapshot.add_pod(pod)
    i = snapshot.index_of("n1")
    assert snapshot.requested[i, CPU_COL] == 510  # max(100, 500) + 10
    assert snapshot.requested[i, MEMORY_COL] == 64 * MI
    assert snapshot.requested[i, PODS_COL] == 1
    assert snapshot.free[i, PODS_COL] == 2
    # Non-zero: container b counts 100m / 200Mi; init 500m; then overhead.
    assert snapshot.nonzero_requested[i].tolist() == [510, 264 * MI]
    removed = snapshot.remove_pod("default/p")
    assert removed is not None and removed.key == "default/p"
    assert snapshot.requested[i].tolist() == [0, 0, 0, 0]
    assert snapshot.nonzero_requested[i].tolist() == [0, 0]
    assert snapshot.free[i, CPU_COL] == 4000


def test_generation_bumps_on_every_change_of_a_node():
    snapshot = snapshot_of([make_node("n1"), make_node("n2")])
    i, j = snapshot.index_of("n1"), snapshot.index_of("n2")
    seen = [int(snapshot.generation[i])]
    snapshot.add_pod(make_pod("p", node_name="n1"))
    seen.append(int(snapshot.generation[i]))
    snapshot.update_node(make_node("n1", cpu=1))
    seen.append(int(snapshot.generation[i]))
    snapshot.remove_pod("default/p")
    seen.append(int(snapshot.generation[i]))
    assert seen == sorted(seen) and len(set(seen)) == 4
    assert snapshot.generation[j] < seen[1]


def test_adding_a_known_pod_replaces_it():
    snapshot = snapshot_of([make_node("n1"), make_node("n2")])
    snapshot.add_pod(make_pod("p", requests={"cpu": 100}), "n1")  # assumed
    snapshot.add_pod(make_pod("p", requests={"cpu": 100}, node_name="n2"))  # bound elsewhere
    assert snapshot.requested[snapshot.index_of("n1"), CPU_COL] == 0
    assert snapshot.requested[snapshot.index_of("n2"), CPU_COL] == 100
    assert snapshot.pod_node_index("default/p") == snapshot.index_of("n2")
    assert list(snapshot.pods_on(snapshot.index_of("n2"))) == ["default/p"]


def test_pods_wait_for_their_node_and_survive_its_removal():
    snapshot = Snapshot()
    snapshot.add_pod(make_pod("early", node_name="late", requests={"cpu": 300}))
    assert snapshot.pod_node_index("default/early") is None
    index = snapshot.add_node(make_node("late"))
    assert snapshot.requested[index, CPU_COL] == 300
    snapshot.remove_node("late")
    assert snapshot.pod_info("default/early") is None
    again = snapshot.add_node(make_node("late"))
    assert snapshot.requested[again, CPU_COL] == 300
    snapshot.remove_node("late")
    assert snapshot.remove_pod("default/early") is not None
    assert snapshot.add_node(make_node("late")) is not None
    assert snapshot.requested[snapshot.index_of("late"), CPU_COL] == 0
    with pytest.raises(ValueError):
        snapshot.add_pod(make_pod("nowhere"))


def test_extended_resources_get_columns_on_demand():
    snapshot = snapshot_of([make_node("n1"), make_node("n2", extra={"example.com/gpu": 4})])
    col = snapshot.resource_index["example.com/gpu"]
    assert snapshot.allocatable[:, col][snapshot.node_indices()].tolist() == [0, 4]
    vector, unknown = snapshot.request_vector({"cpu": 5, "example.com/gpu": 1, "x.io/y": 2})
    assert vector[CPU_COL] == 5 and vector[col] == 1 and unknown == ("x.io/y",)
    assert "x.io/y" not in snapshot.resource_index  # reading never adds columns
    snapshot.add_pod(make_pod("p", node_name="n1", requests={"x.io/y": 2}))
    assert snapshot.requested[snapshot.index_of("n1"), snapshot.resource_index["x.io/y"]] == 2
    assert snapshot.all_nodes_have(CPU_COL) and not snapshot.all_nodes_have(col)


def test_label_masks_and_inverted_index():
    nodes = [
        make_node("a", labels={"zone": "z1", "disk": "ssd", "rank": "3"}),
        make_node("b", labels={"zone": "z2", "rank": "x"}),
        make_node("c", labels={"zone": "z1"}),
    ]
    snapshot = snapshot_of(nodes)
    assert names(snapshot, snapshot.label_mask("zone", "z1")) == {"a", "c"}
    assert names(snapshot, snapshot.label_exists_mask("disk")) == {"a"}
    values, ok = snapshot.label_int_values("rank")
    assert names(snapshot, ok) == {"a"} and values[snapshot.index_of("a")] == 3
    ids, domains = snapshot.topology_domains("zone")
    assert domains == ["z1", "z2"]
    assert [int(ids[snapshot.index_of(n)]) for n in "abc"] == [0, 1, 0]
    assert snapshot.label_values("zone")["z1"] == {snapshot.index_of("a"), snapshot.index_of("c")}
    # Cached masks follow label changes.
    version = snapshot.label_version
    snapshot.update_node(make_node("c", labels={"zone": "z2"}))
    assert snapshot.label_version > version
    assert names(snapshot, snapshot.label_mask("zone", "z1")) == {"a"}
    assert snapshot.topology_domains("zone")[0][snapshot.index_of("c")] == 1
    snapshot.remove_node("a")
    assert names(snapshot, snapshot.label_mask("zone", "z1")) == set()
    assert "z1" not in snapshot.label_values("zone")


def test_unchanged_labels_keep_caches():
    snapshot = snapshot_of([make_node("a", labels={"zone": "z1"})])
    mask = snapshot.label_mask("zone", "z1")
    snapshot.update_node(make_node("a", cpu=1, labels={"zone": "z1"}))
    assert snapshot.label_mask("zone", "z1") is mask


def test_taint_masks():
    t1, t2 = Taint("k", "NoSchedule", "v"), Taint("k", "NoExecute", "v")
    snapshot = snapshot_of(
        [make_node("a", taints=[t1]), make_node("b", taints=[t1, t2]), make_node("c")]
    )
    assert set(snapshot.distinct_taints()) == {t1, t2}
    assert names(snapshot, snapshot.taint_mask(t1)) == {"a", "b"}
    version = snapshot.taint_version
    snapshot.update_node(make_node("b"))
    assert snapshot.taint_version > version
    assert names(snapshot, snapshot.taint_mask(t1)) == {"a"}
    assert set(snapshot.distinct_taints()) == {t1}


def test_host_ports_are_counted_per_pod():
    snapshot = snapshot_of([make_node("n1")])
    i = snapshot.index_of("n1")
    snapshot.add_pod(make_pod("a", node_name="n1", ports=[host_port("TCP/0.0.0.0/80")]))
    snapshot.add_pod(make_pod("b", node_name="n1", ports=[host_port("TCP/0.0.0.0/80")]))
    assert snapshot.host_ports(i) == {HostPort("0.0.0.0", "TCP", 80): 2}
    snapshot.remove_pod("default/a")
    assert i in snapshot.port_conflict_slots(HostPort("10.0.0.1", "TCP", 80))
    snapshot.remove_pod("default/b")
    assert snapshot.host_ports(i) == {}
    assert not snapshot.port_conflict_slots(HostPort("0.0.0.0", "TCP", 80))


def test_images_and_their_spread():
    snapshot = snapshot_of(
        [
            make_node("a", images=[(("img:1", "img@sha256:x"), 100)]),
            make_node("b", images=[(("img:1",), 100)]),
            make_node("c"),
        ]
    )
    assert snapshot.image_num_nodes("img:1") == 2
    assert snapshot.image_num_nodes("img@sha256:x") == 1
    assert snapshot.images(snapshot.index_of("a")) == {"img:1": 100, "img@sha256:x": 100}
    sizes = snapshot.image_sizes("img:1")
    assert [int(sizes[snapshot.index_of(n)]) for n in "abc"] == [100, 100, 0]
    snapshot.update_node(make_node("b"))
    assert snapshot.image_num_nodes("img:1") == 1
    assert snapshot.image_sizes("img:1")[snapshot.index_of("b")] == 0


def test_pods_with_affinity_are_tracked():
    term = PodAffinityTerm("zone")
    anti_affinity = Affinity(pod_anti_affinity=PodAffinity(required=(term,)))
    anti = make_pod("anti", node_name="n1", affinity=anti_affinity)
    soft = make_pod("soft", node_name="n1", affinity=Affinity(pod_affinity=PodAffinity()))
    snapshot = snapshot_of([make_node("n1")], [anti, soft, make_pod("plain", node_name="n1")])
    assert set(snapshot.pods_with_affinity) == {"default/anti", "default/soft"}
    assert set(snapshot.pods_with_required_anti_affinity) == {"default/anti"}
    info = snapshot.pod_info("default/anti")
    assert isinstance(info, PodInfo) and info.required_anti_affinity_terms == (term,)
    assert sorted(p.key for _, p in snapshot.iter_pods()) == [
        "default/anti",
        "default/plain",
        "default/soft",
    ]
    snapshot.remove_pod("default/anti")
    assert set(snapshot.pods_with_required_anti_affinity) == set()


def test_set_usages_is_set_usage_for_many_nodes():
    one, many = (Snapshot(capacity=4, usage_from_ledger=True) for _ in range(2))
    for snapshot in (one, many):
        for name in ("n1", "n2", "n3"):
            snapshot.add_node(make_node(name))
        snapshot.set_usage(snapshot.index_of("n2"), {"pods": 1}, [("0.0.0.0", "TCP", 80)])
    usages = [
        ("n1", {"cpu": 100, "pods": 1}, (0, 200 * MI)),
        ("n2", {"memory": GI, "example.com/gpu": 1, "pods": 2}, (100, 0)),  # a new column
    ]
    for name, requested, extra in usages:
        one.set_usage(one.index_of(name), requested, (), extra)
    before = many.generation.copy()
    many.set_usages(
        [many.index_of(n) for n, _, _ in usages], [r for _, r, _ in usages], [e for *_, e in usages]
    )
    assert many.resource_names == one.resource_names
    for array in ("requested", "free", "nonzero_requested"):
        assert getattr(many, array).tolist() == getattr(one, array).tolist(), array
    assert many.host_ports(many.index_of("n2")) == {}
    assert many.port_conflict_slots(HostPort("0.0.0.0", "TCP", 80)) == set()
    n1, n2 = many.index_of("n1"), many.index_of("n2")
    assert before[n1] < many.generation[n1] != many.generation[n2] > before[n2]
    assert max(many.generation) == many.version


def test_set_usages_shares_rows_between_nodes_and_calls_and_widens_them_with_a_new_column():
    # The feed's parser hands the same mapping to every node with the same amounts: its
    # row is made once, across calls too, and still widened when a new resource appears.
    one, many = (Snapshot(capacity=8, usage_from_ledger=True) for _ in range(2))
    names = [f"n{i}" for i in range(6)]
    for snapshot in (one, many):
        for name in names:
            snapshot.add_node(make_node(name))
    small, big = {"cpu": 100, "pods": 1}, {"cpu": 300, "memory": GI, "pods": 3}
    gpu = {"cpu": 100, "example.com/gpu": 2, "pods": 1}  # a column no node had
    rounds = [
        [small, big, small, small, big, small],
        [big, small, gpu, small, big, small],  # the new column in the middle of a call
        [small, small, big, gpu, big, small],  # cached rows, now one column wider
    ]
    for amounts in rounds:
        for name, requested in zip(names, amounts, strict=True):
            one.set_usage(one.index_of(name), requested, (), (0, 0))
        many.set_usages([many.index_of(n) for n in names], amounts, [(0, 0)] * len(names))
        assert many.resource_names == one.resource_names
        for array in ("requested", "free", "nonzero_requested"):
            assert getattr(many, array).tolist() == getattr(one, array).tolist(), array


def test_set_usages_keeps_the_generation_of_a_node_whose_usage_it_holds_already():
    # A worker's own reservations come back through the ledger's feed: the answers
    # cached for their nodes still hold. Any other difference is a change.
    snapshot = Snapshot(capacity=4, usage_from_ledger=True)
    for name in ("n1", "n2", "n3", "n4"):
        snapshot.add_node(make_node(name))
    n1, n2, n3, n4 = (snapshot.index_of(n) for n in ("n1", "n2", "n3", "n4"))
    snapshot.set_usages([n1, n2, n3], [{"cpu": 100, "pods": 1}] * 3, [(0, 200 * MI)] * 3)
    snapshot.set_usage(n4, {"pods": 1}, [("0.0.0.0", "TCP", 80)])
    before = snapshot.generation.copy()
    snapshot.set_usages(
        [n1, n2, n3, n4],
        [{"cpu": 100, "pods": 1}, {"cpu": 200, "pods": 1}, {"cpu": 100, "pods": 1}, {"pods": 1}],
        [(0, 200 * MI), (0, 200 * MI), (0, 100 * MI), (0, 0)],
    )
    after = snapshot.generation
    assert after[n1] == before[n1]  # the same usage
    assert after[n2] > before[n2] and after[n3] > before[n3]  # requests / non-zero extra
    assert after[n4] > before[n4] and snapshot.host_ports(n4) == {}  # its port is gone
    assert snapshot.requested[n2].tolist()[:1] == [200]
