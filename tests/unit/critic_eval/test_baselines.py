"""critic-eval's critic-free baselines, its tie note, its comparing verdict, its terminal tables
and ``--out`` inside the run folder (issue 41)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from rich.console import Console
from typer.testing import CliRunner

from lecritique.cli.main import app
from lecritique.critic_eval.baselines import CONSTANT, GROUP_MEAN, baseline_values, tied_group_fraction
from lecritique.critic_eval.evaluation import Candidate, CriticEvalResult, RankingProbe
from lecritique.critic_eval.report import console_tables, markdown_table, tie_note, verdict
from lecritique.critic_eval.scores import critic_row


def _episodes(rewards_by_group):
    return [
        SimpleNamespace(group_id=group, reward=reward)
        for group, rewards in enumerate(rewards_by_group)
        for reward in rewards
    ]


def test_the_group_mean_leaves_the_episode_itself_out():
    base = _episodes([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    values = baseline_values(base)
    assert values[CONSTANT] == pytest.approx(np.full(6, 4 / 6))
    assert values[GROUP_MEAN] == pytest.approx([0.0, 0.5, 0.5, 1.0, 1.0, 1.0])
    assert tied_group_fraction(base) == 0.5
    alone = baseline_values(_episodes([[1.0], [0.0]]))[GROUP_MEAN]
    assert np.isnan(alone).all(), "no peer in a group of one"


def _result(critics=("pvf",)):
    rng = np.random.default_rng(1)
    mc = rng.uniform(0, 1, 40)
    truth = np.array([[0.5, 0.5], [0.2, 0.8], [0.0, 0.0], [0.9, 0.1]])
    metrics = {
        name: critic_row(mc * 0.8 + 0.1, mc, truth + 0.01 * i, truth, [2], ranking_states=4)[0]
        for i, name in enumerate(critics)
    }
    baselines = {
        CONSTANT: critic_row(np.full(40, mc.mean()), mc, np.full((4, 2), 0.5), truth, [2], ranking_states=4)[
            0
        ],
        GROUP_MEAN: critic_row(mc * 0.3 + 0.2, mc, np.full((4, 2), 0.4), truth, [2], ranking_states=4)[0],
    }
    probes = [RankingProbe(0, 1, "", [Candidate("a", float(a)), Candidate("b", float(b))]) for a, b in truth]
    return CriticEvalResult(
        metrics,
        [],
        probes,
        0.0,
        0.5,
        scored_on={c: "prefix" for c in critics},
        baselines=baselines,
        tied_groups=0.25,
    )


def test_one_critic_is_compared_with_the_baselines_never_called_best():
    result = _result()
    line = verdict(result)
    assert line.startswith("Verdict (ev_var): pvf ") and "best" not in line
    assert "vs baselines constant (mean return) 0.000, group mean (leave-one-out) " in line
    assert line.endswith(": pvf beats the constant (mean return) only.") or line.endswith(
        ": pvf beats both baselines."
    )
    table = markdown_table(result)
    assert "| baseline: constant (mean return) | no critic |" in table
    assert "| baseline: group mean (leave-one-out) | no critic |" in table


def test_the_ranking_note_counts_untied_pairs_and_says_what_chance_is():
    note = tie_note(_result())
    assert (
        "k=2: 2 of 4 candidate pairs (50%) have different Monte-Carlo values; 2 of 4 probes (50%) have all k equal"
        in note
    )
    assert "0.5 is chance" in note and "score exactly 0.5" in note
    assert "Groups of base episodes whose returns are all tied: 25%." in note


def test_pairs_right_handles_ties_a_baseline_scores_chance_and_top1_stays_in_the_json():
    """Issue 48 item 9: with binary returns top-1 read 0.0000 almost everywhere."""
    result = _result()
    assert result.metrics["pvf"]["pairs_k2"] == 1.0 and result.metrics["pvf"]["untied_pairs_k2"] == 2
    for baseline in result.baselines.values():
        assert baseline["pairs_k2"] == 0.5 and baseline["critic_tied_pairs_k2"] == 2
        assert "top1_k2" in baseline
    table = markdown_table(result)
    assert "| pairs right @ k=2 |" in table and "top-1" not in table.split("\n\n")[0]
    assert "| 1.0000 (2 pairs) |" in table and "| 0.5000 (2 pairs) |" in table


def test_the_console_tables_fit_80_columns_one_line_per_critic():
    result = _result(critics=("pvf-with-a-long-name", "vf"))
    result.metrics["vf"]["ev_var"] = float("nan")
    result.notes["vf"] = {
        "ev_var": "every Monte-Carlo value is 0.00: no variance to explain (e.g. the policy never succeeds on this split)"
    }
    console = Console(width=80, record=True)
    for table in console_tables(result, "critic-eval (40 states, M = 8)"):
        console.print(table)
    text = console.export_text()
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80, max(lines, key=len)
    rows = ("pvf-with-a-long-name ", "vf ", "base: constant (mean return) ", "base: group mean (LOO) ")
    for row in rows:
        found = [line for line in lines if line.startswith(row)]
        assert len(found) == 3, (row, text)  # one line in each of the three tables: no cell wrapped
        assert all(len(line.split()) >= 3 for line in found)
    assert "…" not in text, "a cell was cut"
    assert "n/a [1]" in text and "[1] every Monte-Carlo value is 0.00" in text
    assert "ranking, pairs ordered right" in text and "1.000 (2)" in text


def test_critic_eval_with_a_spec_and_no_out_names_the_option():
    spec = Path(__file__).parents[3] / "examples" / "critics" / "critic-eval-sudoku-mini.yml"
    result = CliRunner().invoke(app, ["critic-eval", str(spec)])
    assert result.exit_code == 2 and "--out DIR is required with a critic-eval spec" in result.output


def test_baseline_fields_score_each_baseline_as_a_critic():
    from lecritique.critic_eval.baselines import baseline_fields

    base = _episodes([[1.0, 0.0], [1.0, 1.0]])
    points = [SimpleNamespace(base=i) for i in (0, 1, 2, 3)]
    candidates = [SimpleNamespace(base=i) for i in (0, 0, 2, 2)]
    mc_values = np.array([0.9, 0.1, 1.0, 1.0])
    spec = SimpleNamespace(ranking_k=[2], ranking_states=2)
    fields = baseline_fields(base, points, candidates, mc_values, [0.2, 0.8, 0.5, 0.1], spec)
    assert fields["tied_groups"] == 0.5
    constant, group = fields["baselines"][CONSTANT], fields["baselines"][GROUP_MEAN]
    assert constant["ev_var"] == pytest.approx(0.0)
    # Group mean (leave-one-out): 0.0, 1.0, 1.0, 1.0 against 0.9, 0.1, 1.0, 1.0.
    assert group["value_mse"] == pytest.approx((0.81 + 0.81) / 4)
    assert constant["top1_k2"] == 0.0 and constant["critic_ties_k2"] == 2.0, "a baseline ties every probe"
    assert constant["pairs_k2"] == 0.5, "a baseline values every candidate alike: chance"
