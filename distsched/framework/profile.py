"""Scheduler configuration: a KubeSchedulerConfiguration-shaped YAML file, or kube's defaults.

```yaml
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 0          # 0 = adaptive
profiles:
- schedulerName: default-scheduler
  plugins:
    score:
      enabled: [{name: NodeResourcesFit, weight: 5}]
      disabled: [{name: ImageLocality}]
  pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: MostAllocated}}
```

Each profile's plugin sets are merged onto the default multiPoint set the way kube's v1
defaulting does it (a plugin re-enabled with another weight keeps its default position;
``disabled: [{name: "*"}]`` drops every default of that extension point). Default plugins
missing from the registry are skipped; any other problem raises one ``ConfigError``
naming the file and the field.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from distsched.framework.interface import EXTENSION_POINTS, Handle, PluginArgsError, PluginSpec
from distsched.framework.registry import IN_TREE_REGISTRY
from distsched.framework.runtime import Framework, FrameworkError, PluginRef, PluginSet, Profile
from distsched.model.objects import DEFAULT_SCHEDULER_NAME, Pod

log = logging.getLogger(__name__)

DEFAULTS_SOURCE = "<defaults>"

# kube's v1 default multiPoint plugins, in order (DynamicResources only refuses pods
# with resource claims).
DEFAULT_MULTI_POINT: tuple[PluginRef, ...] = (
    PluginRef("SchedulingGates"),
    PluginRef("PrioritySort"),
    PluginRef("NodeUnschedulable"),
    PluginRef("NodeName"),
    PluginRef("TaintToleration", 3),
    PluginRef("NodeAffinity", 2),
    PluginRef("NodePorts"),
    PluginRef("NodeResourcesFit", 1),
    PluginRef("VolumeRestrictions"),
    PluginRef("NodeVolumeLimits"),
    PluginRef("VolumeBinding"),
    PluginRef("VolumeZone"),
    PluginRef("PodTopologySpread", 2),
    PluginRef("InterPodAffinity", 2),
    PluginRef("DynamicResources"),
    PluginRef("DefaultPreemption"),
    PluginRef("NodeResourcesBalancedAllocation", 1),
    PluginRef("ImageLocality", 1),
    PluginRef("DefaultBinder"),
)

_POINTS = ("multiPoint", *EXTENSION_POINTS)
_TOP_LEVEL = {
    "apiVersion",
    "kind",
    "profiles",
    "percentageOfNodesToScore",
    "podInitialBackoffSeconds",
    "podMaxBackoffSeconds",
    # Accepted for compatibility with kube config files; they mean nothing here.
    "parallelism",
    "leaderElection",
    "clientConnection",
    "enableProfiling",
    "enableContentionProfiling",
    "delayCacheUntilActive",
    "extenders",
}
_PROFILE_FIELDS = {"schedulerName", "plugins", "pluginConfig", "percentageOfNodesToScore"}


QUEUE_SORT = "PrioritySort"
"""The only queueSort plugin: the Redis queue orders activeQ by its rule itself."""


class ConfigError(ValueError):
    """A bad scheduler configuration: ``file``, the offending ``field`` and why."""

    def __init__(self, file: str, field: str, reason: str) -> None:
        where = f"{file}: {field}" if field else file
        super().__init__(f"{where}: {reason}")
        self.file = file
        self.field = field
        self.reason = reason


@dataclass(slots=True)
class SchedulerConfig:
    profiles: list[Profile]
    source: str = DEFAULTS_SOURCE
    percentage_of_nodes_to_score: int | None = None
    pod_initial_backoff_seconds: int = 1
    pod_max_backoff_seconds: int = 10
    # Where each profile's pluginConfig entries sit in the file, for error messages.
    arg_fields: dict[tuple[int, str], str] = field(default_factory=dict)


def default_config(registry: Mapping[str, PluginSpec] = IN_TREE_REGISTRY) -> SchedulerConfig:
    return SchedulerConfig([_profile(DEFAULT_SCHEDULER_NAME, {}, {}, None, registry)])


def load_config(
    path: str | Path | None, registry: Mapping[str, PluginSpec] = IN_TREE_REGISTRY
) -> SchedulerConfig:
    """Read and validate a config file; ``None`` gives kube's defaults."""
    if path is None:
        return default_config(registry)
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(source, "", f"cannot read: {exc.strerror or exc}") from exc
    return parse_config(text, source, registry)


