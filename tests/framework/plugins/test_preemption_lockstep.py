"""DefaultPreemption's lockstep dry run (all independent nodes at once) gives exactly what
the one-node-at-a-time dry run gives: candidates, victims, PDB bookkeeping, per-node
statuses and errors, on random clusters with taints, host ports, budgets and nominated
pods; and it leaves the snapshot as it was."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distsched.framework.cycle_state import CycleState
from distsched.framework.diagnosis import FitError
from distsched.framework.interface import Handle, PluginSpec
from distsched.framework.listers import DisruptionBudgets, Listers
from distsched.framework.nominator import PodNominator
from distsched.framework.plugins import default_preemption
from distsched.framework.plugins.default_preemption import DefaultPreemption
from distsched.framework.profile import build_profiles, default_config, parse_config
from distsched.framework.registry import IN_TREE_REGISTRY
from distsched.framework.schedule import schedule_pod
from distsched.framework.what_if import (
    filter_status,
    fits_on_node,
    nodes_are_independent,
    run_filter_plugins_with_nominated_pods,
)
from distsched.model.objects import (
    DEFAULT_SCHEDULER_NAME,
    Affinity,
    LabelSelector,
    PodAffinity,
    PodAffinityTerm,
    Taint,
)
from distsched.model.pdbs import budget_from_dict
from tests.framework.builders import host_port, make_node, make_pod, snapshot_of
from tests.framework.fakes import FakeFilter

HOST = "kubernetes.io/hostname"
TIMES = ["2026-01-01T00:00:00+00:00", "2026-01-02T00:00:00+00:00", ""]


def _pod(name: str, cpu: int, priority: int, node: str = "", **kw: Any):
    created = kw.pop("created", "")
    port = kw.pop("port", False)
    p = make_pod(
        name,
        requests={"cpu": cpu},
        priority=priority,
        node_name=node,
        ports=[host_port("TCP/0.0.0.0/8080")] if port else (),
        **kw,
    )
    return replace(p, metadata=replace(p.metadata, creation_timestamp=created))


@st.composite
def clusters(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(1, 10))
    nodes = []
    for i in range(n):
        taints = [Taint("dedicated", "NoSchedule", "gpu")] if draw(st.integers(0, 9)) == 0 else []
        nodes.append(
            make_node(
                f"n{i}",
                cpu=draw(st.sampled_from([2000, 4000])),
                pods=draw(st.sampled_from([3, 110])),
                labels={HOST: f"n{i}"},
                taints=taints,
                unschedulable=draw(st.integers(0, 19)) == 0,
            )
        )
    existing = []
    for i in range(n):
        for j in range(draw(st.integers(0, 4))):
            existing.append(
                _pod(
                    f"e{i}-{j}",
                    draw(st.sampled_from([500, 1000, 1500, 2000])),
                    draw(st.sampled_from([0, 1, 5, 10, 20])),
                    f"n{i}",
                    labels={"app": draw(st.sampled_from("abc"))},
                    created=draw(st.sampled_from(TIMES)),
                    port=draw(st.integers(0, 7)) == 0,
                )
            )
    nominated = [
        _pod(
            f"nom{k}",
            draw(st.sampled_from([500, 2000])),
            draw(st.sampled_from([5, 10, 15])),
            nominated=f"n{draw(st.integers(0, n - 1))}",
        )
        for k in range(draw(st.integers(0, 3)))
    ]
    budgets = [
        {
            "kind": "PodDisruptionBudget",
            "metadata": {"name": f"pdb-{app}", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": app}}, "maxUnavailable": 1},
            "status": {"disruptionsAllowed": draw(st.integers(0, 1))},
        }
        for app in draw(st.lists(st.sampled_from("abc"), unique=True, max_size=2))
    ]
    affinity = None
    if draw(st.integers(0, 5)) == 0:  # inter-pod rules: the nodes are not independent
        term = PodAffinityTerm(HOST, LabelSelector({"app": "a"}))
        affinity = Affinity(pod_anti_affinity=PodAffinity(required=(term,)))
    incoming = _pod(
        "incoming",
        draw(st.sampled_from([1000, 2000, 3000, 4000])),
        10,
        port=draw(st.integers(0, 4)) == 0,
        affinity=affinity,
    )
    return {
        "nodes": nodes,
        "existing": existing,
        "nominated": nominated,
        "budgets": budgets,
        "incoming": incoming,
        "absolute": draw(st.sampled_from([1, 2, 3, 100])),
        "seed": draw(st.integers(0, 1000)),
    }


def dry_run(cluster: dict[str, Any], *, lockstep: bool, by_usage: bool = True) -> Any:
    snapshot = snapshot_of(cluster["nodes"], cluster["existing"])
    nominator = PodNominator()
    for p in cluster["nominated"]:
        nominator.add(p)
    budgets = DisruptionBudgets(
        [b for b in map(budget_from_dict, cluster["budgets"]) if b is not None]
    )
    handle = Handle(listers=Listers(nominator=nominator, budgets=budgets))
    fw = build_profiles(default_config(), handle=handle)[DEFAULT_SCHEDULER_NAME]
    plugin = fw.plugins[default_preemption.NAME]
    assert isinstance(plugin, DefaultPreemption)
    plugin.rng = random.Random(cluster["seed"])
    plugin.lockstep = lockstep
    plugin.by_usage = by_usage
    plugin.min_absolute = cluster["absolute"]
    state = CycleState()
    incoming = cluster["incoming"]
    try:
        schedule_pod(fw, state, incoming, snapshot)
        return "fits"
    except FitError as err:
        diagnosis = err.diagnosis
    before = (
        snapshot.requested.copy(),
        [sorted(snapshot.pods_on(i)) for i in snapshot.node_indices().tolist()],
    )
    candidates, statuses, errors = plugin.find_candidates(state, incoming, snapshot, diagnosis)
    after = (
        snapshot.requested.copy(),
        [sorted(snapshot.pods_on(i)) for i in snapshot.node_indices().tolist()],
    )
    assert np.array_equal(before[0], after[0]) and before[1] == after[1]
    failed = statuses.node_to_status.failed_nodes().tolist()
    return (
        plugin.nodes_are_independent(state),
        [
            (c.node_name, [v.key for v in c.victims], c.num_pdb_violations, c.violations, c.spared)
            for c in candidates
        ],
        sorted((i, str(statuses.node_to_status.status_of(i))) for i in failed),
        errors,
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_lockstep_dry_run_equals_one_node_at_a_time(cluster: dict[str, Any]) -> None:
    assert dry_run(cluster, lockstep=True) == dry_run(cluster, lockstep=False)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_usage_only_dry_run_equals_moving_the_pods(cluster: dict[str, Any]) -> None:
    """When only free resources matter to the filters in play, changing them alone gives
    what moving the pods gives (and leaves the snapshot as it was: dry_run checks)."""
    assert dry_run(cluster, lockstep=True) == dry_run(cluster, lockstep=True, by_usage=False)


def test_full_nodes_of_low_priority_pods_are_dry_run_together(monkeypatch: Any) -> None:
    """PreemptionBasic's shape: the lockstep path is the one taken, in one chunk."""
    nodes = [make_node(f"n{i}", cpu=4000, labels={HOST: f"n{i}"}) for i in range(40)]
    existing = [_pod(f"e{i}-{j}", 1000, 1, f"n{i}") for i in range(40) for j in range(4)]
    cluster = {
        "nodes": nodes,
        "existing": existing,
        "nominated": [],
        "budgets": [],
        "incoming": _pod("incoming", 1500, 10),
        "absolute": 100,
        "seed": 7,
    }
    chunks: list[int] = []
    original = DefaultPreemption.select_victims_on_nodes

    def spy(self: DefaultPreemption, state: Any, pod: Any, snapshot: Any, nodes: list[int]):
        chunks.append(len(nodes))
        return original(self, state, pod, snapshot, nodes)

    by_usage: list[int] = []
    usage_only = DefaultPreemption._dry_run_by_usage

    def usage_spy(self: DefaultPreemption, state: Any, pod: Any, snapshot: Any, plans: Any):
        by_usage.append(len(plans))
        return usage_only(self, state, pod, snapshot, plans)

    monkeypatch.setattr(DefaultPreemption, "select_victims_on_nodes", spy)
    monkeypatch.setattr(DefaultPreemption, "_dry_run_by_usage", usage_spy)
    together = dry_run(cluster, lockstep=True)
    assert chunks == [40] and by_usage == [40]  # no pod moved: only free resources matter
    assert together[0] is True and len(together[1]) == 40
    # Each node gives up two of its four pods for the 1.5-cpu pod.
    assert all(len(victims) == 2 for _, victims, *_ in together[1])
    assert together == dry_run(cluster, lockstep=False)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_nominated_pods_filtered_together_equal_one_node_at_a_time(cluster: dict[str, Any]) -> None:
    """run_filter_plugins_with_nominated_pods judges the nodes with nominated pods in one
    run when they are independent; each node's verdict is fits_on_node's."""
    snapshot = snapshot_of(cluster["nodes"], cluster["existing"])
    nominator = PodNominator()
    for p in cluster["nominated"]:
        nominator.add(p)
    fw = build_profiles(default_config(), handle=Handle(listers=Listers(nominator=nominator)))[
        DEFAULT_SCHEDULER_NAME
    ]
    incoming = cluster["incoming"]
    state = CycleState()
    _, status, _ = fw.run_pre_filter_plugins(state, incoming, snapshot)
    if not status.is_success():
        return
    candidates = snapshot.node_indices()
    outcome = run_filter_plugins_with_nominated_pods(
        fw, state, incoming, snapshot, candidates, nominator, 10
    )
    passed = set(outcome.passed.tolist())
    for position, node_index in enumerate(candidates.tolist()):
        together = None if position in passed else filter_status(outcome, position)
        alone = fits_on_node(fw, state, incoming, snapshot, node_index, nominator, 10)
        assert (together is None) == (alone is None), snapshot.node_name(node_index)
        if together is not None and alone is not None:
            assert (together.code, together.plugin, together.reasons) == (
                alone.code,
                alone.plugin,
                alone.reasons,
            )


