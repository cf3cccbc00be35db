"""No constant wins (issue #46 item 2): the fixed scorers, the audit, its command and its table.

On main: ``1*2*3*4`` scored 1.0 on every ``puzzle24`` task, ``0`` on most ``coin_flip`` tasks,
any non-empty answer on every ``game_of_life_halting`` task and ``nan`` on every
``complex_arithmetic`` task. Each assertion below on those answers failed there.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lecritique.envs import environment_names, get_environment
from lecritique.envs.answers import tagged
from lecritique.envs.audit import WIN_MARGIN, InProcess, audit, sample_per_group
from lecritique.envs.reasoning_gym import registered_datasets
from lecritique.envs.reasoning_gym_fixes import FIXES, score_coin_flip

ROOT = Path(__file__).resolve().parents[3]
SECURITY = ROOT / "docs" / "security.md"
TABLE = re.compile(r"<!-- audit-table:begin -->\n(.*?)<!-- audit-table:end -->", re.DOTALL)
AUDIT_TASKS = 6
"""Tasks per dataset of the suite's audit (and of the docs' table): enough for the issue's cases."""


def _mean(env, tasks, answer: str) -> float:
    return sum(env.score(task, tagged(answer)).reward for task in tasks) / len(tasks)


def _tasks(dataset: str, n: int = 12):
    env = get_environment("reasoning_gym", datasets={dataset: 1}, chunk_size=64)
    return env, env.sample_tasks(n, seed=2)


def test_puzzle24_pays_only_the_tasks_numbers() -> None:
    env, tasks = _tasks("puzzle24", 6)
    assert _mean(env, tasks, "1*2*3*4") == 0.0  # main: 1.0
    assert _mean(env, tasks, "4*6") == 0.0
    for task in tasks:
        assert env.score(task, tagged(str(task.reference))).reward == 1.0


def test_coin_flip_compares_the_whole_answer() -> None:
    env, tasks = _tasks("coin_flip")
    assert _mean(env, tasks, "0") == 0.0  # main: 0.92
    assert all(env.score(task, tagged(str(task.reference))).reward == 1.0 for task in tasks)
    assert score_coin_flip("1/4", "0.25")[0] == 1.0
    assert score_coin_flip("0.2", "0.234375")[0] == pytest.approx(1 / 6)
    assert score_coin_flip("0", "3.051757812e-05")[0] == 0.0  # main: 1.0 (absolute tolerance 1e-4)
    assert score_coin_flip("1e99999999", "0.5") == (
        0.0,
        "coin_flip: not a probability (a decimal or a fraction)",
    )


def test_game_of_life_halting_needs_the_literal_answer() -> None:
    env, tasks = _tasks("game_of_life_halting")
    for answer in ("x", "0", "nan", "maybe"):
        assert _mean(env, tasks, answer) == 0.0  # main: 1.0
    for task in tasks:
        assert env.score(task, tagged(str(task.reference))).reward == 1.0
        flipped = "False" if str(task.reference) == "True" else "True"
        assert env.score(task, tagged(flipped)).reward == 0.0  # main: 1.0


def test_complex_arithmetic_pays_no_nan() -> None:
    env, tasks = _tasks("complex_arithmetic", 6)
    for answer in ("nan", "nan+nanj", "inf"):
        assert _mean(env, tasks, answer) == 0.0  # main: 1.0 for nan
    assert all(env.score(task, tagged(str(task.reference))).reward == 1.0 for task in tasks)


def test_partial_credit_a_constant_collects_is_dropped() -> None:
    env, tasks = _tasks("game_of_life", 8)
    empty = "[" + ",".join(["[" + ",".join(["0"] * 10) + "]"] * 10) + "]"
    references = sum(1 for task in tasks if str(task.reference).replace(" ", "") == empty)
    # main: about 0.96 (most cells of most boards are dead); now only the boards that are empty.
    assert _mean(env, tasks, empty) == pytest.approx(references / len(tasks))


