"""One object the orchestrator talks to: every configured tracker behind it.

A tracker that fails while the experiment runs (a full disk, a dropped connection) is logged
and switched off; training goes on and the other trackers keep receiving metrics. A tracker that
cannot start (its package is missing, bad settings) fails the experiment at start instead.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from lecritique.tracking.base import FinalReport, Tracker, TrackerContext, scalar_metrics
from lecritique.tracking.config import TrackerConfig

logger = logging.getLogger(__name__)

PACKAGES = {
    "tensorboard": ("tensorboard", "tensorboard"),
    "wandb": ("wandb", "wandb"),
    "mlflow": ("mlflow", "mlflow"),
    "trackio": ("trackio", "trackio"),
}
"""Backend -> (importable package, extra that installs it)."""


def _backends() -> dict[str, Callable[[Any, TrackerContext], Tracker]]:
    # Imported only when a spec asks for trackers: each backend's library loads lazily inside it.
    from lecritique.tracking.mlflow_backend import MlflowTracker
    from lecritique.tracking.tensorboard_backend import TensorBoardTracker
    from lecritique.tracking.trackio_backend import TrackioTracker
    from lecritique.tracking.wandb_backend import WandbTracker

    return {
        "tensorboard": TensorBoardTracker,
        "wandb": WandbTracker,
        "mlflow": MlflowTracker,
        "trackio": TrackioTracker,
    }


def check_tracker_packages(configs: Sequence[TrackerConfig]) -> None:
    """Raise ImportError naming the extra to install when a configured tracker's package is missing."""
    for config in configs:
        package, extra = PACKAGES[config.kind]
        if importlib.util.find_spec(package) is None:
            raise ImportError(
                f"tracker {config.kind!r} needs the {package} package: pip install 'lecritique[{extra}]'"
            )


class Trackers:
    """Fan-out over the configured trackers."""

    def __init__(self, trackers: Sequence[tuple[str, Tracker]] = ()) -> None:
        self._trackers = list(trackers)

    @classmethod
    def open(cls, configs: Sequence[TrackerConfig], context: TrackerContext) -> Trackers:
        backends = _backends() if configs else {}
        opened: list[tuple[str, Tracker]] = []
        try:
            for config in configs:
                opened.append((config.kind, backends[config.kind](config, context)))
                logger.info("tracking to %s", config.kind)
        except Exception:
            Trackers(opened).close()
            raise
        return cls(opened)

    @property
    def kinds(self) -> list[str]:
        return [kind for kind, _ in self._trackers]

    def _each(self, action: str, call: Callable[[Tracker], None]) -> None:
        for entry in list(self._trackers):
            kind, tracker = entry
            try:
                call(tracker)
            except Exception:
                logger.exception(
                    "tracker %s failed to %s; it is switched off for the rest of the run", kind, action
                )
                self._trackers.remove(entry)
                try:
                    tracker.close()
                except Exception:
                    logger.debug("closing the failed tracker %s failed too", kind, exc_info=True)

    def log_step(self, row: Mapping[str, Any]) -> None:
        """One metrics row as metrics.jsonl has it."""
        if self._trackers:
            step, scalars = int(row["step"]), scalar_metrics(row)
            self._each("log metrics", lambda tracker: tracker.log_metrics(step, scalars))

    def log_report(self, run_dir: Path, title: str) -> FinalReport | None:
        """Write the run's report (report.png, report.md) and send it to every tracker."""
        if not self._trackers:
            return None
        from lecritique.reporting import load_metrics, summarize, write_report

        png, markdown = write_report(run_dir, title=title)
        rows = load_metrics(run_dir)
        numbers = {key: float(value) for key, value in dataclasses.asdict(summarize(rows)).items()}
        report = FinalReport(
            png, markdown, {k: v for k, v in numbers.items() if math.isfinite(v)}, int(rows[-1]["step"])
        )
        self._each("log the report", lambda tracker: tracker.log_report(report))
        return report

    def close(self) -> None:
        self._each("close", lambda tracker: tracker.close())
        self._trackers.clear()


def open_trackers(spec: Any, run_dir: Path, experiment_id: str) -> Trackers:
    """The trackers of an experiment spec (``spec.tracking``), for its run directory."""
    context = TrackerContext(Path(run_dir), experiment_id, spec.name, spec.model_dump(mode="json"))
    return Trackers.open(spec.tracking, context)
