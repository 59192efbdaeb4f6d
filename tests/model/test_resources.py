"""Effective pod requests, non-zero scoring requests, host ports and priority."""

from __future__ import annotations

from typing import Any

import pytest

from distsched.model import (
    Pod,
    pod_host_ports,
    pod_nonzero_requests,
    pod_priority,
    pod_requests,
)

MI = 1024**2


def container(name: str, requests: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, **extra}
    if requests is not None:
        out["resources"] = {"requests": requests}
    return out


def pod(
    containers: list[dict[str, Any]],
    init: list[dict[str, Any]] | None = None,
    **spec: Any,
) -> Pod:
    data: dict[str, Any] = {"metadata": {"name": "p"}, "spec": {"containers": containers, **spec}}
    if init:
        data["spec"]["initContainers"] = init
    return Pod.from_dict(data)


# (containers, init containers, overhead, expected requests)
Containers = list[dict[str, Any]]
REQUEST_CASES: list[tuple[Containers, Containers, dict[str, Any], dict[str, int]]] = [
    ([container("a")], [], {}, {}),
    (
        [container("a", {"cpu": "100m", "memory": "1Gi"}), container("b", {"cpu": "1"})],
        [],
        {},
        {"cpu": 1100, "memory": 1024 * MI},
    ),
    # an init container bigger than the sum of the regular containers wins
    (
        [container("a", {"cpu": "100m"}), container("b", {"cpu": "200m"})],
        [container("i1", {"cpu": "2"}), container("i2", {"cpu": "500m", "memory": "1Gi"})],
        {},
        {"cpu": 2000, "memory": 1024 * MI},
    ),
    # init containers smaller than the sum do not add
    (
        [container("a", {"cpu": "1", "memory": "2Gi"})],
        [container("i", {"cpu": "500m", "memory": "1Gi"})],
        {},
        {"cpu": 1000, "memory": 2048 * MI},
    ),
    # overhead is added on top of the max
    (
        [container("a", {"cpu": "100m"})],
        [container("i", {"cpu": "1"})],
        {"cpu": "250m", "memory": "120Mi"},
        {"cpu": 1250, "memory": 120 * MI},
    ),
    # extended resources follow the same rules
    (
        [container("a", {"example.com/gpu": 1}), container("b", {"example.com/gpu": 2})],
        [container("i", {"example.com/gpu": 4})],
        {},
        {"example.com/gpu": 4},
    ),
    # a sidecar (restartable init container) runs alongside everything after it
    (
        [container("a", {"cpu": "1"})],
        [
            container("side", {"cpu": "200m"}, restartPolicy="Always"),
            container("init", {"cpu": "1500m"}),
        ],
        {},
        {"cpu": 1700},  # max(1 + 0.2 sidecar, 0.2 sidecar + 1.5 init)
    ),
    (
        [container("a", {"cpu": "1"})],
        [
            container("init", {"cpu": "1500m"}),
            container("side", {"cpu": "200m"}, restartPolicy="Always"),
        ],
        {},
        {"cpu": 1500},  # the sidecar starts after the init container finished
    ),
]


@pytest.mark.parametrize(("containers", "init", "overhead", "expected"), REQUEST_CASES)
def test_pod_requests(
    containers: list[dict[str, Any]],
    init: list[dict[str, Any]],
    overhead: dict[str, Any],
    expected: dict[str, int],
) -> None:
    p = pod(containers, init, **({"overhead": overhead} if overhead else {}))
    assert {k: v for k, v in pod_requests(p).items() if v} == expected


def test_pod_requests_without_overhead() -> None:
    p = pod([container("a", {"cpu": "1"})], overhead={"cpu": "100m"})
    assert pod_requests(p, exclude_overhead=True) == {"cpu": 1000}
    assert pod_requests(p) == {"cpu": 1100}


def test_pod_requests_use_limits_when_requests_are_missing() -> None:
    p = pod([{"name": "a", "resources": {"limits": {"cpu": "2", "memory": "1Gi"}}}])
    assert pod_requests(p) == {"cpu": 2000, "memory": 1024 * MI}


def test_pod_requests_returns_a_fresh_dict() -> None:
    p = pod([container("a", {"cpu": "1"})])
    pod_requests(p)["cpu"] = 5
    assert pod_requests(p) == {"cpu": 1000}
    assert p.spec.containers[0].resources.requests == {"cpu": 1000}


NONZERO_CASES = [
    ([container("a")], [], (100, 200 * MI)),
    ([container("a"), container("b")], [], (200, 400 * MI)),
    ([container("a", {"cpu": "250m"})], [], (250, 200 * MI)),
    ([container("a", {"memory": "1Gi"})], [], (100, 1024 * MI)),
    # an explicit zero is a request: kube keeps it at 0
    ([container("a", {"cpu": "0", "memory": "0"})], [], (0, 0)),
    # init containers get the defaults too, then the max applies
    ([container("a", {"cpu": "1", "memory": "1Mi"})], [container("i")], (1000, 200 * MI)),
]


@pytest.mark.parametrize(("containers", "init", "expected"), NONZERO_CASES)
def test_pod_nonzero_requests(
    containers: list[dict[str, Any]], init: list[dict[str, Any]], expected: tuple[int, int]
) -> None:
    assert pod_nonzero_requests(pod(containers, init)) == expected


def test_nonzero_requests_include_overhead() -> None:
    p = pod([container("a")], overhead={"cpu": "10m", "memory": "1Mi"})
    assert pod_nonzero_requests(p) == (110, 201 * MI)


def test_host_ports() -> None:
    p = pod(
        [
            container(
                "a",
                ports=[
                    {"containerPort": 80, "hostPort": 8080},
                    {"containerPort": 81},  # no host port: not listed
                    {"containerPort": 53, "hostPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1"},
                ],
            ),
            container("b", ports=[{"containerPort": 443, "hostPort": 443, "protocol": "TCP"}]),
        ],
        init=[container("i", ports=[{"containerPort": 9, "hostPort": 9}])],  # not counted
    )
    assert pod_host_ports(p) == [
        ("0.0.0.0", "TCP", 8080),
        ("10.0.0.1", "UDP", 53),
        ("0.0.0.0", "TCP", 443),
    ]


def test_priority() -> None:
    assert pod_priority(pod([container("a")])) == 0
    assert pod_priority(pod([container("a")], priority=-5)) == -5
    assert pod_priority(pod([container("a")], priority=2**31 - 1)) == 2**31 - 1
