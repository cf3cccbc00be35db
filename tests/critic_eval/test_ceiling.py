"""The oracle-ceiling estimator: unbiased variance terms from Monte-Carlo continuations."""

import math

import numpy as np

from lecritique.critic_eval.ceiling import bucket_labels, ceiling_rows, critic_ev, variance_terms


def bernoulli_states(rng, values, k):
    return (rng.random((len(values), k)) < values[:, None]).astype(float)


def test_variance_terms_are_unbiased_where_naive_between_variance_is_not():
    rng = np.random.default_rng(0)
    values = rng.uniform(0.2, 0.8, size=40)
    true_between = values.var(ddof=1)  # the states are fixed: Var over them of E[R|s]
    true_within = float(np.mean(values * (1 - values)))
    k = 4
    estimates = np.array([variance_terms(bernoulli_states(rng, values, k))[:2] for _ in range(4000)])
    naive = np.mean([bernoulli_states(rng, values, k).mean(axis=1).var(ddof=1) for _ in range(2000)])
    assert math.isclose(estimates[:, 0].mean(), true_between, rel_tol=0.06)
    assert math.isclose(estimates[:, 1].mean(), true_within, rel_tol=0.02)
    # Without the within/K correction the MC noise inflates the explainable variance a lot here.
    assert naive > true_between + 0.8 * true_within / k


def test_the_perfect_critic_reaches_the_ceiling_and_a_constant_one_nothing():
    rng = np.random.default_rng(1)
    values = rng.choice([0.05, 0.5, 0.95], size=3000)
    rewards = bernoulli_states(rng, values, 8)
    rows = ceiling_rows(rewards, np.zeros(len(values), int), {"perfect": values, "flat": np.full(len(values), rewards.mean())}, [1], bootstrap=50)
    overall = rows[0]
    true_ceiling = values.var() / (values.var() + np.mean(values * (1 - values)))
    assert overall["label"] == "all" and math.isclose(overall["ceiling"], true_ceiling, abs_tol=0.03)
    assert math.isclose(overall["critics"]["perfect"]["ev"], overall["ceiling"], abs_tol=0.03)
    assert abs(overall["critics"]["flat"]["ev"]) < 0.01
    assert 0 < overall["ceiling_se"] < 0.05 and overall["mc_noise"] > 0
    assert critic_ev(rewards, values) == overall["critics"]["perfect"]["ev"]


def test_rows_per_position_bucket():
    rng = np.random.default_rng(2)
    positions = np.array([0] * 50 + [1] * 30 + [5] * 20)
    # Decided after the first token: the ceiling inside the answer is higher than at the prompt.
    values = np.concatenate([np.full(50, 0.5), rng.choice([0.0, 1.0], 30), rng.choice([0.1, 0.9], 20)])
    rows = ceiling_rows(bernoulli_states(rng, values, 6), positions, {"v": values}, [1, 3], bootstrap=50)
    assert [r["label"] for r in rows] == ["all", "t=0", "t=1-2", "t>=3"]
    assert [r["states"] for r in rows] == [100, 50, 30, 20]
    assert abs(rows[1]["ceiling"]) < 0.15 and rows[2]["ceiling"] > 0.9
    assert bucket_labels([1, 2]) == ["t=0", "t=1", "t>=2"]
