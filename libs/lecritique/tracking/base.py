"""What every tracker backend implements, and what it is given.

A tracker receives each policy step's metrics row (the keys of ``metrics.jsonl``) and, once the
experiment has finished, its report (``report.png``, ``report.md`` and the summary numbers). A
restarted orchestrator resumes the same tracker run: backends keep their run ids in
``tracking/state.json`` of the run directory.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol


@dataclass(frozen=True)
class TrackerContext:
    run_dir: Path
    """The experiment's run directory (metrics.jsonl, report, default tracker folders)."""
    experiment_id: str
    """Experiment id (Redis keys, metric labels); the tracker run's name."""
    experiment_name: str
    """The spec's name."""
    spec: Mapping[str, Any] = field(default_factory=dict)
    """The resolved spec as JSON, logged as the run's configuration."""

    def folder(self, configured: str) -> Path:
        """A tracker folder from the spec: relative ones lie in the run directory (the only place the
        REST API lets a tenant's trackers write), absolute ones (local runs) stay where they are."""
        return self.run_dir / Path(configured).expanduser()

    @property
    def _state_path(self) -> Path:
        return self.run_dir / "tracking" / "state.json"

    def load_state(self, backend: str) -> dict[str, Any]:
        """What ``backend`` saved in an earlier process of this experiment ({} the first time)."""
        try:
            saved = json.loads(self._state_path.read_text())
        except (OSError, ValueError):
            return {}
        value = saved.get(backend, {})
        return dict(value) if isinstance(value, dict) else {}

    def save_state(self, backend: str, state: Mapping[str, Any]) -> None:
        path = self._state_path
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            saved = json.loads(path.read_text())
        except (OSError, ValueError):
            saved = {}
        saved[backend] = dict(state)
        temporary = path.with_name(path.name + ".tmp")
        temporary.write_text(json.dumps(saved, indent=1))
        temporary.replace(path)


@dataclass(frozen=True)
class FinalReport:
    png: Path
    """The curves (report.png)."""
    markdown: Path
    """The summary table (report.md)."""
    summary: Mapping[str, float]
    """The summary numbers (reward start/end, explained variance, rho, ...)."""
    step: int
    """The last policy step."""


class Tracker(Protocol):
    def log_metrics(self, step: int, metrics: Mapping[str, float]) -> None:
        """One policy step's scalar metrics."""

    def log_report(self, report: FinalReport) -> None:
        """The finished experiment's report."""

    def close(self) -> None:
        """Flush and end the run (idempotent)."""


def scalar_metrics(row: Mapping[str, Any]) -> dict[str, float]:
    """The finite numbers of a metrics row, without ``step`` (booleans as 0/1)."""
    scalars: dict[str, float] = {}
    for key, value in row.items():
        if key == "step" or isinstance(value, str) or value is None:
            continue
        if isinstance(value, bool | int | float) and math.isfinite(float(value)):
            scalars[key] = float(value)
    return scalars


def missing_package(backend: str, package: str, extra: str) -> ImportError:
    return ImportError(f"tracker {backend!r} needs the {package} package: pip install 'lecritique[{extra}]'")
