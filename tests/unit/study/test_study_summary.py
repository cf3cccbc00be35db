"""Per-run figures, mean ± std across seeds, and paired differences with their intervals."""

import math

import numpy as np

from lecritique.study.summary import (
    aggregate,
    curve,
    holm,
    paired_difference,
    run_figures,
    run_summary,
    t_test_p,
)


def rows(rewards, ev=None, rho=None, success=None, versions=None):
    out = []
    for i, reward in enumerate(rewards, start=1):
        row = {
            "step": i,
            "reward_mean": reward,
            "seconds": 10.0 + 2.0 * i,
            "value_version": -1 if versions is None else versions[i - 1],
        }
        if ev is not None:
            row["value_explained_variance"] = ev[i - 1]
        if rho is not None:
            row["tether_rho"] = rho[i - 1]
        if success is not None and i % 2 == 0:
            row["eval_success"] = success
        out.append(row)
    return out


def test_run_figures_follow_the_stated_definitions():
    figures = run_figures(
        rows(
            [0.0, 0.2, 0.4, 0.6],
            ev=[None, 0.1, 0.3, 0.5],
            rho=[0.0, 0.1, 0.2, 0.3],
            success=0.5,
            versions=[20, 22, 23, 27],
        ),
        window=2,
    )
    assert math.isclose(figures["final_reward"], 0.5)
    assert math.isclose(figures["ev_var_second_half"], 0.4)  # steps 3 and 4 (after half of 4 steps)
    assert figures["rho_first"] == 0.0 and figures["rho_final"] == 0.3
    assert figures["final_eval_success"] == 0.5
    assert math.isclose(figures["steps_per_minute"], 30.0)  # 3 steps in 6 s
    assert figures["critic_updates"] == 27.0  # the critic version the last step used


def test_a_critic_free_run_has_no_ev_and_no_rho():
    figures = run_figures(rows([0.1, 0.2]), window=50)
    assert math.isnan(figures["ev_var_second_half"]) and math.isnan(figures["rho_final"])
    assert math.isnan(figures["critic_updates"]), "value_version -1: no critic"
    assert math.isclose(figures["final_reward"], 0.15)


def test_paired_difference_t_interval_matches_the_formula():
    diffs = [0.1, 0.3, 0.2]
    result = paired_difference(diffs, samples=500)
    half = 4.302652729911275 * np.std(diffs, ddof=1) / math.sqrt(3)  # t 0.975, 2 df
    assert math.isclose(result["mean"], 0.2)
    assert math.isclose(result["t_low"], 0.2 - half) and math.isclose(result["t_high"], 0.2 + half)
    assert math.isnan(result["boot_low"]), "3 seeds: too few for a bootstrap"
    five = paired_difference([0.1, 0.3, 0.2, 0.25, 0.15], samples=500)
    assert 0.1 <= five["boot_low"] <= five["boot_high"] <= 0.3
    assert math.isnan(paired_difference([0.4], samples=500)["t_low"])


def test_aggregate_pairs_by_seed_against_the_reference():
    runs = {
        "ref": {0: run_summary(rows([0.1] * 4), 2), 1: run_summary(rows([0.3] * 4), 2)},
        "new": {
            0: run_summary(rows([0.2] * 4), 2),
            1: run_summary(rows([0.5] * 4), 2),
            2: run_summary(rows([0.9] * 4), 2),
        },
    }
    summary = aggregate(runs, [("new", "ref")], bootstrap_samples=200)
    assert math.isclose(summary["variants"]["new"]["final_reward"]["mean"], (0.2 + 0.5 + 0.9) / 3)
    assert summary["variants"]["ref"]["final_reward"]["n"] == 2
    difference = summary["differences"]["new vs ref"]["final_reward"]
    assert difference["n"] == 2 and math.isclose(difference["mean"], 0.15)
    assert list(summary["differences"]) == ["new vs ref"]


def test_curve_is_mean_and_std_over_seeds_on_common_steps():
    by_seed = {0: run_summary(rows([0.0, 1.0, 0.5]), 2), 1: run_summary(rows([1.0, 0.0]), 2)}
    steps, mean, std = curve(by_seed, "reward_mean")
    assert list(steps) == [1, 2] and list(mean) == [0.5, 0.5]
    assert np.allclose(std, [math.sqrt(0.5)] * 2)


def test_only_declared_comparisons_get_intervals_with_holm_adjusted_p_values():
    runs = {
        name: {
            seed: run_summary(
                rows([base + 0.01 * seed + (0.05 if name == "a" else 0.0) * (seed % 2 + 1)] * 4), 2
            )
            for seed in range(5)
        }
        for name, base in (("a", 0.3), ("b", 0.1), ("c", 0.2))
    }
    summary = aggregate(runs, [("a", "b"), ("c", "b")], bootstrap_samples=300)
    assert list(summary["differences"]) == ["a vs b", "c vs b"], "no interval for the undeclared a vs c"
    cells = [summary["differences"][pair]["final_reward"] for pair in ("a vs b", "c vs b")]
    assert all(math.isfinite(c["boot_low"]) for c in cells), "5 seeds: the bootstrap is given"
    ordered = sorted(c["p"] for c in cells)
    assert sorted(c["p_holm"] for c in cells) == [
        min(1.0, 2 * ordered[0]),
        max(min(1.0, 2 * ordered[0]), ordered[1]),
    ]


def test_t_test_p_values_and_holm_match_known_values():
    assert math.isclose(t_test_p(2.776, 4), 0.05, abs_tol=1e-4) and math.isclose(
        t_test_p(4.303, 2), 0.05, abs_tol=1e-4
    )
    assert math.isclose(t_test_p(1.0, 1), 0.5, abs_tol=1e-9)
    assert holm([0.01, 0.04, 0.03, float("nan")])[:3] == [0.03, 0.06, 0.06]


def test_updates_per_step_come_from_the_metrics_field_and_say_when_not_recorded():
    recorded = rows([0.1] * 4)
    for row, k in zip(recorded, [4, 4, 5, 3], strict=True):
        row["critic_updates_done"] = k
    figures = run_figures(recorded, window=2, trajectories_per_step=64)
    assert figures["updates_per_step"] == 4.0 and figures["trajectories_per_update"] == 16.0
    # A run recorded before the rename: the same figure from the old key.
    for row in recorded:
        row["critic_updates_per_step"] = row.pop("critic_updates_done") * 2
    assert run_figures(recorded, window=2, trajectories_per_step=64)["updates_per_step"] == 8.0
    assert math.isnan(run_figures(rows([0.1] * 4), window=2, trajectories_per_step=64)["updates_per_step"])


def test_the_initial_evaluation_row_is_neither_the_final_success_nor_a_timed_step():
    initial = {"step": 0, "eval_success": 0.9, "seconds": 0.5, "policy_version": 0}
    figures = run_figures([initial, *rows([0.0, 0.2, 0.4, 0.6], success=0.25)], window=2)
    assert figures["final_eval_success"] == 0.25
    assert math.isclose(figures["steps_per_minute"], 30.0)  # 3 steps in 6 s; not from step 0's 0.5 s
    only_initial = run_figures([initial, *rows([0.1, 0.2])], window=2)
    assert math.isnan(only_initial["final_eval_success"])
