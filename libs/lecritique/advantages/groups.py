"""Group statistics over ``group_ids`` in O(B), without Python loops over groups."""

from __future__ import annotations

import numpy as np

from lecritique.advantages.batch import FloatArray, IntArray


def group_index(group_ids: IntArray) -> tuple[IntArray, IntArray]:
    """Dense group index of each trajectory and the size of each group."""
    _, inverse, counts = np.unique(group_ids, return_inverse=True, return_counts=True)
    return inverse.astype(np.int64), counts.astype(np.int64)


def group_mean(rewards: FloatArray, group_ids: IntArray) -> FloatArray:
    """Mean return of each trajectory's group (its own return included), shape [B]."""
    index, counts = group_index(group_ids)
    sums = np.bincount(index, weights=rewards)
    means: FloatArray = (sums / counts)[index]
    return means


def group_std(rewards: FloatArray, group_ids: IntArray) -> FloatArray:
    """Population standard deviation of each trajectory's group, shape [B]."""
    index, counts = group_index(group_ids)
    means = np.bincount(index, weights=rewards) / counts
    squares = np.bincount(index, weights=(rewards - means[index]) ** 2) / counts
    stds: FloatArray = np.sqrt(squares)[index]
    return stds


def leave_one_out_mean(rewards: FloatArray, group_ids: IntArray, estimator: str) -> FloatArray:
    """b_i^LOO = (1/(K-1)) sum_{j != i} R_j (Le Critique eq. 4), shape [B]."""
    index, counts = group_index(group_ids)
    if np.any(counts < 2):
        singleton = int(np.unique(group_ids)[np.flatnonzero(counts < 2)[0]])
        raise ValueError(
            f"group_ids: the {estimator!r} estimator needs groups of at least 2 trajectories, "
            f"group {singleton} has 1"
        )
    sums = np.bincount(index, weights=rewards)[index]
    loo: FloatArray = (sums - rewards) / (counts[index] - 1)
    return loo
