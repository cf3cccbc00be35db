"""Every estimator against numbers worked out by hand, including multi-turn masks with gaps."""

import numpy as np
import pytest
import torch

from lecritique.advantages import AdvantageBatch, TetherEstimator, get_estimator

# Two groups of two. Row 1 is a two-turn episode: policy tokens 0-1, environment tokens 2-3
# (mask 0), policy tokens 4-5. Row 3 is short (padding after token 1).
REWARDS = np.array([1.0, 0.0, 1.0, 1.0])
GROUPS = np.array([7, 7, 3, 3])
MASK = np.array(
    [
        [1, 1, 1, 1, 1, 1],
        [1, 1, 0, 0, 1, 1],
        [1, 1, 1, 1, 1, 1],
        [1, 1, 0, 0, 0, 0],
    ]
)
VALUES = np.array(
    [
        [0.5, 0.6, 0.7, 0.8, 0.9, 0.9],
        [0.5, 0.4, 9.0, 9.0, 0.2, 0.1],  # 9.0 sits on environment tokens and must be ignored
        [0.8, 0.8, 0.8, 0.8, 0.8, 0.8],
        [0.6, 0.7, 0.0, 0.0, 0.0, 0.0],
    ]
)


def batch(**overrides):
    fields = {"rewards": REWARDS, "group_ids": GROUPS, "mask": MASK, "values": VALUES} | overrides
    return AdvantageBatch(**fields)


def expect(per_token):
    return np.where(MASK == 1, np.asarray(per_token, dtype=np.float64), 0.0)


def test_mean_is_reward_minus_group_mean():
    adv = get_estimator("mean").compute(batch())
    # group 7: mean 0.5 -> +0.5 / -0.5 ; group 3: mean 1 -> 0
    np.testing.assert_allclose(adv, expect(np.array([[0.5], [-0.5], [0.0], [0.0]]) * np.ones((1, 6))))


def test_mean_normalize_std_divides_by_group_std():
    adv = get_estimator("mean", normalize_std=True).compute(batch())
    # group 7 std = 0.5 -> +-1 (up to eps); group 3 std 0 -> 0, not NaN
    np.testing.assert_allclose(adv[0, 0], 1.0, atol=1e-5)
    np.testing.assert_allclose(adv[1, 0], -1.0, atol=1e-5)
    assert np.all(adv[2:] == 0)


def test_rloo_uses_siblings_only():
    rewards = np.array([1.0, 0.0, 0.0, 1.0, 1.0, 0.0])
    groups = np.array([0, 0, 0, 1, 1, 1])
    mask = np.ones((6, 2))
    adv = get_estimator("rloo").compute(AdvantageBatch(rewards, groups, mask))
    # row 0: siblings (0, 0) -> 1 - 0 = 1 ; row 1: siblings (1, 0) -> 0 - 0.5 ; row 3: (1, 0) -> 0.5
    np.testing.assert_allclose(adv[:, 0], [1.0, -0.5, -0.5, 0.5, 0.5, -1.0])


def test_value_is_reward_minus_value_on_policy_tokens():
    adv = get_estimator("value").compute(batch())
    expected = expect(REWARDS[:, None] - VALUES)
    np.testing.assert_allclose(adv, expected, atol=1e-6)
    assert adv[1, 2] == 0 and adv[1, 3] == 0  # environment tokens carry no advantage


def test_gae_skips_environment_tokens_in_multi_turn_rows():
    # Row 1, gamma 0.5, lambda 1: the policy steps are tokens 0, 1, 4, 5 (values .5 .4 .2 .1),
    # reward 0 at token 5. Advantages: A5 = 0 - .1 = -.1 ; A4 = .5*(.1) - .2 + .5*(-.1) = -.2 ;
    # A1 = .5*.2 - .4 + .5*(-.2) = -.4 ; A0 = .5*.4 - .5 + .5*(-.4) = -.5
    estimator = get_estimator("gae", gamma=0.5, lambda_gae=1.0)
    adv = estimator.compute(batch())
    np.testing.assert_allclose(adv[1], [-0.5, -0.4, 0, 0, -0.2, -0.1], atol=1e-6)
    # Row 3 (short, padding): reward 1 at token 1 -> A1 = 1 - .7 = .3 ; A0 = .5*.7 - .6 + .5*.3 = -.1
    np.testing.assert_allclose(adv[3, :2], [-0.1, 0.3], atol=1e-6)


