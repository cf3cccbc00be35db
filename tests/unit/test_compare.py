"""``lecritique compare``: several run folders -> compare.md + compare.png (issue 41)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lecritique.cli.main import app
from lecritique.reporting.compare import run_column, write_comparison


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
    assert "![curves](compare.png)" in text and "final reward (last 25% of steps)" in text
    assert (
        "| tether | demo-tether | tether | discriminative / reference | 8 | 0.750 | 0.250 (step 0) | 0.500 (step 8) | -0.075 | 0.400 | 17.000 |"
        in text
    )
    assert (
        "| mean | demo-mean | mean | none | 8 | 0.750 | 0.250 (step 0) | 0.500 (step 8) | n/a | n/a | 9.000 |"
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
