"""``lecritique critic-eval`` as a command on the tiny Sudoku policy, with every critic kind."""

import json
import subprocess
import sys

import pytest
import yaml

from lecritique.launch.local.launcher import REPO_ROOT
from lecritique.launch.local.processes import child_environment


def critic_eval(spec, tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "lecritique",
            "critic-eval",
            str(path),
            "--out",
            str(tmp_path / "out"),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        env=child_environment(REPO_ROOT, threads=2),
        timeout=600,
    )


def test_critic_eval_compares_every_critic_kind(tiny_policy, tmp_path):
    spec = {
        "policy": {"path": str(tiny_policy)},
        "environment": {"kind": "sudoku", "size": 4, "empty_cells": [1, 2]},
        "sampling": {"max_tokens": 8},
        "split": "train",
        "tasks": 4,
        "group_size": 2,
        "states": 8,
        "continuations": 4,
        "ranking_k": [2],
        "ranking_states": 3,
        "ranking_oversample": 3,
        "segments": {"rule": "turn"},
        "critics": [
            {"name": "vf", "critic": {"context": "none"}},
            {"name": "pvf", "critic": {"context": "reference"}},
            {
                "name": "genac",
                "critic": {"kind": "generative", "reasoning": False, "score_tag": "=", "max_tokens": 1},
            },
            {"name": "lvrl", "critic": {"kind": "frozen_llm", "max_tokens": 8, "system_prompt": "values"}},
        ],
    }
    result = critic_eval(spec, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    for name in ("vf", "pvf", "genac", "lvrl"):
        assert name in result.stdout
    data = json.loads((tmp_path / "out" / "critic_eval.json").read_text())
    assert set(data["metrics"]) == {"vf", "pvf", "genac", "lvrl"}
    assert len(data["states"]) == 8
    for state in data["states"]:
        assert len(state["mc_rewards"]) == 4
        assert set(state["critic_values"]) == {"vf", "pvf", "genac", "lvrl"}
    assert (tmp_path / "out" / "critic_eval.png").stat().st_size > 0
    assert "| genac |" in (tmp_path / "out" / "critic_eval.md").read_text()


def test_critic_eval_rejects_a_bad_spec_naming_the_field(tmp_path):
    spec = {
        "policy": {"path": "/nowhere"},
        "environment": {"kind": "sudoku"},
        "continuations": 0,
        "critics": [
            {"name": "x", "critic": {"kind": "generative", "temprature": 1.0}},
            {"name": "y", "critic": {"kind": "frozen_llm"}, "path": "/weights/critic/00000003"},
        ],
    }
    result = critic_eval(spec, tmp_path)
    assert result.returncode == 2
    assert "continuations: Input should be greater than or equal to 2" in result.stderr
    assert (
        "critics.0.critic.temprature: unknown field 'temprature'; did you mean 'temperature'?"
        in result.stderr
    )
    assert (
        "critics.1: Value error, critic 'y': a frozen_llm critic has no weights; remove 'path'"
        in result.stderr
    )
    assert not (tmp_path / "out").exists()


def test_the_shipped_critic_eval_example_parses():
    from lecritique.critic_eval import load_critic_eval_spec

    spec = load_critic_eval_spec(REPO_ROOT / "examples" / "critics" / "critic-eval-sudoku-mini.yml")
    assert [c.critic.kind for c in spec.critics] == [
        "discriminative",
        "discriminative",
        "generative",
        "frozen_llm",
    ]


def test_token_states_inside_responses_and_the_ceiling_table(tiny_policy, tmp_path):
    """``rule: token`` measures states after the first response tokens too (``turn`` has only the
    prompt end on a single-turn task), and the report carries the ceiling per position bucket."""
    spec = {
        "policy": {"path": str(tiny_policy)},
        "environment": {"kind": "sudoku", "size": 4, "empty_cells": [1, 2]},
        "sampling": {"max_tokens": 8},
        "tasks": 4,
        "group_size": 2,
        "states": 24,
        "continuations": 3,
        "ranking_states": 0,
        "segments": {"rule": "token", "max_segments": 64},
        "position_edges": [1, 3],
        "critics": [
            {"name": "vf", "critic": {"context": "none"}},
            {"name": "pvf", "critic": {"context": "reference"}},
        ],
    }
    result = critic_eval(spec, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    data = json.loads((tmp_path / "out" / "critic_eval.json").read_text())
    positions = [state["position"] for state in data["states"]]
    assert 0 in positions and max(positions) >= 3
    rows = {row["label"]: row for row in data["ceiling"]}
    # Sudoku plays several turns: rows per position within the turn ("turn t=...") follow.
    assert [label for label in rows if not label.startswith("turn ")] == ["all", "t=0", "t=1-2", "t>=3"]
    turn_rows = [label for label in rows if label.startswith("turn ")]
    assert turn_rows in ([], ["turn t=0", "turn t=1-2", "turn t>=3"])
    assert all(rows[label].get("axis") == "turn" for label in turn_rows)
    assert rows["all"]["states"] == 24 == sum(rows[label]["states"] for label in ("t=0", "t=1-2", "t>=3"))
    assert set(rows["all"]["critics"]) == {"vf", "pvf"}
    assert "Oracle ceiling per response position" in (tmp_path / "out" / "critic_eval.md").read_text()


def test_an_experiment_spec_is_answered_with_what_to_do(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "lecritique",
            "critic-eval",
            str(REPO_ROOT / "examples" / "sudoku-mini-pvf.yaml"),
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        env=child_environment(REPO_ROOT, threads=2),
        timeout=120,
    )
    assert result.returncode == 2
    assert (
        "is an experiment spec" in result.stderr and "lecritique critic-eval --run RUN_DIR" in result.stderr
    )
    assert "unknown field" not in result.stderr
    assert not (tmp_path / "out").exists()


def fake_run(tiny_policy, folder, *, critic_versions=(3, 5)):
    """A run folder as ``lecritique run`` leaves it: spec.json, policy and critic versions."""
    import shutil

    from lecritique.config.experiment import parse_spec
    from lecritique.critics.kinds import critic_kind

    spec = parse_spec(
        {
            "name": "r",
            "environment": {"kind": "sudoku", "size": 4, "empty_cells": [1, 2]},
            "policy": {"path": str(tiny_policy)},
            "rollout": {"group_size": 2, "tasks_per_step": 4, "sampling": {"max_tokens": 8}},
            "estimator": {"name": "value"},
            "critic": {"context": "reference"},
            "orchestrator": {"steps": 2},
        }
    )
    folder.mkdir(parents=True)
    (folder / "spec.json").write_text(spec.model_dump_json(exclude_none=True))
    shutil.copytree(tiny_policy, folder / "weights" / "policy" / "00000002")
    for version in critic_versions:
        critic_kind(spec.critic).untrained_weights(
            spec.critic, tiny_policy, folder / "weights" / "critic" / f"{version:08d}"
        )
    return folder


@pytest.fixture(scope="module")
def platform_policy():
    """A few SFT steps (seconds): these tests check the plumbing from a run folder, not critics."""
    from tests.tiny_policies import quick_policy

    return quick_policy()


def test_spec_from_a_run_folder_takes_its_newest_policy_and_critic(platform_policy, tmp_path):
    from lecritique.config.experiment import SpecError
    from lecritique.critic_eval.from_run import spec_from_run

    run = fake_run(platform_policy, tmp_path / "run")
    spec = spec_from_run(run, states=8)
    assert spec.policy.path.endswith("policy/00000002") and spec.critics[0].path.endswith("critic/00000005")
    assert spec.critics[0].name == "pvf" and spec.critics[0].critic.context == "reference"
    assert spec.split == "eval" and spec.segments.rule == "token" and spec.states == 8
    assert spec_from_run(run, critic_version=3).critics[0].path.endswith("critic/00000003")
    with pytest.raises(SpecError, match=r"critic version 4 is not in .* \(kept: \[3, 5\]\)"):
        spec_from_run(run, critic_version=4)
    with pytest.raises(SpecError, match="no spec.json"):
        spec_from_run(tmp_path)


def test_critic_eval_of_a_run_folder(platform_policy, tmp_path):
    run = fake_run(platform_policy, tmp_path / "run", critic_versions=(1,))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "lecritique",
            "critic-eval",
            "--run",
            str(run),
            "--no-progress",
            "--tasks",
            "4",
            "--states",
            "8",
            "--continuations",
            "3",
        ],
        capture_output=True,
        text=True,
        env=child_environment(REPO_ROOT, threads=2),
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (
        "Verdict (ev_var)" in result.stdout and "Verdict (all positions, ev_mse / ceiling)" in result.stdout
    )
    # (This policy never succeeds: every value is 0, so the verdict says why there is none.)
    assert "Ranking:" in result.stdout and "base: constant" in result.stdout
    # The console tables fit the 80 columns of a terminal the console cannot measure (a pipe),
    # one line per critic in each of the three tables.
    drawn = [line for line in result.stdout.splitlines() if line.startswith(("base: ", "critic "))]
    assert len(drawn) == 3 * 3 and max(len(line) for line in drawn) <= 80, drawn
    # Without --out, the report goes into the run folder.
    data = json.loads((run / "critic-eval" / "critic_eval.json").read_text())
    assert data["spec"]["critics"][0]["path"].endswith("critic/00000001") and len(data["states"]) == 8
    assert set(data["baselines"]) == {"constant (mean return)", "group mean (leave-one-out)"}
