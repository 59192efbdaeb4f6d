"""ImageLocality: favour nodes that already have the pod's container images (Score).

Each image present on a node adds its size scaled by the share of nodes having it (so an
image everywhere does not pull every pod to one node); the sum is mapped linearly from
[23 MiB, 1000 MiB * containers] onto [0, 100].
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from distsched.framework.cycle_state import CycleState
from distsched.framework.events import ClusterEvent
from distsched.framework.interface import MAX_NODE_SCORE, Handle, ScorePlugin, SignPlugin
from distsched.framework.podinfo import PodInfo
from distsched.framework.snapshot import Snapshot
from distsched.model.objects import Pod

NAME = "ImageLocality"
EVENTS: tuple[ClusterEvent, ...] = ()

MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB


def normalized_image_name(name: str) -> str:
    """Append ``:latest`` when the image names no tag (the last ':' is not after the last '/')."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


class ImageLocality(ScorePlugin, SignPlugin):
    name = NAME
    scores_in_range = True

    def sign_pod(self, pod: Pod, info: PodInfo, snapshot: Snapshot) -> Hashable | None:
        # A node's score also depends on how many nodes have each image (the spread) and
        # on the node count: cluster-wide facts, so they are part of the fragment.
        images = []
        found = False
        for container in (*pod.spec.init_containers, *pod.spec.containers):
            image = normalized_image_name(container.image)
            having = snapshot.image_num_nodes(image)
            found = found or having > 0
            images.append((image, having))
        if not found:
            return len(images)  # no image on any node: every node scores 0
        return tuple(images), snapshot.num_nodes

    def score(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, indices: np.ndarray
    ) -> np.ndarray:
        containers = (*pod.spec.init_containers, *pod.spec.containers)
        total_nodes = snapshot.num_nodes
        sums = np.zeros(indices.size, dtype=np.int64)
        found = False
        for container in containers:
            image = normalized_image_name(container.image)
            having = snapshot.image_num_nodes(image)
            if having == 0:
                continue
            spread = having / total_nodes
            sizes = snapshot.image_sizes(image)[indices]
            sums += (sizes.astype(np.float64) * spread).astype(np.int64)
            found = True
        if not found:  # no image of the pod is on any node: every node scores 0
            return sums
        return calculate_priority(sums, len(containers))


def calculate_priority(sums: np.ndarray, num_containers: int) -> np.ndarray:
    max_threshold = MAX_CONTAINER_THRESHOLD * num_containers
    if max_threshold <= MIN_THRESHOLD:
        return np.zeros(sums.size, dtype=np.int64)
    clipped = np.clip(sums, MIN_THRESHOLD, max_threshold)
    return MAX_NODE_SCORE * (clipped - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)


def new(args: dict[str, Any], handle: Handle) -> ImageLocality:
    return ImageLocality()
