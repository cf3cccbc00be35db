"""What ``lecritique run`` prints and does outside a terminal (issue 30): a finished run is left
alone, start-up stages are lines, messages are not wrapped inside their text."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.helm_support import ROOT

SPEC = {
    "name": "rerun",
    "environment": {"kind": "sudoku"},
    "policy": {"path": "/nonexistent/model"},
    "estimator": {"name": "mean"},
    "orchestrator": {"steps": 2},
}


def run(spec: dict[str, object], out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    path = out.parent / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "libs"), str(ROOT)]), "COLUMNS": "80"}
    return subprocess.run(
        [sys.executable, "-m", "lecritique", "run", str(path), "--out", str(out), *extra],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def finished(out: Path, steps: int = 2) -> None:
    """What a run that completed ``steps`` policy steps leaves behind (checkpoint and metrics)."""
    (out / "orchestrator").mkdir(parents=True)
    (out / "orchestrator" / "state.json").write_text(
        json.dumps({"completed_step": steps, "warmup_done": True})
    )
    (out / "metrics.jsonl").write_text(
        "".join(
            json.dumps({"step": s, "reward_mean": 0.5, "seconds": 1.0 * s}) + "\n"
            for s in range(1, steps + 1)
        )
    )


def test_a_rerun_into_a_finished_run_says_so_and_starts_nothing(tmp_path: Path) -> None:
    out = tmp_path / "run"
    finished(out)
    done = run(SPEC, out)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{out} already holds a finished run (step 2 of 2); nothing started" in done.stdout
    assert "--force starts it again" in done.stdout
    assert not (out / "logs").exists() and not (out / "redis").exists()  # no service, no Redis
    assert (out / "report.md").exists()


def test_a_long_message_is_one_line(tmp_path: Path) -> None:
    """Not wrapped at 80 columns: a log, or the API's stored error, keeps it whole."""
    path = "/nonexistent/" + "a-long-directory-name/" * 4 + "problems.jsonl"
    done = run({**SPEC, "environment": {"kind": "dataset", "path": path}}, tmp_path / "run")
    assert done.returncode == 2
    assert f"dataset {path} does not exist\n" in done.stdout, done.stdout


@pytest.mark.slow(seconds=50)
def test_force_starts_again_and_the_stages_are_printed_as_lines(tmp_path: Path) -> None:
    out = tmp_path / "run"
    finished(out)
    started = run(
        SPEC, out, "--force"
    )  # the policy path does not exist: the policy trainer stops at start-up
    lines = started.stdout.splitlines()
    assert started.returncode == 1
    assert lines[0] == f"--force: deleting {out} and starting again"
    assert lines[1] == f"starting the embedded Redis (data in {out / 'redis'})"
    assert lines[2] == "starting environment, policy-trainer (the trainers load the models)"
    assert lines[3] == "policy-trainer exited with code 1:"
    assert "source directory /nonexistent/model does not exist" in started.stdout
    assert "Traceback (most recent call last)" not in started.stdout.split("policy-trainer exited")[0]
    assert (
        f"every service's log: {out / 'logs'}" in started.stdout
        and "orchestrator exited" not in started.stdout
    )
    assert not (out / "orchestrator").exists()  # the finished run was deleted


def test_a_marginal_critic_budget_is_warned_before_anything_starts(tmp_path: Path) -> None:
    out = tmp_path / "run"
    finished(out)
    marginal = {
        **SPEC,
        "estimator": {"name": "value"},
        "rollout": {"tasks_per_step": 16, "group_size": 4},
        "critic": {"context": "none", "updates_per_step": 4, "batch_size": 32},
    }
    done = run(marginal, out)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "warning: critic.updates_per_step = 4 is marginal" in done.stdout
    assert "warning:" not in run(SPEC, out).stdout


def recorded(out: Path, spec: dict[str, object]) -> None:
    """The resolved spec a run writes into its folder (what LocalLauncher.start_services records)."""
    from lecritique.config import parse_spec

    (out / "spec.json").write_text(parse_spec(spec).model_dump_json(indent=1))


LR_SPEC = {**SPEC, "policy_trainer": {"optimizer": {"lr": 1e-4}}}


def test_a_rerun_with_an_edited_spec_is_refused_with_the_changed_fields(tmp_path: Path) -> None:
    """Issue 41: policy lr 1e-4 -> 3e-3 and steps 2 -> 3 into the same folder trained on at the old
    lr while spec.json said the new one. Now nothing starts and the folder keeps its record."""
    out = tmp_path / "run"
    finished(out)
    recorded(out, LR_SPEC)
    before = (out / "spec.json").read_text()
    edited = {**SPEC, "policy_trainer": {"optimizer": {"lr": 3e-3}}, "orchestrator": {"steps": 3}}
    done = run(edited, out)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{out} holds a run of a different spec" in done.stdout
    assert "policy_trainer.optimizer.lr: 0.0001 -> 0.003" in done.stdout
    assert "orchestrator.steps: 2 -> 3" in done.stdout
    assert "--force starts it again from scratch" in done.stdout
    assert (out / "spec.json").read_text() == before
    assert not (out / "logs").exists() and not (out / "redis").exists()


