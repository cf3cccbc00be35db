"""Monte-Carlo check of unbiasedness on a two-step softmax bandit with a known gradient.

The policy picks a1 in {0,1,2} with softmax(theta1), then a2 in {0,1} with softmax(theta2[a1]).
Reward is Bernoulli(p[a1, a2]). Each sample is a group of K trajectories; the gradient estimate
of the group is (1/K) sum_i sum_t A_{i,t} grad log pi(a_t | h_t). Its Monte-Carlo mean must match
the exact gradient of J = E[R] for unbiased baselines (rloo, value with any fixed V, tether
with a lagged rho) and must not for the group mean, which uses the sample's own reward.

TETHER is checked where a leak would show: one group per batch and no EMA smoothing, so a rho
fitted on its own batch depends strongly on the sample's own returns. A subclass that fits
before computing (the order Le Critique §5.1 forbids) must fail the same check: that keeps the
test's power part of the suite.
"""

import numpy as np
import pytest

from lecritique.advantages import AdvantageBatch, AdvantageEstimator, TetherEstimator, get_estimator

P = np.array([[0.9, 0.2], [0.4, 0.6], [0.1, 0.7]])
THETA1 = np.array([0.3, -0.2, 0.1])
THETA2 = np.array([[0.5, -0.5], [0.0, 0.2], [-0.4, 0.4]])
K = 2
SAMPLES = 60_000


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def exact_gradient():
    pi1, pi2 = softmax(THETA1), softmax(THETA2)
    value_after_a1 = (pi2 * P).sum(axis=1)
    grad1 = pi1 * (value_after_a1 - pi1 @ value_after_a1)
    grad2 = pi1[:, None] * pi2 * (P - value_after_a1[:, None])
    return np.concatenate([grad1, grad2.ravel()])


def score_features(a1, a2):
    """grad log pi for each of the two tokens, as [N, 2, 9] (theta1 then theta2 flattened)."""
    n = a1.size
    pi1, pi2 = softmax(THETA1), softmax(THETA2)
    feats = np.zeros((n, 2, 9))
    feats[:, 0, :3] = np.eye(3)[a1] - pi1
    rows = 3 + a1 * 2
    second = np.eye(2)[a2] - pi2[a1]
    feats[np.arange(n), 1, rows] = second[:, 0]
    feats[np.arange(n), 1, rows + 1] = second[:, 1]
    return feats


def fixed_values(a1):
    # Any function of the history is an admissible baseline: V(h0) = 0.3, V(h1) = arbitrary in a1.
    return np.stack([np.full(a1.size, 0.3), np.array([0.8, 0.1, 0.5])[a1]], axis=1)


def gradient_samples(estimator_name, rng, **options):
    return estimator_gradient_samples(get_estimator(estimator_name, **options), rng)


def estimator_gradient_samples(estimator: AdvantageEstimator, rng, groups_per_batch=500, samples=SAMPLES):
    per_group = []
    for _ in range(samples // groups_per_batch):
        n = groups_per_batch * K
        a1 = rng.choice(3, size=n, p=softmax(THETA1))
        u = rng.random(n)
        a2 = (u > softmax(THETA2)[a1, 0]).astype(int)
        rewards = (rng.random(n) < P[a1, a2]).astype(float)
        batch = AdvantageBatch(
            rewards, np.repeat(np.arange(groups_per_batch), K), np.ones((n, 2)), values=fixed_values(a1)
        )
        advantages = estimator.compute(batch).astype(np.float64)
        estimator.update(batch)  # lagged: the next batch uses what this one fitted
        token_grads = (advantages[:, :, None] * score_features(a1, a2)).sum(axis=1)
        per_group.append(token_grads.reshape(groups_per_batch, K, 9).mean(axis=1))
    return np.concatenate(per_group)


def within_confidence(samples, truth, z=4.5):
    mean = samples.mean(axis=0)
    stderr = samples.std(axis=0, ddof=1) / np.sqrt(samples.shape[0])
    return np.abs(mean - truth) <= z * stderr + 1e-12, mean, stderr


@pytest.mark.parametrize(
    ("name", "options"),
    [("rloo", {}), ("value", {}), ("tether", {"ema_decay": 0.5}), ("gae", {"gamma": 1.0, "lambda_gae": 1.0})],
)
def test_unbiased_estimators_match_the_true_gradient(name, options):
    samples = gradient_samples(name, np.random.default_rng(1), **options)
    ok, mean, stderr = within_confidence(samples, exact_gradient())
    assert ok.all(), f"{name}: mean {mean} vs true {exact_gradient()} (stderr {stderr})"


def test_group_mean_with_own_reward_is_biased():
    truth = exact_gradient()
    samples = gradient_samples("mean", np.random.default_rng(2))
    ok, _, _ = within_confidence(samples, truth)
    assert not ok.all()
    # and the bias is exactly the (K-1)/K shrinkage of eq. 6
    ok_scaled, _, _ = within_confidence(samples, truth * (K - 1) / K)
    assert ok_scaled.all()


class OwnBatchTether(TetherEstimator):
    """The leak Le Critique §5.1 forbids: rho fitted on the batch it is applied to."""

    def compute(self, batch):
        self.update(batch)
        return super().compute(batch)


LEAK_GROUPS_PER_BATCH = 1
LEAK_SAMPLES = 6_000


def tether_lag_samples(estimator_class, seed):
    # No smoothing (d = 0): each batch uses exactly one fitted coefficient, from one group.
    return estimator_gradient_samples(
        estimator_class(ema_decay=0.0), np.random.default_rng(seed), LEAK_GROUPS_PER_BATCH, LEAK_SAMPLES
    )


def test_tether_with_rho_lagged_from_a_one_group_batch_is_unbiased():
    ok, mean, stderr = within_confidence(tether_lag_samples(TetherEstimator, 3), exact_gradient())
    assert ok.all(), f"mean {mean} vs true {exact_gradient()} (stderr {stderr})"


def test_tether_with_rho_fitted_on_its_own_batch_fails_the_same_check():
    ok, _, _ = within_confidence(tether_lag_samples(OwnBatchTether, 3), exact_gradient())
    assert not ok.all()
