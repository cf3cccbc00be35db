"""Trajectories become one padded AdvantageBatch, in one place (orchestrator, value trainer, LVOPD)."""

import numpy as np
import pytest

from lecritique.advantages import AdvantageBatch, GAEEstimator
from lecritique.advantages.targets import critic_targets
from lecritique.trajectory import Trajectory


def trajectory(name, group, mask, reward, values=None):
    n = len(mask)
    return Trajectory(
        trajectory_id=name,
        task_id="t",
        group_id=group,
        prompt_ids=np.array([1]),
        token_ids=np.arange(n),
        policy_mask=np.array(mask, dtype=bool),
        logprobs=np.zeros(n),
        step_ids=np.arange(n) // 2,
        reward=reward,
        policy_version=0,
        values=None if values is None else np.array(values, dtype=np.float32),
    )


def test_rows_are_right_padded_with_masks_steps_groups_and_values():
    batch = AdvantageBatch.from_trajectories(
        [
            trajectory("a", 3, [1, 1, 0, 1], 1.0, [0.5, 0.5, 0.0, 0.25]),
            trajectory("b", 7, [1, 1], 0.0, [0.75, 0.5]),
        ]
    )
    np.testing.assert_array_equal(batch.mask, [[1, 1, 0, 1], [1, 1, 0, 0]])
    np.testing.assert_array_equal(batch.step_ids, [[0, 0, 1, 1], [0, 0, 0, 0]])
    np.testing.assert_array_equal(batch.group_ids, [3, 7])
    np.testing.assert_array_equal(batch.rewards, [1.0, 0.0])
    np.testing.assert_array_equal(batch.values, [[0.5, 0.5, 0.0, 0.25], [0.75, 0.5, 0.0, 0.0]])


def test_values_are_optional_but_never_half_present():
    assert AdvantageBatch.from_trajectories([trajectory("a", 0, [1], 1.0)]).values is None
    with pytest.raises(ValueError, match="'b'.*no values"):
        AdvantageBatch.from_trajectories([trajectory("a", 0, [1], 1.0, [0.5]), trajectory("b", 0, [1], 0.0)])
    with pytest.raises(ValueError, match="'a'.*no values: GAE targets need"):
        AdvantageBatch.from_trajectories([trajectory("a", 0, [1], 1.0)], values_needed_by="GAE targets")


def test_critic_targets_are_lambda_returns_per_trajectory_and_none_for_monte_carlo():
    trajectories = [
        trajectory("a", 0, [1, 1, 1], 1.0, [0.2, 0.4, 0.8]),
        trajectory("b", 1, [1, 1], 0.0, [0.6, 0.3]),
    ]
    assert critic_targets(trajectories, 1.0) is None
    targets = critic_targets(trajectories, 0.5)
    expected = GAEEstimator(lambda_target=0.5).value_targets(AdvantageBatch.from_trajectories(trajectories))
    assert [t.shape for t in targets] == [(3,), (2,)]
    np.testing.assert_allclose(targets[0], expected[0])
    np.testing.assert_allclose(targets[1], expected[1, :2])
    with pytest.raises(ValueError, match="no values"):
        critic_targets([trajectory("c", 0, [1], 1.0)], 0.5)
