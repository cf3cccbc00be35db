"""TensorBoard: scalars per step, the report as text and image, in event files."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lecritique.tracking.base import FinalReport, TrackerContext, missing_package
from lecritique.tracking.config import TensorBoardTrackerConfig


class TensorBoardTracker:
    def __init__(self, config: TensorBoardTrackerConfig, context: TrackerContext) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise missing_package("tensorboard", "tensorboard", "tensorboard") from None
        self.log_dir = context.folder(config.log_dir) if config.log_dir else context.run_dir / "tensorboard"
        self._writer: Any = SummaryWriter(log_dir=str(self.log_dir))

    def log_metrics(self, step: int, metrics: Mapping[str, float]) -> None:
        for key, value in metrics.items():
            self._writer.add_scalar(key, value, step)
        self._writer.flush()

    def log_report(self, report: FinalReport) -> None:
        import matplotlib.image

        self._writer.add_text("report", report.markdown.read_text(), report.step)
        self._writer.add_image(
            "report", matplotlib.image.imread(str(report.png)), report.step, dataformats="HWC"
        )
        for key, value in report.summary.items():
            self._writer.add_scalar(f"summary/{key}", value, report.step)
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()
