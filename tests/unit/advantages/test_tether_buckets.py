"""Token-bucketed TETHER (Le Critique §7.3 eq. 18): bucket edges are fixed response positions.

A bucket must mean the same tokens in every batch: rho_m fitted on positions [m L/M, (m+1) L/M)
of one batch is applied to those positions of the next one, whatever that batch's padded length
and however many environment tokens sit between an episode's turns.
"""

import numpy as np
import pytest

from lecritique.advantages import (
    AdvantageBatch,
    explained_variance,
    explained_variance_per_bucket,
    get_estimator,
    position_buckets,
    response_positions,
)
from lecritique.advantages.metrics import bucket_explained_variance, bucket_explained_variance_moments

REWARDS = np.array([1.0, 0.0])
GROUPS = np.array([0, 0])
LOO = np.array([0.0, 1.0])  # each row's leave-one-out baseline: the other row's reward


def fit_batch():
    """Padded length 8 = L. Positions 0-3: values that track nothing (sum (R - B)(V - B) = 0 with
    V != B, so the fit gives exactly 0); positions 4-7: V = R (the fit gives exactly 1)."""
    useless = np.array([[0.5, -0.5, 0.5, -0.5], [1.5, 0.5, 1.5, 0.5]])
    perfect = np.repeat(REWARDS[:, None], 4, axis=1)
    return AdvantageBatch(REWARDS, GROUPS, np.ones((2, 8)), values=np.hstack([useless, perfect]))


def test_rho_fitted_on_a_position_range_is_applied_to_that_range_in_a_longer_batch():
    estimator = get_estimator("tether", ema_decay=0.0, buckets=2, max_length=8)
    estimator.update(fit_batch())
    np.testing.assert_array_equal(estimator.last_fit, [0.0, 1.0])
    # Next batch, padded to 16: row 0 is a 12-token response (positions 8-11 lie past L and join the
    # last bucket); row 1 is two turns of 2 policy tokens around 3 environment tokens, so its
    # policy tokens sit in columns 0, 1, 5, 6 but at response positions 0-3 (bucket 0).
    mask = np.zeros((2, 16), dtype=bool)
    mask[0, :12] = True
    mask[1, [0, 1, 5, 6]] = True
    values = np.random.default_rng(0).random((2, 16))
    advantages = estimator.compute(AdvantageBatch(REWARDS, GROUPS, mask, values=values))
    group_advantage = np.broadcast_to((REWARDS - LOO)[:, None], values.shape)
    value_advantage = REWARDS[:, None] - values
    expected = np.zeros((2, 16))
    expected[0, :4] = group_advantage[0, :4]  # bucket 0: rho 0, the leave-one-out advantage
    expected[0, 4:12] = value_advantage[0, 4:12]  # bucket 1: rho 1, R - V
    expected[1, [0, 1, 5, 6]] = group_advantage[1, [0, 1, 5, 6]]
    np.testing.assert_allclose(advantages, expected, atol=1e-6)


def test_buckets_above_one_need_the_maximum_response_length():
    with pytest.raises(ValueError, match="buckets > 1 needs max_length"):
        get_estimator("tether", buckets=2)
    assert get_estimator("tether", buckets=1).max_length is None


def test_response_positions_count_policy_tokens_across_turns():
    mask = np.array([[1, 1, 0, 0, 1, 0], [0, 1, 1, 1, 0, 0]], dtype=bool)
    np.testing.assert_array_equal(response_positions(mask)[mask], [0, 1, 2, 0, 1, 2])
    buckets = position_buckets(mask, 3, 3)
    np.testing.assert_array_equal(buckets[mask], [0, 1, 2, 0, 1, 2])
    # positions at or past max_length stay in the last bucket
    np.testing.assert_array_equal(position_buckets(np.ones((1, 6), dtype=bool), 2, 4)[0], [0, 0, 1, 1, 1, 1])


def test_explained_variance_per_bucket_matches_the_masked_global_formula():
    rng = np.random.default_rng(1)
    mask = rng.random((6, 10)) < 0.8
    mask[:, 0] = True
    values, rewards = rng.random((6, 10)), rng.integers(0, 2, 6).astype(float)
    bucket = position_buckets(mask, 3, 9)
    per_bucket = explained_variance_per_bucket(
        bucket_explained_variance_moments(values, rewards, mask, bucket, 3)
    )
    for m in range(3):
        in_bucket = mask & (bucket == m)
        assert per_bucket[m] == pytest.approx(explained_variance(values, rewards, in_bucket))


def test_bucket_explained_variance_uses_the_budget_s_edges():
    batch = fit_batch()  # 8 tokens: buckets 0 (0-3) and 1 (4-7) only; bucket 2 has none
    per_bucket = bucket_explained_variance(batch.values, batch.rewards, batch.mask, 3, 12)
    # Bucket 0: errors R - V are (.5, 1.5, .5, 1.5) and (-1.5, -.5, -1.5, -.5): mean 0,
    # Var(R - V) = 1.25 against Var(R) = 0.25, EV = 1 - 5 = -4. Bucket 1: V = R, EV = 1.
    assert per_bucket[0] == pytest.approx(-4.0)
    assert per_bucket[1] == pytest.approx(1.0)
    assert np.isnan(per_bucket[2])  # undefined (no tokens): the orchestrator leaves it out of the row
    assert get_estimator("tether", buckets=3, max_length=12).Spec(buckets=3).ev_buckets() == 3


def test_bucket_rho_survives_a_restart():
    estimator = get_estimator("tether", ema_decay=0.0, buckets=3, max_length=12)
    estimator.update(fit_batch())
    metrics = estimator.metrics()
    assert {"tether_rho_bucket_0", "tether_rho_bucket_1", "tether_rho_bucket_2"} <= metrics.keys()
    restored = get_estimator("tether", buckets=3, max_length=12)
    restored.load_state_dict(estimator.state_dict())
    assert restored.metrics() == metrics


def test_one_bucket_reports_no_bucket_metrics():
    estimator = get_estimator("tether", ema_decay=0.0)
    estimator.update(fit_batch())
    assert set(estimator.metrics()) == {"tether_rho"}
