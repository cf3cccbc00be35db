"""MLflow: metrics per step, the report as artifacts, in a tracking server or a local file store."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

from lecritique.tracking.base import FinalReport, TrackerContext, missing_package
from lecritique.tracking.config import MlflowTrackerConfig


class MlflowTracker:
    def __init__(self, config: MlflowTrackerConfig, context: TrackerContext) -> None:
        uri = (
            config.tracking_uri
            or os.environ.get("MLFLOW_TRACKING_URI")
            or (context.run_dir / "mlruns").resolve().as_uri()
        )
        if uri.startswith("file:") or "://" not in uri:
            # MLflow 3 keeps the file store in maintenance mode behind this opt-in; it needs no
            # database or server, which is what a local run wants.
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        try:
            from mlflow.entities import Metric, RunStatus
            from mlflow.tracking import MlflowClient
        except ImportError:
            raise missing_package("mlflow", "mlflow-skinny", "mlflow") from None
        self._metric, self._finished = Metric, RunStatus.to_string(RunStatus.FINISHED)
        self.client: Any = MlflowClient(tracking_uri=uri)
        self.tracking_uri = uri
        state = context.load_state("mlflow")
        self.run_id: str = state.get("run_id") or self._create_run(
            config.experiment_name or context.experiment_name, context
        )
        context.save_state("mlflow", {"run_id": self.run_id, "tracking_uri": uri})
        self._closed = False

    def _create_run(self, experiment_name: str, context: TrackerContext) -> str:
        experiment = self.client.get_experiment_by_name(experiment_name)
        experiment_id = (
            experiment.experiment_id
            if experiment is not None
            else self.client.create_experiment(experiment_name)
        )
        run = self.client.create_run(
            experiment_id,
            run_name=context.experiment_id,
            tags={"lecritique.experiment": context.experiment_id},
        )
        params = {key: str(value)[:500] for key, value in _flatten(context.spec).items()}
        for start in range(0, len(params), 100):  # MLflow takes at most 100 params per batch
            self.client.log_batch(
                run.info.run_id, params=[_param(k, v) for k, v in list(params.items())[start : start + 100]]
            )
        return str(run.info.run_id)

    def log_metrics(self, step: int, metrics: Mapping[str, float]) -> None:
        now = int(time.time() * 1000)
        self.client.log_batch(
            self.run_id, metrics=[self._metric(key, value, now, step) for key, value in metrics.items()]
        )

    def log_report(self, report: FinalReport) -> None:
        self.log_metrics(report.step, {f"summary/{key}": value for key, value in report.summary.items()})
        for path in (report.markdown, report.png):
            self.client.log_artifact(self.run_id, str(path))

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.client.set_terminated(self.run_id, self._finished)


def _param(key: str, value: str) -> Any:
    from mlflow.entities import Param

    return Param(key, value)


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested spec sections as dotted keys (``critic.replay.capacity``)."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, Mapping):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat
