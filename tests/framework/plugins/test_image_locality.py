"""ImageLocality, after kube's image_locality_test (current maxThreshold = 1000MB * containers)."""

from __future__ import annotations

import pytest

from distsched.framework.interface import Handle
from distsched.framework.plugins import image_locality
from distsched.framework.plugins.image_locality import MB, normalized_image_name
from tests.framework.builders import container, make_node, make_pod, run_score, snapshot_of

NODE_40_300_2000 = (
    (("gcr.io/40:latest", "gcr.io/40:v1", "gcr.io/40:v1"), 40 * MB),
    (("gcr.io/300:latest", "gcr.io/300:v1"), 300 * MB),
    (("gcr.io/2000:latest",), 2000 * MB),
)
NODE_250_10 = (
    (("gcr.io/250:latest",), 250 * MB),
    (("gcr.io/10:latest", "gcr.io/10:v1"), 10 * MB),
)


def pod_with(*images: str):
    return make_pod(containers=[container(f"c{i}", image=img) for i, img in enumerate(images)])


def scores(incoming, *, with_empty_node: bool = False):
    nodes = [make_node("m1", images=NODE_40_300_2000), make_node("m2", images=NODE_250_10)]
    if with_empty_node:
        nodes.append(make_node("m3"))
    return run_score(image_locality.new({}, Handle()), incoming, snapshot_of(nodes))


@pytest.mark.parametrize(
    ("name", "images", "empty", "want"),
    [
        # m1: 40MB on 1 of 2 nodes -> 20MB < 23MB -> 0
        # m2: 250MB/2 = 125MB -> 100 * (125 - 23) / (2000 - 23) = 5
        ("two images spread on two nodes", ("gcr.io/40", "gcr.io/250"), False, {"m1": 0, "m2": 5}),
        # m1: (40 + 300)/2 = 170MB -> 100 * (170 - 23) / 1977 = 7
        ("two images on one node", ("gcr.io/40", "gcr.io/300"), False, {"m1": 7, "m2": 0}),
        # m1: 2000/2 = 1000MB -> 100 * (1000 - 23) / 1977 = 49; m2: 10/2 -> 0
        ("large image", ("gcr.io/10", "gcr.io/2000"), False, {"m1": 49, "m2": 0}),
        # 3 nodes: m1 int(2000MB * 1/3) = 699050666 B -> 32
        (
            "spread over three nodes",
            ("gcr.io/10", "gcr.io/2000"),
            True,
            {"m1": 32, "m2": 0, "m3": 0},
        ),
        # one container: threshold 1000MB; 2000MB/2 = 1000MB -> clipped -> 100
        ("exceeding the limit is clipped", ("gcr.io/2000",), False, {"m1": 100, "m2": 0}),
        ("no image anywhere", ("gcr.io/none",), False, {"m1": 0, "m2": 0}),
    ],
)
def test_score(name, images, empty, want):
    assert scores(pod_with(*images), with_empty_node=empty) == want, name


def test_init_containers_count():
    incoming = make_pod(
        containers=[container("c", image="gcr.io/40")],
        init_containers=[container("i", image="gcr.io/300")],
    )
    # (20MB + 150MB) with two containers -> 100 * (170 - 23) / 1977 = 7
    assert scores(incoming) == {"m1": 7, "m2": 0}


@pytest.mark.parametrize(
    ("given", "want"),
    [
        ("root", "root:latest"),
        ("gcr.io:5000/root", "gcr.io:5000/root:latest"),
        ("root:tag", "root:tag"),
        ("root@sha256:" + "a" * 64, "root@sha256:" + "a" * 64),
    ],
)
def test_normalized_image_name(given, want):
    assert normalized_image_name(given) == want
