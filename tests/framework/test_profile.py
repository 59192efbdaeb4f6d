"""Scheduler configuration: kube's defaults, YAML profiles and one ConfigError per problem."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from distsched.framework.plugins import node_resources_fit
from distsched.framework.profile import (
    ConfigError,
    build_profiles,
    default_config,
    load_config,
    parse_config,
)
from distsched.framework.registry import IN_TREE_REGISTRY
from distsched.model.objects import DEFAULT_SCHEDULER_NAME
from tests.framework.builders import make_pod
from tests.framework.fakes import FakeScore, spec


def test_defaults_match_kube_for_registered_plugins():
    fw = build_profiles(default_config())[DEFAULT_SCHEDULER_NAME]
    assert fw.queue_sort_plugin is not None and fw.queue_sort_plugin.name == "PrioritySort"
    assert [p.name for p in fw.pre_enqueue_plugins] == ["SchedulingGates"]
    assert [p.name for p in fw.filter_plugins] == [
        "NodeUnschedulable",
        "NodeName",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
        "PodTopologySpread",
        "InterPodAffinity",
    ]
    assert [(p.name, w) for p, w in fw.score_plugins] == [
        ("TaintToleration", 3),
        ("NodeAffinity", 2),
        ("NodeResourcesFit", 1),
        ("PodTopologySpread", 2),
        ("InterPodAffinity", 2),
        ("NodeResourcesBalancedAllocation", 1),
        ("ImageLocality", 1),
    ]
    assert [p.name for p in fw.bind_plugins] == ["DefaultBinder"]
    assert fw.percentage_of_nodes_to_score is None


def test_plugins_registered_later_take_their_default_place():
    registry = dict(IN_TREE_REGISTRY)
    registry["InterPodAffinity"] = spec("InterPodAffinity", lambda a, h: FakeScore(a))
    fw = build_profiles(default_config(registry), registry=registry)[DEFAULT_SCHEDULER_NAME]
    assert [(p.name, w) for p, w in fw.score_plugins][2:5] == [
        ("NodeResourcesFit", 1),
        ("PodTopologySpread", 2),
        ("InterPodAffinity", 2),
    ]


def test_no_file_means_defaults():
    config = load_config(None)
    assert [p.scheduler_name for p in config.profiles] == [DEFAULT_SCHEDULER_NAME]


CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 30
podMaxBackoffSeconds: 20
profiles:
- schedulerName: default-scheduler
  plugins:
    score:
      enabled:
      - {name: NodeResourcesFit, weight: 5}
      disabled:
      - {name: ImageLocality}
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources: [{name: cpu, weight: 1}]
- schedulerName: bin-packer
  percentageOfNodesToScore: 100
  plugins:
    multiPoint:
      disabled: [{name: TaintToleration}]
"""


def test_yaml_profiles(tmp_path: Path):
    path = tmp_path / "sched.yaml"
    path.write_text(CONFIG)
    config = load_config(path)
    assert config.percentage_of_nodes_to_score == 30
    assert (config.pod_initial_backoff_seconds, config.pod_max_backoff_seconds) == (1, 20)
    profiles = build_profiles(config)
    default = profiles[DEFAULT_SCHEDULER_NAME]
    assert [(p.name, w) for p, w in default.score_plugins] == [
        ("NodeResourcesFit", 5),
        ("TaintToleration", 3),
        ("NodeAffinity", 2),
        ("PodTopologySpread", 2),
        ("InterPodAffinity", 2),
        ("NodeResourcesBalancedAllocation", 1),
    ]
    fit = default.plugins["NodeResourcesFit"]
    assert isinstance(fit, node_resources_fit.NodeResourcesFit)
    assert fit.strategy == "MostAllocated" and [r.name for r in fit.resources] == ["cpu"]
    assert default.percentage_of_nodes_to_score == 30
    packer = profiles["bin-packer"]
    assert "TaintToleration" not in packer.plugins
    assert packer.percentage_of_nodes_to_score == 100
    assert profiles.for_pod(make_pod()) is default
    assert profiles.for_pod(make_pod(scheduler_name="bin-packer")) is packer
    assert profiles.for_pod(make_pod(scheduler_name="nobody")) is None


def test_star_disables_every_default_of_a_point():
    text = """
    profiles:
    - plugins:
        score:
          disabled: [{name: "*"}]
          enabled: [{name: ImageLocality, weight: 4}]
    """
    fw = build_profiles(parse_config(textwrap.dedent(text), "s.yaml"))[DEFAULT_SCHEDULER_NAME]
    assert [(p.name, w) for p, w in fw.score_plugins] == [("ImageLocality", 4)]
    assert fw.filter_plugins[0].name == "NodeUnschedulable"


@pytest.mark.parametrize(
    ("text", "field", "reason"),
    [
        ("profiles: [", "", "invalid YAML"),
        ("- a", "", "must be a mapping"),
        ("kind: Pod", "kind", "expected KubeSchedulerConfiguration"),
        ("bogus: 1", "bogus", "unknown field"),
        ("percentageOfNodesToScore: 101", "percentageOfNodesToScore", "[0, 100]"),
        ("podMaxBackoffSeconds: 0", "podMaxBackoffSeconds", "positive"),
        ("extenders: [{urlPrefix: x}]", "extenders", "not supported"),
        ("profiles: {}", "profiles", "must be a list"),
        (
            "profiles: [{schedulerName: a}, {schedulerName: a}]",
            "profiles[1].schedulerName",
            "duplicate",
        ),
        (
            "profiles: [{plugins: {sorting: {}}}]",
            "profiles[0].plugins.sorting",
            "unknown extension point",
        ),
        (
            "profiles: [{plugins: {score: {enabled: [{name: Nope}]}}}]",
            "profiles[0].plugins.score.enabled[0].name",
            "unknown plugin 'Nope'",
        ),
        (
            "profiles: [{plugins: {score: {enabled: [{name: ImageLocality, weight: -1}]}}}]",
            "profiles[0].plugins.score.enabled[0].weight",
            "non-negative",
        ),
        (
            "profiles: [{plugins: {filter: {enabled: [{name: ImageLocality}]}}}]",
            "profiles[0].plugins",
            "does not extend filter",
        ),
        (
            "profiles: [{pluginConfig: [{name: NodeResourcesFit,"
            " args: {scoringStrategy: {type: X}}}]}]",
            "profiles[0].pluginConfig[0].args.scoringStrategy.type",
            "unsupported strategy 'X'",
        ),
        (
            "profiles: [{pluginConfig: [{name: Nope, args: {}}]}]",
            "profiles[0].pluginConfig[0].name",
            "unknown plugin",
        ),
        (
            "profiles: [{pluginConfig: [{name: NodeAffinity}, {name: NodeAffinity}]}]",
            "profiles[0].pluginConfig[1].name",
            "duplicate",
        ),
        (
            "profiles: [{percentageOfNodesToScore: -1}]",
            "profiles[0].percentageOfNodesToScore",
            "[0, 100]",
        ),
    ],
)
def test_config_errors_name_file_and_field(text, field, reason):
    with pytest.raises(ConfigError) as info:
        build_profiles(parse_config(text, "sched.yaml"))
    error = info.value
    assert (error.file, error.field) == ("sched.yaml", field)
    assert reason in error.reason
    assert str(error).startswith("sched.yaml: ")


def test_missing_file(tmp_path: Path):
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "absent.yaml")
    assert info.value.file.endswith("absent.yaml")
