"""``bench/inprocess.py`` is the reference of the pipeline benchmark's system-overhead ratio: the
orchestrator's loop with the services' work called directly. It builds the orchestrator the way
the services' wiring does, so a change to the orchestrator's collaborators must keep it running
(it once broke unnoticed and failed `make bench` halfway)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from lecritique.launch.local.launcher import REPO_ROOT
from lecritique.launch.local.processes import child_environment
from lecritique.reporting import load_metrics
from lecritique.weights import WeightStore
from tests.helm_support import tiny_spec_data
from tests.tiny_policies import quick_policy


def test_the_in_process_loop_trains_publishes_and_logs_every_step(tmp_path: Path) -> None:
    spec = tiny_spec_data("inprocess", steps=3, policy_path=quick_policy())
    spec.pop("critic")
    spec["estimator"] = {"name": "mean"}
    spec["rollout"]["tasks_per_step"] = 4
    spec["orchestrator"].update(eval_every=3, eval_tasks=4)
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(spec))
    out = tmp_path / "run"

    completed = subprocess.run(
        [sys.executable, str(REPO_ROOT / "bench" / "inprocess.py"), str(spec_path), str(out)],
        env=child_environment(REPO_ROOT),
        capture_output=True,
        text=True,
        timeout=600,
    )

    assert completed.returncode == 0, completed.stderr[-3000:]
    rows = load_metrics(out)
    assert [row["step"] for row in rows] == [0, 1, 2, 3]  # 0: the initial policy's held-out evaluation
    assert 0.0 <= rows[0]["eval_success"] <= 1.0
    rows = rows[1:]
    # The pipeline benchmark reads these from every step.
    for key in ("step_seconds", "train_seconds", "batch_wait_seconds", "rollout_seconds"):
        assert all(row[key] >= 0 for row in rows), key
    assert [row["policy_version"] for row in rows] == [1, 2, 3]  # version 0 is the starting policy
    latest = WeightStore(out / "weights").latest("policy")
    assert latest is not None and latest[0] == 3
    assert 0.0 <= rows[-1]["eval_success"] <= 1.0
