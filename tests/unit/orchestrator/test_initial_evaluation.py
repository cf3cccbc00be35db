"""The held-out evaluation of the initial policy (issue 41): a row of step 0, once per run.

The policy loop runs in-process as in :mod:`tests.unit.orchestrator.test_warmup_stream` (a real
Sudoku environment, stand-ins for the trainers).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.unit.orchestrator.test_warmup_stream import SEED, _run


def _rows(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def test_the_initial_policy_is_evaluated_before_the_first_update_and_not_again_on_resume(tmp_path):
    out = tmp_path / "run"
    _, _, first_env = _run(out, {"name": "tether"}, steps=2, warmup=2, eval_every=2)
    # The held-out tasks are sampled with the run's seed itself (the batches with other draws).
    assert first_env.sampled.count(SEED) == 2
    rows = _rows(out)
    assert [row["step"] for row in rows] == [0, 1, 2]
    first = rows[0]
    assert set(first) == {
        "step",
        "eval_success",
        "eval_reward_mean",
        "eval_seconds",
        "seconds",
        "policy_version",
    }
    assert first["policy_version"] == 0 and 0.0 <= first["eval_success"] <= 1.0
    # Measured before the critic warm-up and the first update, outside the wall-time budget, whose
    # clock starts after it (the same starting policy in every arm).
    assert first["seconds"] == 0.0 < rows[1]["seconds"]
    assert [row["step"] for row in rows if "eval_success" in row] == [0, 2]

    # A resumed (extended) run goes on from step 3 without evaluating step 0 again; step 3 is its
    # last, which is evaluated (an arm is judged where it ended).
    _, _, environment = _run(out, {"name": "tether"}, steps=3, warmup=2, critic_updates=10, eval_every=2)
    assert [row["step"] for row in _rows(out)] == [0, 1, 2, 3]
    assert [row["step"] for row in _rows(out) if "eval_success" in row] == [0, 2, 3]
    assert environment.sampled.count(SEED) == 1, "the last step's evaluation only"


def test_a_run_ended_by_its_wall_budget_is_evaluated_after_its_last_step(tmp_path):
    """orchestrator.max_seconds: the last step's held-out success is the arm's at its budget's end."""
    out = tmp_path / "run"
    _run(out, {"name": "mean"}, steps=50, warmup=0, eval_every=40, max_seconds=1e-9)
    rows = _rows(out)
    assert [row["step"] for row in rows] == [0, 1]
    assert [row["step"] for row in rows if "eval_success" in row] == [0, 1]


def test_a_run_without_held_out_evaluation_has_no_step_0_row(tmp_path):
    out = tmp_path / "run"
    _run(out, {"name": "mean"}, steps=1, warmup=0)
    assert [row["step"] for row in _rows(out)] == [1]