def test_gae_lambda_zero_is_one_step_td_and_targets_use_lambda_target():
    estimator = get_estimator("gae", gamma=1.0, lambda_gae=0.0, lambda_target=1.0)
    b = batch()
    adv = estimator.compute(b)
    # lambda 0: A_t = V_{t+1} - V_t, last policy token: R - V
    np.testing.assert_allclose(adv[0], [0.1, 0.1, 0.1, 0.1, 0.0, 0.1], atol=1e-6)
    np.testing.assert_allclose(adv[1], [-0.1, -0.2, 0, 0, -0.1, -0.1], atol=1e-6)
    # lambda_target 1: targets are the Monte-Carlo return on every policy token
    targets = estimator.value_targets(b)
    np.testing.assert_allclose(targets, expect(REWARDS[:, None] * np.ones((1, 6))), atol=1e-6)


def test_tether_mixes_loo_and_value_with_previous_rho():
    estimator = get_estimator("tether", ema_decay=0.5)
    b = batch()
    # rho_0 = 0 -> RLOO advantages
    np.testing.assert_allclose(estimator.compute(b), get_estimator("rloo").compute(b))
    estimator.update(b)
    # Fit by hand: B = LOO = [0, 1, 1, 1]; A_B = R - B = [1, -1, 0, 0]; D = V - B on policy tokens.
    a_b = np.array([1.0, -1.0, 0.0, 0.0])[:, None]
    d = VALUES - np.array([0.0, 1.0, 1.0, 1.0])[:, None]
    m = MASK == 1
    rho_hat = np.clip((a_b * d)[np.broadcast_to(m, d.shape)].sum() / (d[m] ** 2).sum(), 0, 1)
    assert estimator.last_fit[0] == pytest.approx(rho_hat)
    assert estimator.rho[0] == pytest.approx(0.5 * rho_hat)
    rho = 0.5 * rho_hat
    baseline = (1 - rho) * np.array([0.0, 1.0, 1.0, 1.0])[:, None] + rho * VALUES
    np.testing.assert_allclose(estimator.compute(b), expect(REWARDS[:, None] - baseline), atol=1e-6)


def check_interior_rho_and_its_ema(tether_class):
    # One group: R = (1, 0), B^LOO = (0, 1), A^B = (1, -1). V = B + D with D = (.5, .5) and (1, -1):
    # sum A^B D = 1 - 0 = 1, sum D^2 = .5 + 2 = 2.5 -> rho_hat = 0.4, inside (0, 1): no clipping.
    tokens = AdvantageBatch(
        np.array([1.0, 0.0]), np.array([0, 0]), np.ones((2, 2)), values=np.array([[0.5, 0.5], [2.0, 0.0]])
    )
    estimator = tether_class(ema_decay=0.75)  # d != 1 - d: a swapped EMA shows
    estimator.update(tokens)
    assert estimator.last_fit[0] == pytest.approx(0.4)
    assert estimator.rho[0] == pytest.approx(0.1)  # 0.75 * 0 + 0.25 * 0.4
    # A = A^B - rho D: (1 - .05, 1 - .05) and (-1 - .1, -1 + .1)
    np.testing.assert_allclose(estimator.compute(tokens), [[0.95, 0.95], [-1.1, -0.9]], atol=1e-6)
    estimator.update(tokens)
    assert estimator.rho[0] == pytest.approx(0.175)  # 0.75 * 0.1 + 0.25 * 0.4


def check_buckets_fit_each_position_range_separately(tether_class):
    rewards = np.array([1.0, 0.0])
    groups = np.array([0, 0])
    mask = np.ones((2, 4))
    # B^LOO = (0, 1). First half of the positions: V - B = (.5, -.5) in both rows, which differs
    # from B but tracks nothing: sum (R - B)(V - B) = 0 with sum (V - B)^2 = 1, so the fit itself
    # gives exactly 0. Second half: V = R, perfect (rho_hat 1).
    values = np.array([[0.5, -0.5, 1.0, 1.0], [1.5, 0.5, 0.0, 0.0]])
    # initial_rho 0.5: a bucket the fit skipped would keep 0.5 (the NaN, no-fit path).
    estimator = tether_class(ema_decay=0.0, buckets=2, max_length=4, initial_rho=0.5)
    estimator.update(AdvantageBatch(rewards, groups, mask, values=values))
    np.testing.assert_array_equal(estimator.last_fit, [0.0, 1.0])
    np.testing.assert_allclose(estimator.rho, [0.0, 1.0])
    assert estimator.metrics()["tether_rho_bucket_1"] == 1.0


class CentredRegressionTether(TetherEstimator):
    """A plausible misreading of eq. 16: rho as Cov(A^B, D) / Var(D), a regression with intercept."""

    def fit(self, batch):
        group_advantage, correction = self._mixture_terms(batch)
        a = np.broadcast_to(group_advantage, correction.shape)[batch.mask]
        d = correction[batch.mask]
        return np.array([np.clip(np.cov(a, d, bias=True)[0, 1] / np.var(d), 0.0, 1.0)])


