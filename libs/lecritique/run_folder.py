"""A run folder: what one experiment leaves on disk, and the one module that knows its layout.

::

    OUT/spec.json                  the resolved spec the run trained
    OUT/metrics.jsonl              one JSON row per policy step (and per held-out evaluation)
    OUT/orchestrator/state.json    the orchestrator's exactly-once checkpoint
    OUT/orchestrator/pending.bin   a policy step sent to the trainer and not yet finished

The orchestrator writes them (``orchestrator.state.CheckpointStore``, ``orchestrator.telemetry``),
``lecritique run`` writes ``spec.json``; the launchers, the study, critic-eval, the reports and the
CLI read them here, so "is this run finished?" and "what did it record?" have one answer each.
Why a module of its own: the layout used to be parsed by hand in the local launcher, re-derived by
the study's runner and read again by the reports, and a change to the checkpoint had four places to
miss. Standard library only, so every package may import it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SPEC_FILE = "spec.json"
METRICS_FILE = "metrics.jsonl"
CHECKPOINT_DIR = "orchestrator"
STATE_FILE = "state.json"
PENDING_FILE = "pending.bin"


@dataclass(frozen=True)
class RunFolder:
    """The ``--out`` folder of one run (``lecritique run``, a study's ``runs/<variant>/seed<s>``)."""

    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))

    @property
    def spec_path(self) -> Path:
        return self.path / SPEC_FILE

    @property
    def metrics_path(self) -> Path:
        return self.path / METRICS_FILE

    @property
    def checkpoint_dir(self) -> Path:
        return self.path / CHECKPOINT_DIR

    @property
    def state_path(self) -> Path:
        return self.checkpoint_dir / STATE_FILE

    @property
    def pending_path(self) -> Path:
        return self.checkpoint_dir / PENDING_FILE

    # -- spec.json ---------------------------------------------------------------------------

    def recorded_spec(self) -> dict[str, Any] | None:
        """The spec document ``spec.json`` records; None without one. Raises ValueError (naming the
        file) when it is there but not a JSON object: the caller decides what that refuses."""
        if not self.spec_path.is_file():
            return None
        try:
            document = json.loads(self.spec_path.read_text())
        except (OSError, ValueError) as error:
            raise ValueError(f"{self.spec_path} is not readable JSON: {error}") from None
        if not isinstance(document, dict):
            raise ValueError(f"{self.spec_path} holds {type(document).__name__}, not a spec object")
        return document

    def recorded_steps(self) -> int | None:
        """``orchestrator.steps`` of the recorded spec (None: no spec, or one that cannot be read)."""
        try:
            return int(self._recorded()["orchestrator"]["steps"])
        except (ValueError, KeyError, TypeError):
            return None

    def recorded_name(self) -> str | None:
        """The experiment ``name`` the recorded spec carries (None: none recorded)."""
        name = self._recorded().get("name")
        return None if name is None else str(name)

    def _recorded(self) -> dict[str, Any]:
        try:
            return self.recorded_spec() or {}
        except ValueError:
            return {}

    # -- the orchestrator's checkpoint ---------------------------------------------------------

    def checkpoint(self) -> dict[str, Any] | None:
        """``state.json`` as written (None: no checkpoint yet, or one that cannot be read)."""
        try:
            state = json.loads(self.state_path.read_text())
        except (OSError, ValueError):
            return None
        return state if isinstance(state, dict) else None

    def completed_step(self) -> int:
        """The last policy step the checkpoint records as complete (0: a fresh run)."""
        try:
            return int((self.checkpoint() or {})["completed_step"])
        except (KeyError, TypeError, ValueError):
            return 0

    def has_pending_step(self) -> bool:
        """A step was sent to the policy trainer and its bookkeeping is not done: not finished."""
        return self.pending_path.exists()

    def finished_step(self, steps: int) -> int | None:
        """The step a finished run reached, or None when it is not finished: no checkpoint, a step
        still pending, or fewer than ``steps`` steps and its wall-time budget
        (``orchestrator.max_seconds``) not spent."""
        state = self.checkpoint()
        if state is None or "completed_step" not in state or self.has_pending_step():
            return None
        try:
            completed = int(state["completed_step"])
        except (TypeError, ValueError):
            return None
        if completed < steps and not state.get("wall_budget_spent", False):
            return None
        return completed

    def ended_by(self, steps: int) -> str | None:
        """What ended a finished run: ``"steps"`` (all of them done), ``"wall budget"``
        (``orchestrator.max_seconds`` spent first), or None (not finished)."""
        if self.finished_step(steps) is None:
            return None
        return "wall budget" if (self.checkpoint() or {}).get("wall_budget_spent", False) else "steps"

    # -- metrics.jsonl ---------------------------------------------------------------------------

    def metrics(self) -> list[dict[str, Any]]:
        """Rows of ``metrics.jsonl`` in step order; a torn line (a killed writer) or a row that is not
        an object with a ``step`` is skipped. FileNotFoundError names the folder when there is none."""
        if not self.metrics_path.exists():
            raise FileNotFoundError(
                f"{self.metrics_path} does not exist: is {self.path} a lecritique run directory?"
            )
        rows = []
        for line in self.metrics_path.read_text().splitlines():
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict) and isinstance(row.get("step"), int):
                rows.append(row)
        return sorted(rows, key=lambda row: row["step"])

    def last_step(self) -> int:
        """The last step ``metrics.jsonl`` records (0: none, or no file)."""
        try:
            rows = self.metrics()
        except FileNotFoundError:
            return 0
        return int(rows[-1]["step"]) if rows else 0

    def is_finished(self, steps: int) -> bool:
        """All ``steps`` are in the metrics, or the checkpoint says the run finished
        (:meth:`finished_step`: its wall-time budget ended it)."""
        return self.last_step() >= steps or self.finished_step(steps) is not None
