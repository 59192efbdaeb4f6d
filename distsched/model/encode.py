"""Pod and Node to Kubernetes v1 JSON (camelCase dicts of plain Python values).

Zero values are left out (like Go's ``omitempty``) except where leaving them out would
change what ``from_dict`` reads back: ``from_dict(to_dict(x)) == x`` for every valid x.
Quantities are strings in canonical form (``"250m"``, ``"1Gi"``).
"""

from __future__ import annotations

import json
from typing import Any

from distsched.model.objects import (
    Affinity,
    Container,
    ContainerPort,
    LabelSelector,
    Node,
    NodeAffinity,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    ObjectMeta,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    ResourceList,
    Taint,
    Toleration,
    TopologySpreadConstraint,
)
from distsched.model.quantity import format_quantity

Json = dict[str, Any]
API_VERSION = "v1"


def pod_to_dict(pod: Pod) -> Json:
    spec = pod.spec
    out_spec: Json = {"containers": [_container(c) for c in spec.containers]}
    if spec.init_containers:
        out_spec["initContainers"] = [_container(c) for c in spec.init_containers]
    out_spec["schedulerName"] = spec.scheduler_name
    if spec.priority is not None:
        out_spec["priority"] = spec.priority
    if spec.priority_class_name:
        out_spec["priorityClassName"] = spec.priority_class_name
    out_spec["preemptionPolicy"] = spec.preemption_policy
    if spec.overhead:
        out_spec["overhead"] = _resources(spec.overhead)
    if spec.node_selector:
        out_spec["nodeSelector"] = dict(spec.node_selector)
    if spec.affinity is not None:
        out_spec["affinity"] = _affinity(spec.affinity)
    if spec.tolerations:
        out_spec["tolerations"] = [_toleration(t) for t in spec.tolerations]
    if spec.topology_spread_constraints:
        out_spec["topologySpreadConstraints"] = [
            _spread(c) for c in spec.topology_spread_constraints
        ]
    if spec.node_name:
        out_spec["nodeName"] = spec.node_name
    if spec.resources is not None:
        out_spec["resources"] = _omit_empty(
            {
                "requests": _resources(spec.resources.requests),
                "limits": _resources(spec.resources.limits),
            }
        )
    if spec.scheduling_gates:
        out_spec["schedulingGates"] = [{"name": g} for g in spec.scheduling_gates]
    if spec.pod_group_name:
        out_spec["schedulingGroup"] = {"podGroupName": spec.pod_group_name}
    for name, text in spec.kept:
        out_spec[name] = json.loads(text)

    status = pod.status
    out_status: Json = {"phase": status.phase}
    if status.conditions:
        out_status["conditions"] = [
            _omit_empty(
                {
                    "type": c.type,
                    "status": c.status,
                    "reason": c.reason,
                    "message": c.message,
                    "lastTransitionTime": c.last_transition_time,
                }
            )
            for c in status.conditions
        ]
    if status.nominated_node_name:
        out_status["nominatedNodeName"] = status.nominated_node_name
    return {
        "apiVersion": API_VERSION,
        "kind": "Pod",
        "metadata": _meta(pod.metadata, namespaced=True),
        "spec": out_spec,
        "status": out_status,
    }


def node_to_dict(node: Node) -> Json:
    out_spec: Json = {}
    if node.spec.unschedulable:
        out_spec["unschedulable"] = True
    if node.spec.taints:
        out_spec["taints"] = [_taint(t) for t in node.spec.taints]
    status = node.status
    out_status: Json = {}
    if status.capacity:
        out_status["capacity"] = _resources(status.capacity)
    if status.allocatable or status.capacity:
        # Present even when empty: an absent allocatable would read back as the capacity.
        out_status["allocatable"] = _resources(status.allocatable)
    if status.conditions:
        out_status["conditions"] = [{"type": c.type, "status": c.status} for c in status.conditions]
    if status.images:
        out_status["images"] = [
            {"names": list(i.names), "sizeBytes": i.size_bytes} for i in status.images
        ]
    return {
        "apiVersion": API_VERSION,
        "kind": "Node",
        "metadata": _meta(node.metadata, namespaced=False),
        "spec": out_spec,
        "status": out_status,
    }


def _omit_empty(values: Json) -> Json:
    return {k: v for k, v in values.items() if v not in ("", None, [], {})}


