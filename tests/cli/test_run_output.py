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
