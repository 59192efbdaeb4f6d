"""Issue 10, item 8: a configured queueSort plugin other than PrioritySort is refused
(a ConfigError naming file and field, which the roles turn into exit 2), never silently
ignored."""

from __future__ import annotations

import pytest

from distsched.framework.profile import ConfigError, build_profiles, parse_config
from tests.workers import plugins

FIFO = """
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: default-scheduler
    plugins:
      queueSort:
        enabled: [{name: FifoSort}]
        disabled: [{name: PrioritySort}]
"""


def test_a_queue_sort_other_than_priority_sort_is_refused() -> None:
    config = parse_config(FIFO, "fifo.yaml", plugins.WITH_FIFO)
    with pytest.raises(ConfigError) as err:
        build_profiles(config, registry=plugins.WITH_FIFO)
    assert err.value.file == "fifo.yaml"
    assert err.value.field == "profiles[0].plugins.queueSort"
    assert "FifoSort" in str(err.value)


def test_priority_sort_is_accepted() -> None:
    text = FIFO.replace("FifoSort", "PrioritySort").replace(
        "        disabled: [{name: PrioritySort}]\n", ""
    )
    profiles = build_profiles(parse_config(text, "ok.yaml"))
    sort = profiles["default-scheduler"].queue_sort_plugin
    assert sort is not None and sort.name == "PrioritySort"
