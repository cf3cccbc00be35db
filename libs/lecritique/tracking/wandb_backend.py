"""Weights & Biases: one run per experiment (resumed after a restart), offline mode supported."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

from lecritique.tracking.base import FinalReport, TrackerContext, missing_package
from lecritique.tracking.config import WandbTrackerConfig


class WandbTracker:
    def __init__(self, config: WandbTrackerConfig, context: TrackerContext) -> None:
        try:
            import wandb
        except ImportError:
            raise missing_package("wandb", "wandb", "wandb") from None
        self._wandb = wandb
        state = context.load_state("wandb")
        # A fresh id per run directory: the same spec run twice must not append to one W&B run.
        run_id = state.get("run_id") or f"{context.experiment_id[:48]}-{secrets.token_hex(4)}"
        directory = context.folder(config.dir) if config.dir else context.run_dir
        directory.mkdir(parents=True, exist_ok=True)
        self._run: Any = wandb.init(
            project=config.project,
            entity=config.entity,
            mode=config.mode,
            dir=str(directory),
            id=run_id,
            name=context.experiment_id,
            resume="allow",
            group=config.group,
            tags=list(config.tags) or None,
            config=dict(context.spec),
        )
        context.save_state("wandb", {"run_id": run_id})
        self._closed = False

    def log_metrics(self, step: int, metrics: Mapping[str, float]) -> None:
        self._run.log(dict(metrics), step=step)

    def log_report(self, report: FinalReport) -> None:
        self._run.summary.update({**report.summary, "report": self._wandb.Image(str(report.png))})
        for path in (report.markdown, report.png):
            self._run.save(str(path), base_path=str(path.parent), policy="now")

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._run.finish()
            # finish() returns before W&B's service has written the run's transaction log out (its
            # last message to the service is fire-and-forget): an offline run read or synced the
            # moment the experiment ends could miss its history. teardown() waits for the service to
            # exit; the next run in this process starts a new one.
            self._wandb.teardown()
