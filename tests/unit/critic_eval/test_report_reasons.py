"""What a person reads in critic-eval's report: every n/a says why, ties are ties, the two EVs are named apart."""

import math
import re
import warnings

import numpy as np

from lecritique.critic_eval.ceiling import ceiling_rows
from lecritique.critic_eval.evaluation import CriticEvalResult
from lecritique.critic_eval.report import ceiling_table, markdown_table, table_rows, verdict, write_report
from lecritique.critic_eval.scores import critic_row, pairwise_counts, ranking_counts


def test_probes_tied_at_the_top_are_left_out_of_top1_and_counted():
    truth = np.array([[0.5, 0.5], [0.2, 0.8], [0.9, 0.1], [0.3, 0.3]])
    guess = np.array([[0.1, 0.9], [0.1, 0.9], [0.4, 0.4], [0.2, 0.1]])
    counts = ranking_counts(guess, truth)
    # Two probes have a single best: one hit, one critic tie (a miss).
    assert counts == {"top1": 0.5, "decided": 2.0, "mc_ties": 2.0, "critic_ties": 1.0}


def test_top1_where_every_probe_tied_is_na_with_the_reason_not_zero():
    truth = np.zeros((5, 2))
    row, notes = critic_row(
        np.array([0.1, 0.2]), np.array([0.0, 1.0]), np.ones((5, 2)) * 0.3, truth, [2], ranking_states=5
    )
    assert math.isnan(row["top1_k2"]) and row["mc_ties_k2"] == 5
    assert notes["top1_k2"] == "all 5 probes tied: no single best candidate"


def test_a_split_where_the_policy_always_fails_says_why_without_a_numpy_warning(tmp_path):
    states, k = 12, 4
    mc = np.zeros(states)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        row, notes = critic_row(
            np.full(states, 0.3), mc, np.zeros((0, 2)), np.zeros((0, 2)), [2], ranking_states=0
        )
        ceiling = ceiling_rows(
            np.zeros((states, k)),
            np.arange(states) % 3,
            {"vf": np.full(states, 0.3)},
            [1],
            episodes=np.arange(states) // 3,
        )
        result = CriticEvalResult(
            {"vf": row}, [], [], 0.0, 0.0, scored_on={"vf": "prefix"}, ceiling=ceiling, notes={"vf": notes}
        )
        paths = write_report(result, tmp_path)
    text = paths["markdown"].read_text()
    assert "n/a (every Monte-Carlo value is 0.00: no variance to explain" in text
    assert "n/a (not measured (ranking_states: 0))" in text
    assert "n/a (every return is the same (Var(R) = 0" in text
    assert "Verdict (ev_var): none, every Monte-Carlo value is 0.00" in text
    assert "| n/a |" not in text, "an n/a without its reason"


def test_the_two_evs_carry_different_names_and_each_table_has_a_verdict():
    rng = np.random.default_rng(0)
    values = rng.uniform(0.1, 0.9, 80)
    rewards = (rng.random((80, 8)) < values[:, None]).astype(float)
    ceiling = ceiling_rows(
        rewards, np.arange(80) % 4, {"vf": values * 0.5 + 0.25, "pvf": values}, [1], bootstrap=50
    )
    metrics = {
        "vf": critic_row(
            values * 0.5 + 0.25, rewards.mean(1), np.zeros((0, 2)), np.zeros((0, 2)), [2], ranking_states=4
        )[0],
        "pvf": critic_row(values, rewards.mean(1), np.zeros((0, 2)), np.zeros((0, 2)), [2], ranking_states=4)[
            0
        ],
    }
    result = CriticEvalResult(metrics, [], [], 0.0, 0.5, scored_on={}, ceiling=ceiling)
    header, _ = table_rows(result)
    assert "ev_var (vs MC values)" in header and not any(h == "explained variance" for h in header)
    assert verdict(result).startswith("Verdict (ev_var): best critic: pvf ")
    table = ceiling_table(result)
    assert "| pvf ev_mse |" in table and "pvf ev_mse / ceiling" in table
    assert re.search(
        r"Verdict \(all positions, ev_mse / ceiling\): best: pvf, \d\.\d\d of the ceiling \(ceiling 0\.\d\d ± 0\.\d\d s\.e\.\); vf -?\d",
        table,
    )
    assert "ev_var" in markdown_table(result)


def test_pairs_right_is_brute_force_concordance_over_untied_pairs_with_critic_ties_as_halves():
    rng = np.random.default_rng(3)
    truth = rng.integers(0, 3, size=(50, 4)) / 2.0  # Monte-Carlo values of few levels: many ties
    guess = np.round(rng.normal(truth, 0.6), 1)
    guess[:5] = 0.25  # a few probes the critic values alike
    right = half = untied = 0
    for g, t in zip(guess, truth, strict=True):
        for i in range(4):
            for j in range(i + 1, 4):
                if t[i] == t[j]:
                    continue
                untied += 1
                if g[i] == g[j]:
                    half += 1
                elif (g[i] > g[j]) == (t[i] > t[j]):
                    right += 1
    counts = pairwise_counts(guess, truth)
    assert counts == {
        "pairs": (right + 0.5 * half) / untied,
        "untied_pairs": untied,
        "critic_tied_pairs": half,
    }
    assert pairwise_counts(truth, truth)["pairs"] == 1.0 and pairwise_counts(-truth, truth)["pairs"] == 0.0
    tied = pairwise_counts(guess, np.ones_like(truth))
    assert math.isnan(tied["pairs"]) and tied["untied_pairs"] == 0


def test_pairs_where_every_pair_is_tied_is_na_with_the_reason():
    truth = np.ones((5, 2))
    _, notes = critic_row(
        np.array([0.1, 0.2]), np.array([0.0, 1.0]), np.ones((5, 2)) * 0.3, truth, [2], ranking_states=5
    )
    assert notes["pairs_k2"] == "every candidate pair of the 5 probes has equal Monte-Carlo values"
