"""Experiment trackers: every step's metrics and the final report to TensorBoard, W&B, MLflow, trackio.

``tracking:`` in the spec lists them (:mod:`lecritique.tracking.config`); the orchestrator opens
them with :func:`open_trackers` and feeds each metrics row as it appends it to ``metrics.jsonl``.
Each backend's library is an optional extra, imported only when a spec names it.
"""

from lecritique.tracking.base import FinalReport, Tracker, TrackerContext, scalar_metrics
from lecritique.tracking.config import (
    MlflowTrackerConfig,
    TensorBoardTrackerConfig,
    TrackerConfig,
    TrackioTrackerConfig,
    WandbTrackerConfig,
)
from lecritique.tracking.fanout import Trackers, check_tracker_packages, open_trackers

__all__ = [
    "FinalReport",
    "MlflowTrackerConfig",
    "TensorBoardTrackerConfig",
    "Tracker",
    "TrackerConfig",
    "TrackerContext",
    "Trackers",
    "TrackioTrackerConfig",
    "WandbTrackerConfig",
    "check_tracker_packages",
    "open_trackers",
    "scalar_metrics",
]
