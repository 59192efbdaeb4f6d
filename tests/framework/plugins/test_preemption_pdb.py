"""DefaultPreemption with PodDisruptionBudgets, after kube's default_preemption_test PDB
cases: violating victims are reprieved first, fewer violations win, explain says why."""

from __future__ import annotations

import random

import pytest

from distsched.framework.cycle_state import CycleState
from distsched.framework.diagnosis import FitError
from distsched.framework.interface import Handle
from distsched.framework.listers import DisruptionBudgets, Listers
from distsched.framework.plugins import default_preemption
from distsched.framework.plugins.default_preemption import victims_for
from distsched.framework.profile import build_profiles, default_config
from distsched.framework.schedule import schedule_pod
from distsched.model.objects import DEFAULT_SCHEDULER_NAME
from distsched.model.pdbs import budget_from_dict
from tests.framework.builders import snapshot_of
from tests.framework.plugins.preemption_builders import names, node, pod


def pdb(name: str, app: str, allowed: int, namespace: str = "default") -> dict:
    return {
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"matchLabels": {"app": app}}, "maxUnavailable": 1},
        "status": {"disruptionsAllowed": allowed},
    }


def run(snapshot, incoming, budgets: list[dict]):
    store = DisruptionBudgets([b for b in map(budget_from_dict, budgets) if b is not None])
    fw = build_profiles(default_config(), handle=Handle(listers=Listers(budgets=store)))[
        DEFAULT_SCHEDULER_NAME
    ]
    fw.plugins[default_preemption.NAME].rng = random.Random(0)
    state = CycleState()
    with pytest.raises(FitError) as info:
        schedule_pod(fw, state, incoming, snapshot)
    result, status = fw.run_post_filter_plugins(state, incoming, snapshot, info.value.diagnosis)
    return result, status, info.value


def test_the_node_without_a_pdb_violation_wins_over_a_cheaper_one() -> None:
    # Without budgets n1 wins (its victim has the lower priority); zk's budget is spent.
    nodes = [node("n1"), node("n2")]
    existing = [
        pod("zk-0", 3000, 1, "n1", labels={"app": "zk"}),
        pod("batch", 3000, 5, "n2", labels={"app": "batch"}),
    ]
    result, status, err = run(snapshot_of(nodes, existing), pod("p", 2000, 10), [])
    assert result.nominated_node_name == "n1"
    result, status, err = run(
        snapshot_of(nodes, existing), pod("p", 2000, 10), [pdb("zk-pdb", "zk", 0)]
    )
    assert status.is_success()
    assert result.nominated_node_name == "n2" and names(victims_for(result)) == ["batch"]
    message = str(err)  # what `distsched explain` records for the pod
    assert "PodDisruptionBudget default/zk-pdb protected pod default/zk-0" in message
    assert "node n1 passed over (1 violation(s))" in message


def test_a_budget_with_disruptions_left_protects_nothing() -> None:
    nodes = [node("n1"), node("n2")]
    existing = [
        pod("zk-0", 3000, 1, "n1", labels={"app": "zk"}),
        pod("batch", 3000, 5, "n2", labels={"app": "batch"}),
    ]
    result, _, err = run(snapshot_of(nodes, existing), pod("p", 2000, 10), [pdb("b", "zk", 1)])
    assert result.nominated_node_name == "n1"
    assert "PodDisruptionBudget" not in str(err)


def test_violating_pods_are_reprieved_first_on_a_node() -> None:
    # Two 2-cpu pods on a 4-cpu node, the incoming pod needs 2: one must go. The less
    # important one would go first, but it is covered by a spent budget: the other goes.
    existing = [
        pod("guarded", 2000, 1, "n1", labels={"app": "zk"}),
        pod("other", 2000, 3, "n1", labels={"app": "web"}),
    ]
    result, _, err = run(snapshot_of([node("n1")], existing), pod("p", 2000, 10), [])
    assert names(victims_for(result)) == ["guarded"]
    result, _, err = run(
        snapshot_of([node("n1")], existing), pod("p", 2000, 10), [pdb("zk-pdb", "zk", 0)]
    )
    assert names(victims_for(result)) == ["other"]
    assert "PodDisruptionBudget default/zk-pdb protected pod default/guarded on node n1" in str(err)


def test_a_budget_is_best_effort_when_every_node_violates_it() -> None:
    existing = [pod("zk-0", 3000, 1, "n1", labels={"app": "zk"})]
    result, status, err = run(
        snapshot_of([node("n1")], existing), pod("p", 2000, 10), [pdb("zk-pdb", "zk", 0)]
    )
    assert status.is_success() and names(victims_for(result)) == ["zk-0"]
    assert "evicting pod default/zk-0 violates PodDisruptionBudget default/zk-pdb" in str(err)


def test_disruptions_are_spent_pod_by_pod_and_only_in_the_budgets_namespace() -> None:
    # One disruption allowed: the first zk victim is fine, the second violates.
    existing = [
        pod("zk-a", 2000, 1, "n1", labels={"app": "zk"}),
        pod("zk-b", 2000, 2, "n1", labels={"app": "zk"}),
        pod("zk-c", 4000, 1, "n2", labels={"app": "zk"}, namespace="other"),
    ]
    nodes = [node("n1"), node("n2")]
    result, _, err = run(snapshot_of(nodes, existing), pod("p", 4000, 10), [pdb("b", "zk", 1)])
    # n1 needs both zk-a and zk-b gone (1 violation); n2's pod is in another namespace.
    assert result.nominated_node_name == "n2"
    assert "node n1 passed over (1 violation(s))" in str(err)