class ZeroFitIgnoredTether(TetherEstimator):
    """A fit of exactly 0 treated as "no information": a useless critic would keep its old rho."""

    def update(self, batch):
        fitted = self.fit(batch)
        rho_before = self.rho.copy()
        super().update(batch)
        self.rho = np.where(np.nan_to_num(fitted) > 0, self.rho, rho_before)


def test_tether_interior_rho_and_its_ema_by_hand():
    check_interior_rho_and_its_ema(TetherEstimator)


def test_tether_buckets_fit_each_position_range_separately():
    check_buckets_fit_each_position_range_separately(TetherEstimator)


@pytest.mark.parametrize(
    ("check", "broken"),
    [
        (check_interior_rho_and_its_ema, CentredRegressionTether),
        (check_buckets_fit_each_position_range_separately, ZeroFitIgnoredTether),
    ],
)
def test_the_hand_computed_tether_checks_catch_a_broken_fit(check, broken):
    with pytest.raises(AssertionError):
        check(broken)


def test_tether_leaves_rho_unchanged_when_values_equal_the_loo_baseline():
    rewards = np.array([1.0, 0.0])
    values = np.array([[0.0, 0.0], [1.0, 1.0]])  # V == B^LOO exactly -> sum (V - B)^2 = 0
    estimator = get_estimator("tether", initial_rho=0.3)
    estimator.update(AdvantageBatch(rewards, np.array([0, 0]), np.ones((2, 2)), values=values))
    assert estimator.rho[0] == pytest.approx(0.3)


def test_evpo_uses_group_mean_until_critic_explains_variance():
    estimator = get_estimator("evpo")
    b = batch()
    np.testing.assert_allclose(estimator.compute(b), get_estimator("mean").compute(b))
    good_values = np.where(MASK == 1, REWARDS[:, None] * 0.9 + 0.05, 0.0)
    estimator.update(batch(values=good_values))
    assert estimator.previous_explained_variance > 0
    np.testing.assert_allclose(estimator.compute(b), get_estimator("value").compute(b))
    bad_values = np.where(MASK == 1, 1.0 - REWARDS[:, None], 0.0)
    estimator.update(batch(values=bad_values))
    np.testing.assert_allclose(estimator.compute(b), get_estimator("mean").compute(b))


def test_lvrl_anchors_and_normalises_step_advantages():
    # One group of two trajectories, two steps each; step 1 starts at token 2.
    rewards = np.array([1.0, 0.0])
    mask = np.array([[1, 1, 0, 1, 1], [1, 1, 0, 1, 0]])
    step_ids = np.array([[0, 0, 0, 1, 1], [0, 0, 0, 1, 1]])
    values = np.array([[0.1, 0.1, 0.0, 0.8, 0.8], [0.3, 0.3, 0.0, 0.2, 0.0]])
    estimator = get_estimator("lvrl", normalize_std=False, center=False)
    b = AdvantageBatch(rewards, np.array([0, 0]), mask, values=values, step_ids=step_ids)
    # mu_G = 0.5. Row 0 states: [0.5, 0.8, 1.0] -> steps [0.3, 0.2]; row 1: [0.5, 0.2, 0.0] -> [-0.3, -0.2]
    raw = estimator.step_advantages(b)
    np.testing.assert_allclose(raw[0], [0.3, 0.2], atol=1e-9)
    np.testing.assert_allclose(raw[1], [-0.3, -0.2], atol=1e-9)
    adv = estimator.compute(b)
    np.testing.assert_allclose(adv[0], [0.3, 0.3, 0, 0.2, 0.2], atol=1e-6)
    np.testing.assert_allclose(adv[1], [-0.3, -0.3, 0, -0.2, 0], atol=1e-6)
    normalised = get_estimator("lvrl").compute(b)
    std = np.std([0.3, 0.2, -0.3, -0.2])
    np.testing.assert_allclose(normalised[0, 0], 0.3 / std, rtol=1e-4)
    # Consecutive differences telescope: the sum of unnormalised steps is R - mu_G.
    assert raw[0].sum() == pytest.approx(1.0 - 0.5)


def test_torch_in_torch_out():
    b = AdvantageBatch(
        torch.tensor(REWARDS), torch.tensor(GROUPS), torch.tensor(MASK), values=torch.tensor(VALUES)
    )
    adv = get_estimator("value").compute(b)
    assert isinstance(adv, torch.Tensor) and adv.dtype == torch.float32
    np.testing.assert_allclose(adv.numpy(), get_estimator("value").compute(batch()))
