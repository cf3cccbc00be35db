"""Each tracker backend for real, in its offline/local mode, read back with the tool's own reader."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lecritique.config import parse_spec
from lecritique.launch.local.processes import child_environment
from lecritique.tracking import FinalReport, TrackerContext, Trackers, check_tracker_packages, scalar_metrics
from lecritique.tracking.config import (
    MlflowTrackerConfig,
    TensorBoardTrackerConfig,
    TrackioTrackerConfig,
    WandbTrackerConfig,
)
from tests.integration.tracking.readback import (
    mlflow_run,
    tensorboard_report,
    tensorboard_scalars,
    trackio_logs,
    wandb_offline_run,
)

ROWS = [
    {
        "step": 1,
        "reward_mean": 0.25,
        "value_explained_variance": None,
        "tether_rho": 0.5,
        "policy_tokens": 96,
        "dropped_stale": 0,
    },
    {
        "step": 2,
        "reward_mean": 0.5,
        "value_explained_variance": 0.125,
        "tether_rho": 0.25,
        "policy_tokens": 80,
        "dropped_stale": 4,
    },
    {
        "step": 3,
        "reward_mean": 0.75,
        "value_explained_variance": 0.25,
        "tether_rho": 0.75,
        "policy_tokens": 64,
        "dropped_stale": 0,
        "eval_success": 0.5,
    },
]


def context(run_dir: Path, experiment_id: str = "exp-tracked") -> TrackerContext:
    run_dir.mkdir(parents=True, exist_ok=True)
    return TrackerContext(
        run_dir, experiment_id, "tracked", {"name": "tracked", "critic": {"replay": {"capacity": 64}}}
    )


def run_steps(trackers: Trackers, run_dir: Path, rows: list[dict[str, Any]] = ROWS) -> FinalReport:
    """What the orchestrator does: append each row, send it, and at the end the report."""
    with (run_dir / "metrics.jsonl").open("a") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")
            trackers.log_step(row)
    report = trackers.log_report(run_dir, "tracked")
    trackers.close()
    assert report is not None
    return report


def expected(key: str) -> dict[int, float]:
    return {row["step"]: float(row[key]) for row in ROWS if row.get(key) is not None}


def test_scalar_metrics_keeps_the_finite_numbers_of_a_row() -> None:
    row = {
        "step": 4,
        "reward_mean": 0.5,
        "value_explained_variance": None,
        "nan": math.nan,
        "ok": True,
        "name": "x",
        "tokens": 7,
    }
    assert scalar_metrics(row) == {"reward_mean": 0.5, "ok": 1.0, "tokens": 7.0}


def test_tensorboard_event_files(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    report = run_steps(Trackers.open([TensorBoardTrackerConfig()], context(run_dir)), run_dir)
    scalars = tensorboard_scalars(run_dir / "tensorboard")
    for key in (
        "reward_mean",
        "value_explained_variance",
        "tether_rho",
        "policy_tokens",
        "dropped_stale",
        "eval_success",
    ):
        assert scalars[key] == pytest.approx(expected(key)), key
    assert scalars["summary/reward_end"] == pytest.approx({3: report.summary["reward_end"]})
    text, images = tensorboard_report(run_dir / "tensorboard")
    assert text == (run_dir / "report.md").read_text() and images == ["report"]


def test_wandb_offline_run(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    report = run_steps(
        Trackers.open([WandbTrackerConfig(project="lecritique-tests", mode="offline")], context(run_dir)),
        run_dir,
    )
    history, summary, files = wandb_offline_run(run_dir)
    assert sorted(history) == [1, 2, 3]
    for key in ("reward_mean", "value_explained_variance", "tether_rho", "policy_tokens", "eval_success"):
        assert {step: values[key] for step, values in history.items() if key in values} == expected(key), key
    assert summary["reward_end"] == pytest.approx(report.summary["reward_end"])
    assert summary["report"]["_type"] == "image-file"
    assert (files / "report.md").read_text() == (run_dir / "report.md").read_text()
    assert (files / "report.png").exists()


def _wandb_service_children() -> list[int]:
    """Pids of this process's W&B service processes (``wandb-core``)."""
    import os

    from lecritique.launch.api_local.process_tree import alive, descendants

    def name(pid: int) -> str:
        try:
            return Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            return ""

    return [
        pid for pid in descendants(os.getpid()) if name(pid).startswith("wandb-core") and alive(pid, None)
    ]


def test_closing_a_wandb_run_waits_until_its_offline_log_is_written(tmp_path: Path) -> None:
    """``run.finish()`` returns before W&B's service has closed the run's transaction log (its
    last message to the service is fire-and-forget): read right after it, the offline run held no
    history on a loaded machine. Closing the tracker waits for the service to exit."""
    run_dir = tmp_path / "run"
    trackers = Trackers.open(
        [WandbTrackerConfig(project="lecritique-tests", mode="offline")], context(run_dir)
    )
    assert _wandb_service_children(), "W&B runs its service as a child process"
    run_steps(trackers, run_dir)
    assert _wandb_service_children() == [], "the service that writes the run's files is still running"
    assert sorted(wandb_offline_run(run_dir)[0]) == [1, 2, 3]