def parse_config(
    text: str, source: str, registry: Mapping[str, PluginSpec] = IN_TREE_REGISTRY
) -> SchedulerConfig:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(source, "", f"invalid YAML: {exc}") from exc
    if data is None:
        return SchedulerConfig(default_config(registry).profiles, source)
    if not isinstance(data, dict):
        raise ConfigError(source, "", "must be a mapping (a KubeSchedulerConfiguration)")
    _no_unknown(data, _TOP_LEVEL, source, "")
    kind = data.get("kind", "KubeSchedulerConfiguration")
    if kind != "KubeSchedulerConfiguration":
        raise ConfigError(source, "kind", f"expected KubeSchedulerConfiguration, got {kind!r}")
    if data.get("extenders"):
        raise ConfigError(source, "extenders", "scheduler extenders are not supported")
    config = SchedulerConfig([], source)
    config.percentage_of_nodes_to_score = _percentage(data, source, "")
    for key, attr in (
        ("podInitialBackoffSeconds", "pod_initial_backoff_seconds"),
        ("podMaxBackoffSeconds", "pod_max_backoff_seconds"),
    ):
        if key in data:
            value = data[key]
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(source, key, "must be a positive integer")
            setattr(config, attr, value)
    if config.pod_max_backoff_seconds < config.pod_initial_backoff_seconds:
        raise ConfigError(
            source, "podMaxBackoffSeconds", "must be at least podInitialBackoffSeconds"
        )
    profiles = data.get("profiles")
    if profiles is not None and not isinstance(profiles, list):
        raise ConfigError(source, "profiles", "must be a list")
    profiles = profiles or [{}]
    names: set[str] = set()
    for i, raw in enumerate(profiles):
        where = f"profiles[{i}]"
        if not isinstance(raw, dict):
            raise ConfigError(source, where, "must be a mapping")
        _no_unknown(raw, _PROFILE_FIELDS, source, where)
        name = raw.get("schedulerName", DEFAULT_SCHEDULER_NAME)
        if not isinstance(name, str) or not name:
            raise ConfigError(source, f"{where}.schedulerName", "must be a non-empty string")
        if name in names:
            raise ConfigError(source, f"{where}.schedulerName", f"duplicate profile {name!r}")
        names.add(name)
        custom = _plugin_sets(raw.get("plugins") or {}, source, f"{where}.plugins", registry)
        args = _plugin_config(raw.get("pluginConfig") or [], source, where, registry, i, config)
        percentage = _percentage(raw, source, where)
        config.profiles.append(_profile(name, custom, args, percentage, registry))
    return config


def _profile(
    name: str,
    custom: dict[str, PluginSet],
    args: dict[str, dict],
    percentage: int | None,
    registry: Mapping[str, PluginSpec],
) -> Profile:
    defaults: list[PluginRef] = []
    for ref in DEFAULT_MULTI_POINT:
        if ref.name in registry:
            defaults.append(ref)
        else:
            log.debug("default plugin %s is not registered; skipped", ref.name)
    plugins = {"multiPoint": _merge(PluginSet(defaults), custom.get("multiPoint"))}
    for point in EXTENSION_POINTS:
        if point in custom:
            plugins[point] = _merge(PluginSet(), custom[point])
    return Profile(name, plugins, args, percentage)


def _merge(default: PluginSet, custom: PluginSet | None) -> PluginSet:
    """kube's mergePluginSet: custom re-enables replace defaults in place, others append."""
    if custom is None:
        return PluginSet(list(default.enabled), list(default.disabled))
    disabled = set(custom.disabled) | set(default.disabled)
    by_name = {ref.name: i for i, ref in enumerate(custom.enabled)}
    replaced: set[int] = set()
    enabled: list[PluginRef] = []
    if "*" not in disabled:
        for ref in default.enabled:
            if ref.name in disabled:
                continue
            if ref.name in by_name:
                replaced.add(by_name[ref.name])
                ref = custom.enabled[by_name[ref.name]]
            enabled.append(ref)
    enabled.extend(ref for i, ref in enumerate(custom.enabled) if i not in replaced)
    return PluginSet(enabled, [*custom.disabled, *default.disabled])


def _plugin_sets(
    data: Any, source: str, where: str, registry: Mapping[str, PluginSpec]
) -> dict[str, PluginSet]:
    if not isinstance(data, dict):
        raise ConfigError(source, where, "must be a mapping of extension points")
    sets: dict[str, PluginSet] = {}
    for point, raw in data.items():
        here = f"{where}.{point}"
        if point not in _POINTS:
            raise ConfigError(source, here, "unknown extension point")
        if raw is None:
            continue
        if not isinstance(raw, dict):
            raise ConfigError(source, here, "must be a mapping with enabled/disabled")
        _no_unknown(raw, {"enabled", "disabled"}, source, here)
        plugin_set = PluginSet()
        for j, item in enumerate(_items(raw.get("enabled"), source, f"{here}.enabled")):
            item_where = f"{here}.enabled[{j}]"
            name = _name(item, source, item_where)
            if name not in registry:
                raise ConfigError(source, f"{item_where}.name", f"unknown plugin {name!r}")
            weight = item.get("weight", 0)
            if not isinstance(weight, int) or isinstance(weight, bool) or weight < 0:
                raise ConfigError(source, f"{item_where}.weight", "must be a non-negative integer")
            plugin_set.enabled.append(PluginRef(name, weight))
        for j, item in enumerate(_items(raw.get("disabled"), source, f"{here}.disabled")):
            plugin_set.disabled.append(_name(item, source, f"{here}.disabled[{j}]"))
        sets[point] = plugin_set
    return sets


