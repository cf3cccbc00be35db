"""A real experiment with all four trackers: every number of metrics.jsonl reaches each of them.

Every service runs as a process (LocalLauncher), the orchestrator process opens the trackers
named in the spec and feeds them each row as it appends it; afterwards each store is read back
with its own tool and compared with metrics.jsonl, key by key and step by step.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lecritique.config import parse_spec
from lecritique.launch.local.launcher import LocalLauncher
from lecritique.tracking import scalar_metrics
from tests.helm_support import tiny_spec_data
from tests.integration.tracking.readback import (
    mlflow_run,
    tensorboard_report,
    tensorboard_scalars,
    trackio_logs,
    wandb_offline_run,
)
from tests.tiny_policies import quick_policy


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_every_tracker_receives_every_metrics_row_and_the_report(tmp_path: Path) -> None:
    data = tiny_spec_data("tracked-run", steps=3, policy_path=quick_policy())
    data["rollout"]["tasks_per_step"] = 8
    data["orchestrator"].update({"eval_every": 3})
    data["tracking"] = [
        {"kind": "tensorboard"},
        {"kind": "wandb", "project": "lecritique-live", "mode": "offline"},
        {"kind": "mlflow"},
        {
            "kind": "trackio",
            "project": "lecritique-live",
            "dir": os.environ["TRACKIO_DIR"],
        },  # set by conftest.py,
    ]
    out = tmp_path / "run"
    launcher = LocalLauncher(parse_spec(data), out)
    try:
        launcher.start_services()
        launcher.start_orchestrator()
        assert launcher.wait() == 0, (out / "logs" / "orchestrator.log").read_text()[-4000:]
    finally:
        launcher.stop()
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [0, 1, 2, 3]  # 0: the initial policy's held-out evaluation
    expected = {row["step"]: scalar_metrics(row) for row in rows}
    assert "eval_success" in expected[0] and "eval_success" in expected[3] and "reward_mean" in expected[1]
    state = json.loads((out / "tracking" / "state.json").read_text())

    board = tensorboard_scalars(out / "tensorboard")
    history, summary, files = wandb_offline_run(out)
    client, run = mlflow_run(state["mlflow"]["tracking_uri"], state["mlflow"]["run_id"])
    trackio = trackio_logs("lecritique-live", state["trackio"]["run_name"])
    for step, metrics in expected.items():
        for key, value in metrics.items():
            assert board[key][step] == pytest.approx(value, rel=1e-6, abs=1e-6), ("tensorboard", key, step)
            assert history[step][key] == pytest.approx(value), ("wandb", key, step)
            assert any(
                entry["step"] == step and entry.get(key) == pytest.approx(value) for entry in trackio
            ), ("trackio", key, step)
    for key in expected[3]:
        assert {m.step: m.value for m in client.get_metric_history(run.info.run_id, key)} == pytest.approx(
            {step: metrics[key] for step, metrics in expected.items() if key in metrics}
        ), ("mlflow", key)

    report = (out / "report.md").read_text()
    assert tensorboard_report(out / "tensorboard") == (report, ["report"])
    assert (files / "report.md").read_text() == report and "reward_end" in summary
    assert sorted(a.path for a in client.list_artifacts(run.info.run_id)) == ["report.md", "report.png"]
    assert any(entry.get("report", {}).get("_value") == report for entry in trackio)