def test_mlflow_file_store(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    trackers = Trackers.open([MlflowTrackerConfig()], context(run_dir))
    report = run_steps(trackers, run_dir)
    state = json.loads((run_dir / "tracking" / "state.json").read_text())["mlflow"]
    assert state["tracking_uri"] == (run_dir / "mlruns").resolve().as_uri()
    client, run = mlflow_run(state["tracking_uri"], state["run_id"])
    for key in ("reward_mean", "value_explained_variance", "tether_rho", "eval_success"):
        assert {m.step: m.value for m in client.get_metric_history(run.info.run_id, key)} == expected(key), (
            key
        )
    assert run.data.metrics["summary/reward_end"] == pytest.approx(report.summary["reward_end"])
    assert run.data.params["critic.replay.capacity"] == "64" and run.info.run_name == "exp-tracked"
    assert sorted(a.path for a in client.list_artifacts(run.info.run_id)) == ["report.md", "report.png"]
    assert run.info.status == "FINISHED"


def test_trackio_local_store(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    trackers = Trackers.open([TrackioTrackerConfig(project="lecritique-tests")], context(run_dir))
    report = run_steps(trackers, run_dir)
    name = json.loads((run_dir / "tracking" / "state.json").read_text())["trackio"]["run_name"]
    logs = trackio_logs("lecritique-tests", name)
    for key in ("reward_mean", "value_explained_variance", "tether_rho", "eval_success"):
        assert {entry["step"]: entry[key] for entry in logs if key in entry} == expected(key), key
    final = next(entry for entry in logs if "report" in entry)
    assert final["report"]["_value"] == (run_dir / "report.md").read_text()
    assert (
        final["summary/reward_end"] == pytest.approx(report.summary["reward_end"]) and "report_png" in final
    )


def test_a_restarted_orchestrator_continues_the_same_runs(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    configs = [
        WandbTrackerConfig(project="lecritique-tests", mode="offline"),
        MlflowTrackerConfig(),
        TrackioTrackerConfig(project="lecritique-tests"),
    ]
    first = Trackers.open(configs, context(run_dir))
    first.log_step(ROWS[0])
    first.close()
    state = json.loads((run_dir / "tracking" / "state.json").read_text())
    run_steps(Trackers.open(configs, context(run_dir)), run_dir, ROWS[1:])
    assert json.loads((run_dir / "tracking" / "state.json").read_text()) == state
    client, run = mlflow_run(state["mlflow"]["tracking_uri"], state["mlflow"]["run_id"])
    assert [m.step for m in client.get_metric_history(run.info.run_id, "reward_mean")] == [1, 2, 3]
    assert len(client.search_runs([run.info.experiment_id])) == 1
    assert sorted(wandb_offline_run(run_dir)[0]) == [1, 2, 3]
    logs = trackio_logs("lecritique-tests", state["trackio"]["run_name"])
    assert sorted(entry["step"] for entry in logs if "reward_mean" in entry) == [1, 2, 3]
    # The same spec in another run directory is another run, not a continuation.
    other = tmp_path / "other"
    Trackers.open(configs[:1], context(other)).close()
    assert (
        json.loads((other / "tracking" / "state.json").read_text())["wandb"]["run_id"]
        != state["wandb"]["run_id"]
    )


class _Recorder:
    def __init__(self, fail_on: str | None = None) -> None:
        self.fail_on, self.steps, self.closed = fail_on, [], 0

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        if self.fail_on == "metrics" and step == 2:
            raise OSError("disk full")
        self.steps.append(step)

    def log_report(self, report: FinalReport) -> None:
        self.steps.append(-1)

    def close(self) -> None:
        self.closed += 1


def test_a_failing_tracker_is_switched_off_and_training_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    failing, healthy = _Recorder(fail_on="metrics"), _Recorder()
    trackers = Trackers([("failing", failing), ("healthy", healthy)])
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    run_steps(trackers, run_dir)
    assert failing.steps == [1] and failing.closed == 1
    assert healthy.steps == [1, 2, 3, -1] and healthy.closed == 1
    assert "tracker failing failed to log metrics; it is switched off" in caplog.text


def test_a_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a)
    )
    check_tracker_packages([TensorBoardTrackerConfig()])
    with pytest.raises(
        ImportError, match=r"tracker 'wandb' needs the wandb package: pip install 'lecritique\[wandb\]'"
    ):
        check_tracker_packages([TensorBoardTrackerConfig(), WandbTrackerConfig()])


def test_the_spec_lists_trackers_by_kind() -> None:
    base = {
        "name": "t",
        "environment": {"kind": "arithmetic"},
        "policy": {"path": "/m"},
        "estimator": {"name": "mean"},
    }
    spec = parse_spec(
        {
            **base,
            "tracking": [
                {"kind": "tensorboard"},
                {"kind": "wandb", "mode": "offline", "tags": ["a"]},
                {"kind": "mlflow"},
            ],
        }
    )
    assert [t.kind for t in spec.tracking] == ["tensorboard", "wandb", "mlflow"]
    assert parse_spec(base).tracking == []
    with pytest.raises(ValueError, match="tracking.0"):
        parse_spec({**base, "tracking": [{"kind": "neptune"}]})
    with pytest.raises(
        ValueError, match=r"tracking.0.projekt: unknown field 'projekt'; did you mean 'project'"
    ):
        parse_spec({**base, "tracking": [{"kind": "wandb", "projekt": "x"}]})
    for config in (TensorBoardTrackerConfig, WandbTrackerConfig, MlflowTrackerConfig, TrackioTrackerConfig):
        assert all(field.description for field in config.model_fields.values()), config


def test_importing_the_config_loads_no_tracker_library() -> None:
    code = (
        "import sys, lecritique.config, lecritique.tracking\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'wandb', 'mlflow', 'tensorboard', 'trackio', 'datasets', 'pyarrow', 'math_verify'}))"
    )
    env = child_environment(Path(__file__).resolve().parents[3])
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert result.stdout.strip() == "[]"