def _plugin_config(
    data: Any,
    source: str,
    where: str,
    registry: Mapping[str, PluginSpec],
    profile_index: int,
    config: SchedulerConfig,
) -> dict[str, dict]:
    if not isinstance(data, list):
        raise ConfigError(source, f"{where}.pluginConfig", "must be a list")
    args: dict[str, dict] = {}
    for j, item in enumerate(data):
        here = f"{where}.pluginConfig[{j}]"
        name = _name(item, source, here)
        _no_unknown(item, {"name", "args"}, source, here)
        if name not in registry:
            raise ConfigError(source, f"{here}.name", f"unknown plugin {name!r}")
        if name in args:
            raise ConfigError(source, f"{here}.name", f"duplicate pluginConfig for {name!r}")
        value = item.get("args") or {}
        if not isinstance(value, dict):
            raise ConfigError(source, f"{here}.args", "must be a mapping")
        value = {k: v for k, v in value.items() if k not in ("apiVersion", "kind")}
        args[name] = value
        config.arg_fields[(profile_index, name)] = f"{here}.args"
    return args


def _items(data: Any, source: str, where: str) -> list[Any]:
    if data is None:
        return []
    if not isinstance(data, list):
        raise ConfigError(source, where, "must be a list")
    return data


def _name(item: Any, source: str, where: str) -> str:
    if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
        raise ConfigError(source, f"{where}.name", "must be a non-empty string")
    return item["name"]


def _percentage(data: dict, source: str, where: str) -> int | None:
    if "percentageOfNodesToScore" not in data:
        return None
    value = data["percentageOfNodesToScore"]
    here = f"{where}.percentageOfNodesToScore" if where else "percentageOfNodesToScore"
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 100:
        raise ConfigError(source, here, "must be an integer in [0, 100]")
    return value


def _no_unknown(data: dict, known: set[str], source: str, where: str) -> None:
    for key in data:
        if key not in known:
            raise ConfigError(source, f"{where}.{key}" if where else str(key), "unknown field")


# ---------------------------------------------------------------------------- frameworks
class Profiles(Mapping[str, Framework]):
    """The frameworks of one worker, by scheduler name, and the one Handle they share."""

    def __init__(self, frameworks: dict[str, Framework], handle: Handle) -> None:
        self._frameworks = frameworks
        self.handle = handle

    def __getitem__(self, name: str) -> Framework:
        return self._frameworks[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._frameworks)

    def __len__(self) -> int:
        return len(self._frameworks)

    def for_pod(self, pod: Pod) -> Framework | None:
        """The framework of ``pod.spec.schedulerName``; None if no profile has that name."""
        return self._frameworks.get(pod.spec.scheduler_name)


def build_profiles(
    config: SchedulerConfig,
    *,
    registry: Mapping[str, PluginSpec] = IN_TREE_REGISTRY,
    handle: Handle | None = None,
    rng: random.Random | None = None,
) -> Profiles:
    """Instantiate every profile's plugins, all with ``handle`` (a new one by default: its
    own Listers); bad args become a ConfigError."""
    handle = handle if handle is not None else Handle()
    frameworks: dict[str, Framework] = {}
    for i, profile in enumerate(config.profiles):
        try:
            frameworks[profile.scheduler_name] = Framework(
                profile,
                registry,
                handle=handle,
                rng=rng,
                percentage_of_nodes_to_score=config.percentage_of_nodes_to_score,
            )
        except PluginArgsError as exc:
            plugin = exc.plugin
            base = config.arg_fields.get((i, plugin), f"profiles[{i}].pluginConfig[{plugin}].args")
            where = f"{base}.{exc.field}" if exc.field else base
            raise ConfigError(config.source, where, exc.message) from exc
        except FrameworkError as exc:
            raise ConfigError(config.source, f"profiles[{i}].plugins", str(exc)) from exc
        sort = frameworks[profile.scheduler_name].queue_sort_plugin
        if sort is not None and sort.name != QUEUE_SORT:
            raise ConfigError(
                config.source,
                f"profiles[{i}].plugins.queueSort",
                f"{sort.name!r} is not supported: activeQ's order is fixed in Redis "
                f"({QUEUE_SORT}: priority, then queue time)",
            )
    return Profiles(frameworks, handle)
