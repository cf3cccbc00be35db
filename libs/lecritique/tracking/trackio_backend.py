"""trackio: metrics per step and the report in trackio's local store (``trackio show``)."""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Mapping
from typing import Any

from lecritique.tracking.base import FinalReport, TrackerContext, missing_package
from lecritique.tracking.config import TrackioTrackerConfig


class TrackioTracker:
    def __init__(self, config: TrackioTrackerConfig, context: TrackerContext) -> None:
        if config.dir is not None:
            folder = str(context.folder(config.dir))
            if "trackio" in sys.modules and os.environ.get("TRACKIO_DIR") != folder:
                raise ValueError(
                    "trackio.dir must be set before trackio is imported (it reads TRACKIO_DIR once)"
                )
            os.environ["TRACKIO_DIR"] = folder
        try:
            import trackio
        except ImportError:
            raise missing_package("trackio", "trackio", "trackio") from None
        self._trackio: Any = trackio
        state = context.load_state("trackio")
        self.run_name: str = state.get("run_name") or f"{context.experiment_id}-{secrets.token_hex(3)}"
        self.project = config.project
        self._run: Any = trackio.init(
            project=config.project,
            name=self.run_name,
            config=dict(context.spec),
            resume="allow",
            embed=False,
            auto_log_cpu=False,
            auto_log_gpu=False,
        )
        context.save_state("trackio", {"run_name": self.run_name, "project": config.project})
        self._closed = False

    def log_metrics(self, step: int, metrics: Mapping[str, float]) -> None:
        self._run.log(dict(metrics), step=step)

    def log_report(self, report: FinalReport) -> None:
        media = {
            "report": self._trackio.Markdown(report.markdown.read_text()),
            "report_png": self._trackio.Image(str(report.png)),
        }
        self._run.log(
            {**{f"summary/{key}": value for key, value in report.summary.items()}, **media}, step=report.step
        )

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._run.finish()