def _meta(meta: ObjectMeta, *, namespaced: bool) -> Json:
    out: Json = {"name": meta.name}
    if namespaced:
        out["namespace"] = meta.namespace
    out.update(
        _omit_empty(
            {
                "uid": meta.uid,
                "labels": dict(meta.labels),
                "annotations": dict(meta.annotations),
                "creationTimestamp": meta.creation_timestamp,
                "resourceVersion": meta.resource_version,
            }
        )
    )
    return out


def _resources(resources: ResourceList) -> Json:
    return {name: format_quantity(amount, name) for name, amount in resources.items()}


def _container(c: Container) -> Json:
    out: Json = {"name": c.name}
    if c.image:
        out["image"] = c.image
    resources = _omit_empty(
        {"requests": _resources(c.resources.requests), "limits": _resources(c.resources.limits)}
    )
    if resources:
        out["resources"] = resources
    if c.ports:
        out["ports"] = [_port(p) for p in c.ports]
    if c.restart_policy:
        out["restartPolicy"] = c.restart_policy
    return out


def _port(p: ContainerPort) -> Json:
    out: Json = {"containerPort": p.container_port}
    if p.host_port:
        out["hostPort"] = p.host_port
    out["protocol"] = p.protocol
    if p.host_ip:
        out["hostIP"] = p.host_ip
    return out


def _label_selector(s: LabelSelector) -> Json:
    return _omit_empty(
        {
            "matchLabels": dict(s.match_labels),
            "matchExpressions": [
                _omit_empty({"key": e.key, "operator": e.operator, "values": list(e.values)})
                for e in s.match_expressions
            ],
        }
    )


def _node_requirement(r: NodeSelectorRequirement) -> Json:
    return _omit_empty({"key": r.key, "operator": r.operator, "values": list(r.values)})


def _node_selector_term(t: NodeSelectorTerm) -> Json:
    return _omit_empty(
        {
            "matchExpressions": [_node_requirement(r) for r in t.match_expressions],
            "matchFields": [_node_requirement(r) for r in t.match_fields],
        }
    )


def _node_affinity(a: NodeAffinity) -> Json:
    out: Json = {}
    if a.required is not None:
        out["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": [_node_selector_term(t) for t in a.required]
        }
    if a.preferred:
        out["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": p.weight, "preference": _node_selector_term(p.preference)}
            for p in a.preferred
        ]
    return out


def _pod_affinity_term(t: PodAffinityTerm) -> Json:
    out: Json = {"topologyKey": t.topology_key}
    if t.label_selector is not None:
        out["labelSelector"] = _label_selector(t.label_selector)
    if t.namespaces:
        out["namespaces"] = list(t.namespaces)
    if t.namespace_selector is not None:
        out["namespaceSelector"] = _label_selector(t.namespace_selector)
    return out


def _pod_affinity(a: PodAffinity) -> Json:
    out: Json = {}
    if a.required:
        out["requiredDuringSchedulingIgnoredDuringExecution"] = [
            _pod_affinity_term(t) for t in a.required
        ]
    if a.preferred:
        out["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": p.weight, "podAffinityTerm": _pod_affinity_term(p.term)} for p in a.preferred
        ]
    return out


def _affinity(a: Affinity) -> Json:
    out: Json = {}
    if a.node_affinity is not None:
        out["nodeAffinity"] = _node_affinity(a.node_affinity)
    if a.pod_affinity is not None:
        out["podAffinity"] = _pod_affinity(a.pod_affinity)
    if a.pod_anti_affinity is not None:
        out["podAntiAffinity"] = _pod_affinity(a.pod_anti_affinity)
    return out


def _toleration(t: Toleration) -> Json:
    out = _omit_empty({"key": t.key, "operator": t.operator, "value": t.value, "effect": t.effect})
    if t.toleration_seconds is not None:
        out["tolerationSeconds"] = t.toleration_seconds
    return out


def _taint(t: Taint) -> Json:
    return _omit_empty({"key": t.key, "value": t.value, "effect": t.effect})


def _spread(c: TopologySpreadConstraint) -> Json:
    out: Json = {
        "maxSkew": c.max_skew,
        "topologyKey": c.topology_key,
        "whenUnsatisfiable": c.when_unsatisfiable,
    }
    if c.label_selector is not None:
        out["labelSelector"] = _label_selector(c.label_selector)
    if c.min_domains is not None:
        out["minDomains"] = c.min_domains
    if c.match_label_keys:
        out["matchLabelKeys"] = list(c.match_label_keys)
    out["nodeAffinityPolicy"] = c.node_affinity_policy
    out["nodeTaintsPolicy"] = c.node_taints_policy
    return out