def test_extend_may_change_only_the_steps(tmp_path: Path) -> None:
    out = tmp_path / "run"
    finished(out)
    recorded(out, LR_SPEC)
    edited = {**LR_SPEC, "policy_trainer": {"optimizer": {"lr": 3e-3}}}
    done = run(edited, out, "--extend", "1")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "policy_trainer.optimizer.lr: 0.0001 -> 0.003" in done.stdout
    assert "orchestrator.steps" not in done.stdout.split("(")[1].split(")")[0]
    assert "--extend changes only orchestrator.steps" in done.stdout
    assert not (out / "redis").exists()


@pytest.mark.slow(seconds=40)
def test_extend_adds_its_steps_to_the_recorded_ones_says_so_and_continues(tmp_path: Path) -> None:
    """Issue 48 item 6: `--extend 3` adds 3 policy steps to the 2 the folder recorded, whatever
    SPEC's own orchestrator.steps says."""
    out = tmp_path / "run"
    finished(out)
    recorded(out, LR_SPEC)
    done = run(LR_SPEC, out, "--extend", "3")
    # It goes on to start the services (the policy path does not exist: the policy trainer stops).
    assert done.stdout.splitlines()[0] == f"--extend: {out} continues from 2 to 5 policy steps"
    assert f"starting the embedded Redis (data in {out / 'redis'})" in done.stdout
    assert json.loads((out / "spec.json").read_text())["orchestrator"]["steps"] == 5


def test_a_bare_extend_is_refused_with_the_number_it_needs(tmp_path: Path) -> None:
    """Issue 48 item 6: the old flag spelling did nothing on a finished run and exited 0."""
    out = tmp_path / "run"
    finished(out)
    recorded(out, LR_SPEC)
    before = (out / "spec.json").read_text()
    for extra in (("--extend",), ("--extend", "--force")):
        done = run(LR_SPEC, out, *extra)
        assert done.returncode == 2, done.stdout + done.stderr
        assert "--extend takes the number of policy steps to add: `--extend 20`" in done.stderr
        assert (out / "spec.json").read_text() == before
    done = run(LR_SPEC, out, "--extend", "0")
    assert done.returncode == 2
    assert "--extend 0: the number of policy steps to add must be at least 1" in done.stdout
    done = run(LR_SPEC, out, "--extend", "5", "--force")
    assert done.returncode == 2 and "give one of them" in done.stdout
    assert (out / "spec.json").read_text() == before


def test_extend_into_an_empty_folder_says_there_is_nothing_to_extend(tmp_path: Path) -> None:
    done = run(LR_SPEC, tmp_path / "run", "--extend", "5")
    assert done.returncode == 2
    assert f"--extend 5: {tmp_path / 'run'} holds no run to extend (no spec.json)" in done.stdout
    assert not (tmp_path / "run").exists()


@pytest.mark.slow(seconds=40)
def test_larger_steps_in_the_spec_are_refused_with_the_extend_that_continues_them(tmp_path: Path) -> None:
    """The refusal's advice is a command that works: following it starts the run."""
    out = tmp_path / "run"
    finished(out)
    recorded(out, LR_SPEC)
    longer = {**LR_SPEC, "orchestrator": {"steps": 6}}
    done = run(longer, out)
    assert done.returncode == 2
    assert "--extend 4 continues it to 6 policy steps" in done.stdout, done.stdout
    followed = run(longer, out, "--extend", "4")
    assert followed.stdout.splitlines()[0] == f"--extend: {out} continues from 2 to 6 policy steps"
    assert json.loads((out / "spec.json").read_text())["orchestrator"]["steps"] == 6


def test_set_overrides_apply_before_the_folder_is_compared(tmp_path: Path) -> None:
    """--set changes the spec as if the YAML said it: with it the rerun matches the recorded run
    (left alone); without it the same YAML is refused as a different spec."""
    out = tmp_path / "run"
    finished(out)
    recorded(out, LR_SPEC)
    edited = {**LR_SPEC, "policy_trainer": {"optimizer": {"lr": 3e-3}}}
    assert run(edited, out).returncode == 2
    done = run(edited, out, "--set", "policy_trainer.optimizer.lr=1e-4")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "overrides: policy_trainer.optimizer.lr=1e-4" in done.stdout
    assert "already holds a finished run (step 2 of 2)" in done.stdout


def test_an_unknown_override_path_is_refused_with_the_nearest_name(tmp_path: Path) -> None:
    done = run(SPEC, tmp_path / "run", "--set", "policy_trainer.optimizer.lrr=1e-4")
    assert done.returncode == 2
    assert (
        "--set 'policy_trainer.optimizer.lrr=1e-4': policy_trainer.optimizer: unknown field 'lrr'; "
        "did you mean 'lr'?" in done.stdout
    ), done.stdout
    assert not (tmp_path / "run").exists()


def test_every_warning_of_the_spec_is_printed_before_anything_starts(tmp_path: Path) -> None:
    """Issue 40: not only the critic budget: every warning config.findings has about the spec."""
    from lecritique.config import parse_spec
    from lecritique.config.findings import warning_texts

    out = tmp_path / "run"
    finished(out)
    rare = {**SPEC, "orchestrator": {"steps": 2, "eval_every": 5}}
    recorded(out, rare)
    done = run(rare, out)
    assert done.returncode == 0, done.stdout + done.stderr
    printed = [
        line.removeprefix("warning: ") for line in done.stdout.splitlines() if line.startswith("warning: ")
    ]
    assert printed == warning_texts(parse_spec(rare)) and len(printed) == 1
    assert printed[0].startswith("orchestrator.eval_every = 5 > orchestrator.steps = 2")