def test_a_constant_that_wins_is_named_and_fails_the_command(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        "".join(json.dumps({"prompt": f"{n}+{n}", "answer": str(2 * n)}) + "\n" for n in range(20))
    )
    spec = tmp_path / "environment.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "kind": "dataset",
                "path": "rows.jsonl",
                "verifier": {"kind": "python", "entry_point": "tests.unit.envs.dataset_verifiers:always_one"},
            }
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "lecritique", "envs", "audit", str(spec), "--tasks", "8", "--markdown"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": f"{ROOT / 'libs'}:{ROOT}", "PATH": "/usr/bin:/bin"},
        timeout=300,
    )
    assert done.returncode == 1, done.stderr
    assert "| dataset (environment) | 8 | 14 | `0` | 1.00 **(wins)** |" in done.stdout
    assert (
        "dataset (environment): the answer '0' ignores the task and earns a mean reward of 1.00"
        in done.stderr
    )


def test_multi_turn_environments_are_audited_by_repeating_the_answer() -> None:
    env = get_environment("sudoku", size=4, empty_cells=[1, 2])
    tasks = sample_per_group(env, 6)
    [row] = audit(InProcess(env), tasks, max_turns=env.max_turns)
    assert row.group == "sudoku (environment)" and row.tasks == 6 and not row.wins


AUDIT_SPECS = [
    *sorted(str(path.relative_to(ROOT)) for path in (ROOT / "docs" / "audit").glob("*.yaml")),
    "examples/datasets/my-math-pvf.yaml",
]
"""What docs/security.md's table audits: every environment at its defaults (the dataset
environment on the shipped example), reasoning-gym with --every-dataset."""
AUDIT_COMMAND = ["envs", "audit", *AUDIT_SPECS, "--every-dataset", "--tasks", str(AUDIT_TASKS), "--markdown"]


@pytest.mark.slow(seconds=400)
def test_no_constant_wins_anywhere_and_the_docs_table_is_in_step(tmp_path: Path) -> None:
    """Every environment and every registered reasoning-gym dataset, through the verifier's
    workers, by the documented command; the table in docs/security.md is its output."""
    rows_file = tmp_path / "rows.json"
    done = subprocess.run(
        [sys.executable, "-m", "lecritique", *AUDIT_COMMAND, "--json", str(rows_file)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": f"{ROOT / 'libs'}:{ROOT}", "PATH": "/usr/bin:/bin"},
        timeout=1800,
    )
    assert done.returncode == 0, (
        f"a degenerate answer wins (more than {WIN_MARGIN} above its share):\n{done.stderr[-3000:]}"
    )
    rows = json.loads(rows_file.read_text())
    groups = {row["group"] for row in rows}
    assert set(registered_datasets()) <= groups
    assert {f"{name} (environment)" for name in environment_names() if name != "reasoning_gym"} <= groups
    assert all(row["tasks"] >= 1 and not row["wins"] for row in rows)
    for name in FIXES:
        assert next(row for row in rows if row["group"] == name)["action"].startswith("fixed:")
    found = TABLE.search(SECURITY.read_text())
    assert found is not None, "docs/security.md has no audit table between its markers"
    assert found.group(1) == done.stdout, "regenerate it: lecritique " + " ".join(AUDIT_COMMAND)


def test_the_audit_finds_the_issues_winners_without_the_fixes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The detector is not blind: with reasoning_gym_fixes switched off (main's scoring), six
    tasks per dataset are enough for the audit to name each of the issue's winning answers."""
    from lecritique.envs import reasoning_gym as reasoning_gym_environment

    monkeypatch.setattr(reasoning_gym_environment, "before_scorer", lambda *args: None)
    monkeypatch.setattr(
        reasoning_gym_environment,
        "after_scorer",
        lambda name, reward: min(1.0, max(0.0, reward)) if reward == reward else 0.0,
    )
    expected = {
        "puzzle24": "1*2*3*4",
        "coin_flip": "0",
        "game_of_life_halting": None,
        "complex_arithmetic": "nan",
    }
    for dataset, answer in expected.items():
        env = get_environment("reasoning_gym", datasets={dataset: 1}, chunk_size=64)
        [row] = audit(InProcess(env), sample_per_group(env, AUDIT_TASKS))
        assert row.wins, (dataset, row)
        if answer is not None:  # game_of_life_halting: every non-empty answer wins; the first is named
            assert row.worst_answer in (answer, "0.0", "nan+nanj"), (dataset, row.worst_answer)
