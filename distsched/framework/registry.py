"""The in-tree plugin registry: plugin name -> PluginSpec. A plain dict, no import magic.

Plugins named in the default profile but absent here are skipped by the profile loader.
"""

from __future__ import annotations

from types import ModuleType

from distsched.framework.interface import PluginSpec
from distsched.framework.plugins import (
    balanced_allocation,
    default_binder,
    default_preemption,
    dynamic_resources,
    image_locality,
    inter_pod_affinity,
    node_affinity,
    node_name,
    node_ports,
    node_resources_fit,
    node_unschedulable,
    node_volume_limits,
    pod_topology_spread,
    priority_sort,
    scheduling_gates,
    taint_toleration,
    volume_binding,
    volume_restrictions,
    volume_zone,
)


def spec(module: ModuleType) -> PluginSpec:
    """The registry entry of a plugin module (its NAME, new, EVENTS and queueing_hint,
    which only some plugins define)."""
    return PluginSpec(
        module.NAME, module.new, module.EVENTS, getattr(module, "queueing_hint", None)
    )


IN_TREE_REGISTRY: dict[str, PluginSpec] = {
    s.name: s
    for s in (
        spec(scheduling_gates),
        spec(priority_sort),
        spec(node_unschedulable),
        spec(node_name),
        spec(taint_toleration),
        spec(node_affinity),
        spec(node_ports),
        spec(node_resources_fit),
        spec(volume_restrictions),
        spec(node_volume_limits),
        spec(volume_binding),
        spec(volume_zone),
        spec(pod_topology_spread),
        spec(inter_pod_affinity),
        spec(dynamic_resources),
        spec(default_preemption),
        spec(balanced_allocation),
        spec(image_locality),
        spec(default_binder),
    )
}
