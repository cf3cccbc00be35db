"""The shipped "PVF on my own math problems" example, run for real with ``lecritique run``.

The example spec (examples/datasets/my-math-pvf.yaml) with a short run and a briefly warm-started
tiny arithmetic policy: every service a process, the tasks read from the shipped JSONL file next
to the spec, the critic's privileged context taken from the file's ``solution`` column, which the
policy never sees.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lecritique.launch.local.processes import child_environment
from tests.tiny_policies import quick_arithmetic_policy
from tests.unit.envs.dataset_support import EXAMPLE_DATA, example_rows, write_jsonl

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE_SPEC = ROOT / "examples" / "datasets" / "my-math-pvf.yaml"


def _lecritique_run(
    spec: Path, out: Path, extra_env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    env = {**child_environment(ROOT), **(extra_env or {})}
    return subprocess.run(
        [sys.executable, "-m", "lecritique", "run", str(spec), "--out", str(out)],
        env=env,
        cwd=str(ROOT),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _short_copy(folder: Path, **changes: object) -> Path:
    """The example spec and its data file in ``folder``, shortened; the spec keeps the relative path."""
    spec = yaml.safe_load(EXAMPLE_SPEC.read_text())
    spec["policy"] = {"path": str(quick_arithmetic_policy())}
    spec["rollout"]["tasks_per_step"] = 8
    spec["critic"].update(
        {"warmup_updates": 2, "privileged_key": "solution", "replay": {"capacity": 64, "max_reuse": 2}}
    )
    spec["orchestrator"] = {"steps": 3, "eval_every": 3, "eval_tasks": 8}
    spec.update(changes)
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(EXAMPLE_DATA, folder / EXAMPLE_DATA.name)
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_dataset_example_runs_end_to_end(tmp_path: Path) -> None:
    spec = _short_copy(tmp_path / "project")
    prompt_log, input_log = tmp_path / "prompts.jsonl", tmp_path / "critic-inputs.jsonl"
    result = _lecritique_run(
        spec,
        tmp_path / "run",
        {"LECRITIQUE_ROLLOUT_PROMPT_LOG": str(prompt_log), "LECRITIQUE_VALUE_INPUT_LOG": str(input_log)},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [0, 1, 2, 3]  # 0: the initial policy's held-out evaluation
    assert "eval_success" in rows[0] and "eval_success" in rows[-1]
    assert all("value_explained_variance" in row for row in rows[1:])
    assert (tmp_path / "run" / "report.md").exists() and (tmp_path / "run" / "report.png").exists()
    resolved = json.loads((tmp_path / "run" / "spec.json").read_text())
    assert resolved["environment"]["path"] == str(tmp_path / "project" / EXAMPLE_DATA.name)

    solutions = {row["solution"] for row in example_rows()}
    contexts = [json.loads(line)["context_text"] for line in input_log.read_text().splitlines()]
    assert contexts and all(
        text.startswith("ref:") and text[4:].rstrip("\n") in solutions for text in contexts
    )
    prompts = [json.loads(line) for line in prompt_log.read_text().splitlines()]
    expressions = {row["expression"] + "=" for row in example_rows()}
    assert prompts and all(
        any(expression in str(prompt) for expression in expressions) for prompt in prompts[:20]
    )
    assert not any(solution in str(prompt) for prompt in prompts for solution in solutions)


def test_a_bad_row_stops_lecritique_run_before_any_service_starts(tmp_path: Path) -> None:
    spec = yaml.safe_load(EXAMPLE_SPEC.read_text())
    rows = example_rows()[:20]
    rows[11]["answer"] = "twelve"
    spec["environment"]["path"] = str(write_jsonl(tmp_path / "bad.jsonl", rows))
    spec["policy"] = {"path": str(tmp_path / "no-model")}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    result = _lecritique_run(path, tmp_path / "run", timeout=120)
    assert result.returncode == 2
    assert "row 12 (line 12), column 'answer': reference 'twelve' is not a number" in " ".join(
        result.stdout.split()
    )
    assert not (tmp_path / "run").exists()