class _NodeLocalFilter(FakeFilter):
    reads_only_its_node = True


@pytest.mark.parametrize(("plugin", "independent"), [(FakeFilter, False), (_NodeLocalFilter, True)])
def test_nodes_are_independent_when_every_filter_says_it_reads_only_its_node(
    plugin: type[FakeFilter], independent: bool
) -> None:
    """A filter declares node locality (``FilterPlugin.reads_only_its_node``): an extra
    out-of-tree filter keeps the dry runs one node at a time unless it declares it."""
    registry = {**IN_TREE_REGISTRY, "Picky": PluginSpec("Picky", lambda a, h: plugin(a), ())}
    text = "profiles:\n- plugins:\n    filter:\n      enabled:\n      - name: Picky\n"
    fw = build_profiles(parse_config(text, "s.yaml", registry), registry=registry)[
        DEFAULT_SCHEDULER_NAME
    ]
    assert "Picky" in [p.name for p in fw.filter_plugins]
    state = CycleState()
    incoming = _pod("incoming", 1000, 10)
    _, status, _ = fw.run_pre_filter_plugins(state, incoming, snapshot_of([make_node("n0")]))
    assert status.is_success()
    assert nodes_are_independent(fw, state) is independent


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.data())
def test_remembered_dry_runs_equal_fresh_ones(cluster: dict[str, Any], data: st.DataObject) -> None:
    """Preemptors of one kind, one after another on the same plugin, while pods leave
    nodes and others are nominated: each gets what a plugin that remembers nothing gives
    (the outcome of a node is kept by its generation and its nominated pods). Each plugin
    has its own copy of the cluster: a dry run that moves pods reorders a node's pods,
    and equally important victims are taken in that order (as kube's NodeInfo does)."""
    budgets = DisruptionBudgets(
        [b for b in map(budget_from_dict, cluster["budgets"]) if b is not None]
    )
    worlds = []
    for remember in (True, False):
        snapshot = snapshot_of(cluster["nodes"], cluster["existing"])
        nominator = PodNominator()
        for p in cluster["nominated"]:
            nominator.add(p)
        handle = Handle(listers=Listers(nominator=nominator, budgets=budgets))
        fw = build_profiles(default_config(), handle=handle)[DEFAULT_SCHEDULER_NAME]
        plugin = fw.plugins[default_preemption.NAME]
        assert isinstance(plugin, DefaultPreemption)
        plugin.remember = remember
        plugin.min_absolute = cluster["absolute"]
        worlds.append((snapshot, nominator, fw, plugin))
    existing = [p.key for p in cluster["existing"]]
    incoming = cluster["incoming"]
    for round_ in range(4):
        pod = replace(incoming, metadata=replace(incoming.metadata, name=f"incoming-{round_}"))
        answers = []
        for snapshot, _nominator, fw, plugin in worlds:
            plugin.rng = random.Random(cluster["seed"] + round_)
            state = CycleState()
            try:
                schedule_pod(fw, state, pod, snapshot)
                answers.append("fits")
                continue
            except FitError as err:
                diagnosis = err.diagnosis
            candidates, statuses, errors = plugin.find_candidates(state, pod, snapshot, diagnosis)
            failed = statuses.node_to_status.failed_nodes().tolist()
            answers.append(
                (
                    [(c.node_name, [v.key for v in c.victims], c.violations, c.spared)
                     for c in candidates],
                    sorted((i, str(statuses.node_to_status.status_of(i))) for i in failed),
                    errors,
                )
            )  # fmt: skip
        assert answers[0] == answers[1]
        change = data.draw(st.sampled_from(["remove", "nominate", "none"]))
        if change == "remove" and existing:
            gone = existing.pop(data.draw(st.integers(0, len(existing) - 1)))
            for snapshot, *_ in worlds:
                snapshot.remove_pod(gone)
        elif change == "nominate":
            node = data.draw(st.sampled_from(cluster["nodes"])).metadata.name
            for _snapshot, nominator, *_ in worlds:
                nominator.add(_pod(f"late{round_}", 500, 15, nominated=node))
