"""``lecritique compare``: several run folders -> compare.md + compare.png (issue 41)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from lecritique.cli.main import app
from lecritique.reporting.compare import run_column, write_comparison
from lecritique.reporting.noise import lag1_autocorrelation, window_standard_error
from lecritique.study.summary import t975


def _run_folder(folder: Path, estimator: str, steps: int = 8, seconds_per_step: float = 2.0) -> Path:
    """A run folder as `lecritique run` leaves it: spec.json and metrics.jsonl with a step-0 row."""
    folder.mkdir(parents=True)
    critic = {"kind": "discriminative", "context": "reference"} if estimator == "tether" else None
    (folder / "spec.json").write_text(
        json.dumps({"name": f"demo-{estimator}", "estimator": {"name": estimator}, "critic": critic})
    )
    rows = [{"step": 0, "eval_success": 0.25, "eval_reward_mean": 0.3, "seconds": 1.0, "policy_version": 0}]
    for step in range(1, steps + 1):
        row = {"step": step, "reward_mean": step / 10, "seconds": 1.0 + seconds_per_step * step}
        if critic is not None:
            row |= {"value_explained_variance": -0.01 * step, "tether_rho": 0.05 * step}
        if step % 4 == 0:
            row["eval_success"] = 0.25 + step / 32
        rows.append(row)
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def test_each_run_gets_its_figures_by_the_stated_definitions(tmp_path):
    column = run_column(_run_folder(tmp_path / "tether", "tether"))
    assert (column.spec_name, column.estimator, column.critic) == (
        "demo-tether",
        "tether",
        "discriminative / reference",
    )
    assert column.steps == 8 and column.final_window == 2  # the last 25% of 8 policy steps
    assert column.final_reward == pytest.approx((0.7 + 0.8) / 2)
    assert (column.eval_first, column.eval_first_step) == (0.25, 0)
    assert (column.eval_last, column.eval_last_step) == (0.5, 8)
    assert column.ev_final == pytest.approx(-0.075) and column.rho_last == pytest.approx(0.4)
    assert column.seconds == 17.0


def test_a_critic_and_its_baseline_side_by_side(tmp_path):
    tether = _run_folder(tmp_path / "five" / "tether", "tether")
    mean = _run_folder(tmp_path / "five" / "mean", "mean", seconds_per_step=1.0)
    png, md = write_comparison([tether, mean], tmp_path / "compare")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    text = md.read_text()
    assert "![curves](compare.png)" in text and "final reward ± s.e. (last 25% of steps)" in text
    assert (
        "| tether | demo-tether | ? | tether | discriminative / reference | 8 | 0.750 ± 0.050 | 0.250 (step 0) | 0.500 (step 8) | -0.075 | 0.400 | 17.000 |"
        in text
    )
    assert (
        "| mean | demo-mean | ? | mean | none | 8 | 0.750 ± 0.050 | 0.250 (step 0) | 0.500 (step 8) | n/a | n/a | 9.000 |"
        in text
    )


def test_runs_with_the_same_folder_name_are_told_apart_and_an_empty_run_is_refused(tmp_path):
    first = _run_folder(tmp_path / "a" / "seed0", "mean")
    second = _run_folder(tmp_path / "b" / "seed0", "tether")
    _, md = write_comparison([first, second], tmp_path / "out")
    assert "| a/seed0 |" in md.read_text() and "| b/seed0 |" in md.read_text()
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "metrics.jsonl").write_text(json.dumps({"step": 0, "eval_success": 0.1}) + "\n")
    with pytest.raises(ValueError, match="no policy step yet"):
        write_comparison([empty], tmp_path / "out")


def test_the_compare_command(tmp_path):
    tether = _run_folder(tmp_path / "tether", "tether")
    mean = _run_folder(tmp_path / "mean", "mean")
    result = CliRunner().invoke(app, ["compare", str(tether), str(mean), "--out", str(tmp_path / "cmp")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "cmp" / "compare.md").exists() and (tmp_path / "cmp" / "compare.png").exists()
    assert "compare.md" in result.output
    missing = CliRunner().invoke(app, ["compare", str(tmp_path / "cmp"), "--out", str(tmp_path / "x")])
    assert missing.exit_code == 2 and "metrics.jsonl does not exist" in missing.output


def _seeded(folder: Path, estimator: str, seed: int, rewards: list[float], eval_last: float) -> Path:
    """A run folder of `seed` whose per-step rewards are `rewards` (held-out success at the end)."""
    folder.mkdir(parents=True)
    spec = {
        "name": f"demo-{estimator}",
        "seed": seed,
        "estimator": {"name": estimator},
        "critic": None,
        "orchestrator": {"eval_tasks": 64},
    }
    (folder / "spec.json").write_text(json.dumps(spec))
    rows = [{"step": 0, "eval_success": 0.25, "seconds": 1.0}]
    rows += [{"step": i + 1, "reward_mean": r, "seconds": 2.0 + i} for i, r in enumerate(rewards)]
    rows[-1]["eval_success"] = eval_last
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def test_one_run_per_arm_is_said_in_words_and_not_ranked_with_each_runs_noise(tmp_path):
    """Issue 48 item 1: the five-minute pair read as 'the critic helped'."""
    rng = np.random.default_rng(0)
    tether = _seeded(tmp_path / "tether", "tether", 0, list(0.48 + 0.05 * rng.standard_normal(40)), 0.625)
    mean = _seeded(tmp_path / "mean", "mean", 0, list(0.46 + 0.05 * rng.standard_normal(40)), 0.5625)
    _, md = write_comparison([tether, mean], tmp_path / "cmp")
    text = md.read_text()
    assert (
        "**One run per arm (2 runs): these rows describe single runs, not which setting is better, and they are not ranked.**"
        in text
    )
    assert "--vs B1 B2 B3" in text and "best" not in text and "higher" not in text
    column = run_column(tether)
    window = [
        json.loads(line)["reward_mean"] for line in (tether / "metrics.jsonl").read_text().splitlines()[-10:]
    ]
    plain = np.std(window, ddof=1) / np.sqrt(10)
    assert column.final_reward_se >= plain and column.final_reward_se == pytest.approx(
        window_standard_error(window)
    )
    assert f"{column.final_reward:.3f} ± {column.final_reward_se:.3f}" in text
    assert f"0.625 ± {np.sqrt(0.625 * 0.375 / 64):.3f} (step 40)" in text
    assert "lag-1 autocorrelation" in text


def test_the_noise_estimate_grows_with_autocorrelation_and_is_exact_on_known_input():
    independent = [0.0, 1.0] * 10  # r1 strongly negative: taken as 0, the plain standard error
    assert window_standard_error(independent) == pytest.approx(np.std(independent, ddof=1) / np.sqrt(20))
    trending = list(np.linspace(0.0, 1.0, 20))  # r1 high, capped at 0.9
    plain = np.std(trending, ddof=1) / np.sqrt(20)
    assert lag1_autocorrelation(trending) > 0.8
    r1 = min(lag1_autocorrelation(trending), 0.9)
    assert window_standard_error(trending) == pytest.approx(plain * np.sqrt((1 + r1) / (1 - r1)))
    assert np.isnan(window_standard_error([0.5]))


def test_arms_are_paired_by_seed_with_a_t_interval(tmp_path):
    a = [_seeded(tmp_path / f"t{s}", "tether", s, [0.5 + 0.01 * s] * 8, 0.6) for s in (2, 0, 1)]
    b = [
        _seeded(tmp_path / f"m{s}", "mean", s, [0.4 + 0.01 * s + 0.005 * (s == 1)] * 8, 0.6)
        for s in (0, 1, 2)
    ]
    result = CliRunner().invoke(
        app, ["compare", *map(str, a), "--vs", *map(str, b), "--out", str(tmp_path / "c")]
    )
    assert result.exit_code == 0, result.output
    text = (tmp_path / "c" / "compare.md").read_text()
    assert "A = **demo-tether** (3 runs), B = **demo-mean** (3 runs), paired by seed (2, 0, 1)." in text
    diffs = np.array([0.1, 0.1, 0.095])  # seeds 2, 0, 1 (pairs by seed, not by position)
    half = t975(2) * diffs.std(ddof=1) / np.sqrt(3)
    row = next(line for line in text.splitlines() if line.startswith("| final reward"))
    assert f"| {diffs.mean():+.3f} | [{diffs.mean() - half:+.3f}, {diffs.mean() + half:+.3f}] |" in row
    assert row.endswith("| 3 | demo-tether higher |")
    held_out = next(line for line in text.splitlines() if line.startswith("| held-out success, last"))
    assert "| +0.000 |" in held_out
    assert "| A | t2 | demo-tether | 2 |" in text and "One run per arm" not in text


def test_labels_name_arms_and_unpairable_arms_are_refused_or_paired_in_order(tmp_path):
    a = [_seeded(tmp_path / f"t{s}", "tether", s, [0.5] * 8, 0.6) for s in (0, 1)]
    b = [_seeded(tmp_path / f"m{s}", "mean", s + 5, [0.4] * 8, 0.6) for s in (0, 1)]
    words = [f"critic={a[0]}", f"critic={a[1]}", f"baseline={b[0]}", f"baseline={b[1]}"]
    result = CliRunner().invoke(app, ["compare", *words, "--out", str(tmp_path / "c")])
    assert result.exit_code == 0, result.output
    text = (tmp_path / "c" / "compare.md").read_text()
    assert (
        "A = **critic** (2 runs), B = **baseline** (2 runs), paired in the order given, since the arms' seeds differ ([0, 1] vs [5, 6])"
        in text
    )
    uneven = CliRunner().invoke(
        app, ["compare", str(a[0]), str(a[1]), "--vs", str(b[0]), "--out", str(tmp_path / "d")]
    )
    assert uneven.exit_code == 2 and "the arms have 2 and 1 runs" in uneven.output
    mixed = CliRunner().invoke(app, ["compare", f"x={a[0]}", str(b[0]), "--out", str(tmp_path / "e")])
    assert mixed.exit_code == 2 and "either every run is LABEL=DIR or none is" in mixed.output
