"""The critic's regression targets for a batch of evaluated trajectories."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from lecritique.advantages.batch import AdvantageBatch
from lecritique.advantages.estimators import GAEEstimator

if TYPE_CHECKING:
    from lecritique.trajectory import Trajectory


def critic_targets(trajectories: Sequence[Trajectory], lambda_target: float) -> list[npt.NDArray[Any]] | None:
    """Per-token targets of each trajectory: GAE lambda-returns R^lambda = V + A^lambda (eq. 10)
    from the values the evaluator stored, discounted with gamma = 1; None for ``lambda_target``
    = 1, where the targets are the Monte-Carlo returns (the reward on every policy token)."""
    if lambda_target >= 1.0:
        return None
    batch = AdvantageBatch.from_trajectories(trajectories, values_needed_by="GAE targets")
    targets: npt.NDArray[np.float32] = GAEEstimator(lambda_target=lambda_target).value_targets(batch)
    return [targets[row, : len(t.token_ids)] for row, t in enumerate(trajectories)]
