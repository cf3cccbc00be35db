"""The oracle-ceiling estimator: unbiased variance terms from Monte-Carlo continuations."""

import math

import numpy as np

from lecritique.critic_eval.ceiling import (
    best_critic,
    bucket_labels,
    ceiling_of,
    ceiling_rows,
    critic_ev,
    variance_terms,
)


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
    rows = ceiling_rows(
        rewards,
        np.zeros(len(values), int),
        {"perfect": values, "flat": np.full(len(values), rewards.mean())},
        [1],
        bootstrap=50,
    )
    overall = rows[0]
    true_ceiling = values.var() / (values.var() + np.mean(values * (1 - values)))
    assert overall["label"] == "all" and math.isclose(overall["ceiling"], true_ceiling, abs_tol=0.03)
    assert math.isclose(overall["critics"]["perfect"]["ev_mse"], overall["ceiling"], abs_tol=0.03)
    assert abs(overall["critics"]["flat"]["ev_mse"]) < 0.01
    assert 0 < overall["ceiling_se"] < 0.05 and overall["mc_noise"] > 0
    assert critic_ev(rewards, values) == overall["critics"]["perfect"]["ev_mse"]


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


def test_the_standard_error_resamples_whole_episodes():
    """States of one episode share its fate: a bootstrap over states treats 8 correlated states as
    8 independent ones and understates the s.e.; one over episodes matches the true spread."""
    rng = np.random.default_rng(3)

    def draw():
        values = np.repeat(rng.beta(0.5, 0.5, size=30), 8)
        return values, bernoulli_states(rng, values, 16)

    truth = np.std([ceiling_of(draw()[1]) for _ in range(300)])
    values, rewards = draw()
    episodes = np.repeat(np.arange(30), 8)
    by_episode = ceiling_rows(rewards, np.zeros(len(values), int), {}, [1], episodes=episodes, bootstrap=300)[
        0
    ]
    by_state = ceiling_rows(rewards, np.zeros(len(values), int), {}, [1], bootstrap=300)[0]
    assert by_episode["se_resampled_by"] == "episode" and by_episode["episodes"] == 30
    assert 0.7 * truth < by_episode["ceiling_se"] < 1.4 * truth
    assert by_state["ceiling_se"] < 0.6 * truth


def test_a_ceiling_whose_interval_reaches_005_gets_no_ratio_and_says_why():
    rng = np.random.default_rng(4)
    values = np.full(200, 0.5)
    values[:10] = 0.6  # nearly nothing for a critic to explain
    rewards = bernoulli_states(rng, values, 4)
    row = ceiling_rows(rewards, np.zeros(200, int), {"v": values}, [1], bootstrap=100)[0]
    assert row["ceiling_low"] <= 0.05
    assert (
        math.isnan(row["critics"]["v"]["fraction"])
        and row["critics"]["v"]["fraction_note"] == "ceiling too small"
    )
    assert math.isfinite(row["critics"]["v"]["ev_mse"])
    assert best_critic(row) == "no verdict: ceiling too small"


def test_constant_returns_give_reasons_and_no_numpy_warning():
    import warnings

    rewards = np.zeros((12, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rows = ceiling_rows(
            rewards, np.arange(12) % 3, {"v": np.full(12, 0.2)}, [1, 2], episodes=np.arange(12) // 4
        )
    overall = rows[0]
    assert "Var(R) = 0" in overall["ceiling_note"]
    assert (
        math.isnan(overall["critics"]["v"]["ev_mse"]) and "Var(R) = 0" in overall["critics"]["v"]["ev_note"]
    )


def test_multi_turn_states_get_rows_per_turn_position_too():
    rng = np.random.default_rng(5)
    values = rng.uniform(0.1, 0.9, 60)
    positions = np.arange(60) % 6
    turn_positions = positions % 3  # two turns of three tokens
    rows = ceiling_rows(
        bernoulli_states(rng, values, 4), positions, {}, [1, 3], turn_positions=turn_positions, bootstrap=20
    )
    assert [(r["axis"], r["label"]) for r in rows] == [
        ("episode", "all"),
        ("episode", "t=0"),
        ("episode", "t=1-2"),
        ("episode", "t>=3"),
        ("turn", "turn t=0"),
        ("turn", "turn t=1-2"),
        ("turn", "turn t>=3"),
    ]
    assert rows[1]["states"] == 10 and rows[4]["states"] == 20
    single = ceiling_rows(
        bernoulli_states(rng, values, 4), positions, {}, [1, 3], turn_positions=positions, bootstrap=20
    )
    assert len(single) == 4, "single-turn: the two positions agree, no turn rows"


def test_the_verdict_names_the_best_critic_its_fraction_and_the_ceiling():
    row = {
        "ceiling": 0.55,
        "ceiling_se": 0.04,
        "critics": {"vf": {"fraction": 0.28}, "pvf": {"fraction": 0.41}},
    }
    assert best_critic(row) == "best: pvf, 0.41 of the ceiling (ceiling 0.55 ± 0.04 s.e.); vf 0.28"
