"""``lecritique study --quick`` end to end with real processes: locally (resumable, ceiling probed)
and through a real ``lecritique api serve`` process. These check the machinery, not the science."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from lecritique.launch.local.launcher import REPO_ROOT
from lecritique.launch.local.processes import child_environment
from tests.integration.api.api_process import ApiProcess, local_api_settings
from tests.tiny_policies import quick_policy

TOKEN = "study-token"


def write_study(tmp_path: Path, quick_variants: list[str] | None = None) -> Path:
    base = {
        "name": "base",
        "environment": {"kind": "sudoku", "size": 4, "empty_cells": [1, 2]},
        "policy": {"path": str(quick_policy())},
        "rollout": {"group_size": 4, "tasks_per_step": 16, "sampling": {"max_tokens": 8}},
        "estimator": {"name": "value"},
        "critic": {"context": "reference", "warmup_updates": 20, "replay": {"capacity": 64, "max_reuse": 1}},
        "orchestrator": {"steps": 100, "max_off_policy_steps": 0},
    }
    study = {
        "name": "quick",
        "base": base,
        "reference": "pvf",
        "seeds": [0, 1, 2],
        "variants": [
            {"name": "pvf", "description": "privileged critic"},
            {"name": "mean", "overrides": {"estimator": {"name": "mean"}, "critic": None}},
            {"name": "vf", "overrides": {"critic": {"context": "none"}}},
            {"name": "rloo", "overrides": {"estimator": {"name": "rloo"}, "critic": None}},
        ],
        "ceiling": {"tasks": 4, "position_edges": [1, 3]},
        "quick": {"steps": 2, "tasks_per_step": 8, "variants": quick_variants},
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study))
    return path


def study_command(
    study: Path, out: Path, *extra: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lecritique", "study", str(study), "--out", str(out), "--quick", *extra],
        capture_output=True,
        text=True,
        timeout=800,
        env={**child_environment(REPO_ROOT, threads=2), **(env or {})},
    )


@pytest.mark.slow(seconds=140)
@pytest.mark.timeout(1500)
def test_quick_study_runs_reports_probes_the_ceiling_and_resumes(tmp_path):
    study, out = write_study(tmp_path), tmp_path / "out"
    first = study_command(study, out)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    data = json.loads((out / "study.json").read_text())
    assert set(data["runs"]) == {"pvf", "mean"} and set(data["runs"]["pvf"]) == {"0"}
    for variant in ("pvf", "mean"):
        run = data["runs"][variant]["0"]
        assert run["steps"] == 2 and run["finished"] and len(run["series"]["reward_mean"]["step"]) == 2
    assert data["runs"]["mean"]["0"]["series"]["value_explained_variance"]["step"] == []
    assert data["summary"]["variants"]["pvf"]["final_reward"]["n"] == 1
    assert data["summary"]["differences"]["mean vs pvf"]["final_reward"]["n"] == 1
    assert set(data["settings"]) == {"pvf/seed0", "mean/seed0"}
    # The ceiling: the critic variant only, at every response position of held-out states.
    assert list(data["ceiling"]) == ["pvf/seed0"]
    labels = [row["label"] for row in data["ceiling"]["pvf/seed0"]["buckets"]]
    assert labels == ["all", "t=0", "t=1-2", "t>=3"]
    markdown = (out / "study.md").read_text()
    assert (
        "| pvf (reference) |" in markdown
        and "| mean vs pvf | final reward |" in markdown
        and "Oracle ceiling" in markdown
    )
    assert "quick: checks the machinery, not results" in markdown and "± n/a (1 seed)" in markdown
    probe = data["ceiling"]["pvf/seed0"]
    assert probe["critic_version"] == data["runs"]["pvf"]["0"]["figures"]["critic_updates"], (
        "the last step's critic, not the newest"
    )
    assert (out / "study.png").read_bytes()[:4] == b"\x89PNG"

    again = study_command(study, out)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.count("finished before, skipped") == 2
    assert "oracle ceiling" not in again.stdout, "a probe already measured is read back, not repeated"

    # The study file edited since: its runs are neither skipped as finished nor continued (issue 41).
    edited = yaml.safe_load(study.read_text())
    edited["base"]["rollout"]["sampling"]["max_tokens"] = 7
    study.write_text(yaml.safe_dump(edited))
    drifted = study_command(study, out)
    assert drifted.returncode == 2, drifted.stdout[-3000:] + drifted.stderr[-3000:]
    said = " ".join(drifted.stdout.split())  # unwrapped
    assert "holds a run of a different spec (rollout.sampling.max_tokens: 8 -> 7)" in said


@pytest.mark.slow(seconds=90)
@pytest.mark.timeout(1500)
def test_quick_study_through_a_real_api_process(tmp_path, embedded_redis):
    settings = local_api_settings(
        embedded_redis.url,
        tmp_path / "api-runs",
        {"tester": TOKEN},
        {"*": {"modelRoots": [str(Path(quick_policy()).resolve().parent)]}},
    )
    api = ApiProcess(settings, tmp_path / "api.log").start()
    try:
        # Two critic-free variants: the submit / wait / resume machinery is the same for every spec,
        # and critic runs (with the ceiling probe) are covered by the local test above.
        study, out = write_study(tmp_path, ["mean", "rloo"]), tmp_path / "out"
        result = study_command(
            study,
            out,
            "--api",
            api.url,
            env={"LECRITIQUE_API_TOKEN": TOKEN, "LECRITIQUE_CLIENT_CONFIG": str(tmp_path / "none.json")},
        )
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:] + api.log_tail()
        data = json.loads((out / "study.json").read_text())
        assert set(data["runs"]) == {"mean", "rloo"}
        assert all(data["runs"][v]["0"]["steps"] == 2 for v in ("mean", "rloo"))
        ids = {
            json.loads((out / "runs" / v / "seed0" / "api_experiment.json").read_text())["id"]
            for v in ("mean", "rloo")
        }
        assert len(ids) == 2
        again = study_command(
            study,
            out,
            "--api",
            api.url,
            env={"LECRITIQUE_API_TOKEN": TOKEN, "LECRITIQUE_CLIENT_CONFIG": str(tmp_path / "none.json")},
        )
        assert again.returncode == 0 and again.stdout.count("finished before, skipped") == 2
    finally:
        api.stop()


def processes_naming(text: str) -> list[str]:
    """Command lines of the live processes that mention ``text`` (their run folder)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError):
            continue
        if entry.name.isdigit() and text in command:
            found.append(command)
    return found


@pytest.mark.slow(seconds=60)
@pytest.mark.timeout(600)
def test_sigterm_stops_the_run_in_progress_and_leaves_no_service_behind(tmp_path):
    # Found killing a running study with `kill`: the study process died at once and its run's six
    # service processes kept running (and holding the cores) with nobody to stop them.
    study, out = write_study(tmp_path), tmp_path / "out"
    process = subprocess.Popen(
        [sys.executable, "-m", "lecritique", "study", str(study), "--out", str(out), "--quick"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=child_environment(REPO_ROOT, threads=2),
    )
    try:
        deadline = time.monotonic() + 300
        while not any(" serve " in c for c in processes_naming(str(out))):
            assert process.poll() is None and time.monotonic() < deadline, "no service ever started"
            time.sleep(0.2)
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, output[-3000:]
    assert "interrupted: every service of the run in progress stopped" in output
    assert processes_naming(str(out)) == []
