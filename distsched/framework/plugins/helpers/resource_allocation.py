"""Scoring on requested vs allocatable resources (kube's resourceAllocationScorer).

Two flavours of "requested" exist: NodeResourcesFit scores with the non-zero requests
(a container without cpu/memory requests counts 100m/200Mi) so request-less pods spread,
while BalancedAllocation uses the real requests. Extended resources take part only when
the pod requests them; a resource with allocatable 0 on a node is left out for that node.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from distsched.framework.interface import PluginArgsError
from distsched.framework.podinfo import CPU, EPHEMERAL_STORAGE, MEMORY, PodInfo
from distsched.framework.snapshot import CPU_COL, MEMORY_COL, Snapshot

_STANDARD = frozenset({CPU, MEMORY, EPHEMERAL_STORAGE})


@dataclass(frozen=True, slots=True)
class ResourceSpec:
    name: str
    weight: int = 1


DEFAULT_RESOURCES = (ResourceSpec(CPU, 1), ResourceSpec(MEMORY, 1))


def is_scalar(resource: str) -> bool:
    """Anything but cpu, memory and ephemeral-storage (extended resources, hugepages)."""
    return resource not in _STANDARD


def pod_request_list(
    info: PodInfo, resources: tuple[ResourceSpec, ...], *, use_requested: bool
) -> list[int]:
    """The pod's request for each scored resource; cpu/memory non-zero unless
    ``use_requested``."""
    out = []
    for spec in resources:
        if not use_requested and spec.name == CPU:
            out.append(info.nonzero_cpu)
        elif not use_requested and spec.name == MEMORY:
            out.append(info.nonzero_memory)
        else:
            out.append(info.requests.get(spec.name, 0))
    return out


class ResourceColumn(NamedTuple):
    allocatable: np.ndarray  # over the scored nodes
    requested: np.ndarray  # already including the pod's request
    complete: bool  # every node in the snapshot has allocatable > 0


def allocatable_and_requested(
    snapshot: Snapshot,
    indices: np.ndarray,
    resources: tuple[ResourceSpec, ...],
    pod_requests: list[int],
    *,
    use_requested: bool,
) -> list[ResourceColumn | None]:
    """Per scored resource: allocatable and requested (pod included) over ``indices``, or
    None when the resource takes no part for any node (unknown, or a scalar the pod does
    not request). Nodes with allocatable 0 are to be skipped by the caller."""
    out: list[ResourceColumn | None] = []
    for spec, pod_request in zip(resources, pod_requests, strict=True):
        if pod_request == 0 and is_scalar(spec.name):
            out.append(None)
            continue
        col = snapshot.resource_index.get(spec.name)
        if col is None:
            out.append(None)
            continue
        allocatable = snapshot.allocatable[:, col][indices]
        if not use_requested and col in (CPU_COL, MEMORY_COL):
            requested = snapshot.nonzero_requested[:, col][indices]
        else:
            requested = snapshot.requested[:, col][indices]
        if pod_request:
            requested = requested + pod_request
        out.append(ResourceColumn(allocatable, requested, snapshot.all_nodes_have(col)))
    return out


def parse_resources(data: Any, field: str) -> tuple[ResourceSpec, ...]:
    if not isinstance(data, list) or not data:
        raise PluginArgsError(field, "must be a non-empty list")
    specs: list[ResourceSpec] = []
    for i, item in enumerate(data):
        if not isinstance(item, Mapping):
            raise PluginArgsError(f"{field}[{i}]", "must be a mapping")
        name = item.get("name")
        weight = item.get("weight", 1)
        if not isinstance(name, str) or not name:
            raise PluginArgsError(f"{field}[{i}].name", "must be a non-empty string")
        if not isinstance(weight, int) or isinstance(weight, bool) or not 1 <= weight <= 100:
            raise PluginArgsError(f"{field}[{i}].weight", "must be an integer in [1, 100]")
        if any(s.name == name for s in specs):
            raise PluginArgsError(f"{field}[{i}].name", f"duplicate resource {name!r}")
        specs.append(ResourceSpec(name, weight))
    return tuple(specs)


# ---------------------------------------------------------------------------- scorers
def least_allocated(columns: list[ResourceColumn | None], weights: list[int], n: int) -> np.ndarray:
    """sum(w * (alloc - req) * 100 // alloc) // sum(w) over resources with alloc > 0;
    a resource requested beyond its allocatable scores 0."""
    return _weighted(columns, weights, n, _least_score)


def most_allocated(columns: list[ResourceColumn | None], weights: list[int], n: int) -> np.ndarray:
    """sum(w * min(req, alloc) * 100 // alloc) // sum(w) over resources with alloc > 0."""
    return _weighted(columns, weights, n, _most_score)


def _least_score(allocatable: np.ndarray, requested: np.ndarray, safe: np.ndarray) -> np.ndarray:
    return np.maximum(allocatable - requested, 0) * 100 // safe


def _most_score(allocatable: np.ndarray, requested: np.ndarray, safe: np.ndarray) -> np.ndarray:
    return np.minimum(requested, allocatable) * 100 // safe


def _weighted(
    columns: list[ResourceColumn | None],
    weights: list[int],
    n: int,
    per_resource: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray],
) -> np.ndarray:
    total: np.ndarray | None = None
    weight_sum: np.ndarray | int = 0
    for column, weight in zip(columns, weights, strict=True):
        if column is None:
            continue
        allocatable, requested, complete = column
        if complete:
            score = per_resource(allocatable, requested, allocatable)
            if weight != 1:
                score *= weight
            weight_sum = weight_sum + weight
        else:
            present = allocatable > 0
            score = per_resource(allocatable, requested, np.where(present, allocatable, 1))
            score = np.where(present, score * weight, 0)
            weight_sum = weight_sum + np.where(present, weight, 0)
        if total is None:
            total = score
        else:
            total += score
    if total is None:
        return np.zeros(n, dtype=np.int64)
    if isinstance(weight_sum, int):
        if weight_sum == 1:
            return total
        if weight_sum == 2:
            return total >> 1  # non-negative: same as // 2, much cheaper
        return total // weight_sum
    return np.where(weight_sum > 0, total // np.maximum(weight_sum, 1), 0)


MAX_UTILIZATION = 100
MAX_CUSTOM_PRIORITY_SCORE = 10


def parse_shape(data: Any, field: str) -> tuple[tuple[int, int], ...]:
    """RequestedToCapacityRatio shape: strictly increasing utilization in [0, 100],
    score in [0, 10]; returned with scores scaled to [0, 100]."""
    if not isinstance(data, list) or not data:
        raise PluginArgsError(field, "must be a non-empty list")
    points: list[tuple[int, int]] = []
    for i, item in enumerate(data):
        if not isinstance(item, Mapping):
            raise PluginArgsError(f"{field}[{i}]", "must be a mapping")
        utilization, score = item.get("utilization"), item.get("score")
        if not isinstance(utilization, int) or not 0 <= utilization <= MAX_UTILIZATION:
            raise PluginArgsError(f"{field}[{i}].utilization", "must be an integer in [0, 100]")
        if points and utilization <= points[-1][0]:
            raise PluginArgsError(f"{field}[{i}].utilization", "values must be sorted increasingly")
        if not isinstance(score, int) or not 0 <= score <= MAX_CUSTOM_PRIORITY_SCORE:
            raise PluginArgsError(f"{field}[{i}].score", "must be an integer in [0, 10]")
        points.append((utilization, score * (100 // MAX_CUSTOM_PRIORITY_SCORE)))
    return tuple(points)


def _go_div(numerator: np.ndarray, denominator: int) -> np.ndarray:
    """Integer division truncating toward zero, as Go's ``/`` (denominator > 0)."""
    return np.sign(numerator) * (np.abs(numerator) // denominator)


def broken_linear(shape: tuple[tuple[int, int], ...], p: np.ndarray) -> np.ndarray:
    """kube's BuildBrokenLinearFunction evaluated on utilizations ``p`` (0..100)."""
    out = np.full(p.size, shape[-1][1], dtype=np.int64)
    done = np.zeros(p.size, dtype=bool)
    for i, (utilization, score) in enumerate(shape):
        here = ~done & (p <= utilization)
        if i == 0:
            out[here] = score
        else:
            u0, s0 = shape[i - 1]
            out[here] = s0 + _go_div((score - s0) * (p[here] - u0), utilization - u0)
        done |= here
    return out


def requested_to_capacity_ratio(
    columns: list[ResourceColumn | None],
    weights: list[int],
    n: int,
    shape: tuple[tuple[int, int], ...],
) -> np.ndarray:
    """Weighted mean (rounded) of the shape's value at each resource's utilization;
    resources scoring 0 do not count towards the weight sum."""
    total = np.zeros(n, dtype=np.int64)
    weight_sum = np.zeros(n, dtype=np.int64)
    for column, weight in zip(columns, weights, strict=True):
        if column is None:
            continue
        allocatable, requested, _ = column
        present = allocatable > 0
        safe = np.where(present, allocatable, 1)
        utilization = np.where(
            requested >= allocatable,
            MAX_UTILIZATION,
            np.maximum(requested, 0) * MAX_UTILIZATION // safe,
        )
        score = broken_linear(shape, utilization)
        counted = present & (score > 0)
        total += np.where(counted, score * weight, 0)
        weight_sum += np.where(counted, weight, 0)
    out = np.zeros(n, dtype=np.int64)
    has = weight_sum > 0
    # Go's math.Round rounds halves away from zero; values here are non-negative.
    out[has] = np.floor(total[has] / weight_sum[has] + 0.5).astype(np.int64)
    return out
