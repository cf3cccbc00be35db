"""Why TETHER's rho can rise while the critic's explained variance is negative (issue 41).

rho is the regression coefficient of R - B on V - B (B: the leave-one-out group mean), fitted per
batch: whether the critic's deviation from its peers' mean points the right way. EV is
1 - Var(R - V) / Var(R): how close V is to R. A critic that points the right way a little, with
much noise of its own, has both a positive rho and a negative EV (docs/estimators.md)."""

import numpy as np

from lecritique.advantages import AdvantageBatch
from lecritique.advantages.metrics import explained_variance
from lecritique.advantages.tether import TetherEstimator


def test_a_noisy_critic_that_points_the_right_way_gets_a_positive_rho_and_a_negative_ev():
    rng = np.random.default_rng(0)
    groups, k, tokens = 64, 8, 6
    success = rng.uniform(0.1, 0.9, groups)
    rewards = (rng.random((groups, k)) < success[:, None]).astype(float).ravel()
    group_ids = np.repeat(np.arange(groups), k)
    totals = np.bincount(group_ids, weights=rewards)[group_ids]
    loo = (totals - rewards) / (k - 1)
    values = loo + 0.2 * (rewards - loo) + rng.normal(0.0, 0.45, rewards.size)
    values = np.repeat(values[:, None], tokens, axis=1)
    mask = np.ones_like(values, dtype=bool)

    ev = explained_variance(values, rewards, mask)
    rho = TetherEstimator(initial_rho=0.0).fit(AdvantageBatch(rewards, group_ids, mask, values))
    assert ev < -0.2, ev
    assert 0.1 < rho[0] < 0.3, rho
    # The regression by hand: cov(R - B, V - B) / var(V - B) over tokens (clipped to [0, 1]).
    deviation, target = values[:, 0] - loo, rewards - loo
    assert np.isclose(rho[0], (deviation * target).sum() / (deviation**2).sum())
