"""Score normalization shared by plugins (kube's helper.DefaultNormalizeScore)."""

from __future__ import annotations

import numpy as np

from distsched.framework.interface import MAX_NODE_SCORE


def default_normalize_score(
    scores: np.ndarray, *, reverse: bool, max_priority: int = MAX_NODE_SCORE
) -> np.ndarray:
    """Scale scores so the highest becomes ``max_priority`` (integer division, as kube);
    ``reverse`` turns them into ``max_priority - score``. All zeros stay zeros, or all
    become ``max_priority`` when reversed."""
    if scores.size == 0:
        return scores
    highest = int(scores.max())
    if highest <= 0:
        if reverse:
            return np.full(scores.size, max_priority, dtype=np.int64)
        return scores
    scaled = max_priority * scores // highest
    return max_priority - scaled if reverse else scaled
