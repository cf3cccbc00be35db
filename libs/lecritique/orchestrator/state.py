"""The orchestrator's checkpoint: what a restarted orchestrator needs to continue exactly.

Policy steps are exactly-once: before step k is sent to the policy trainer, its batch (frozen
advantages included), the estimator state fitted on it and the next data cursors are written as a
*pending* record. A restarted orchestrator that finds a pending step asks the trainer whether
it already applied it (``Status.last_step``): if so it only finishes the bookkeeping, else it
resends the same batch. Files are replaced atomically (write + fsync + rename).
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lecritique.orchestrator.row import StepRow
from lecritique.run_folder import PENDING_FILE, STATE_FILE
from lecritique.trajectory import Trajectory


@dataclass
class OrchestratorState:
    completed_step: int = 0
    """Last policy step whose update, weight load and metrics are all done (steps count from 1)."""
    cursor: int = 0
    """Index of the next policy step's batch (its tasks and sampling seeds are the policy stream's
    draw of this index, :data:`~lecritique.orchestrator.batches.POLICY_DRAWS`)."""
    warmup_cursor: int = 0
    """Index of the next critic warm-up batch (the warm-up's own stream,
    :data:`~lecritique.orchestrator.batches.WARMUP_DRAWS`): the warm-up never moves ``cursor``."""
    estimator: dict[str, Any] = field(default_factory=dict)
    """``state_dict`` of the advantage estimator (TETHER's rho, EVPO's explained variance)."""
    warmup_done: bool = False
    """Whether the orchestrator is past the critic warm-up's wait (or, ``critic.warmup: auto`` with
    an estimator that steps while the critic warms, never waited)."""
    critic_warm_version: int = -1
    """The critic version published once the value trainer had made ``critic.warmup_updates``
    updates (-1: not warm yet): batches scored by it or a newer one use the critic."""
    policy_version: int = 0
    """Newest policy version loaded into rollout."""
    policy_path: str = ""
    """Weight-store path of that version."""
    elapsed_seconds: float = 0.0
    """Experiment wall time spent before the current orchestrator process started."""
    wall_budget_spent: bool = False
    """The run ended at ``orchestrator.max_seconds`` before its ``steps``: it is finished."""
    dropped_stale_total: int = 0
    """Rollouts dropped as too off-policy so far."""
    reward_average: float | None = None
    """The critic's In-Context Conditioning reward average after every batch before ``cursor``
    (None: no batch yet, the configured prior)."""
    reward_average_batches: int = 0
    """Batches folded into ``reward_average``."""
    degraded_streak: int = 0
    """Consecutive policy steps taken without the critic (value plane degraded), up to the last one."""
    newest_value_version: int = -1
    """The newest critic version that scored a batch before ``cursor`` (-1: none yet): a restarted
    orchestrator still refuses an evaluator that answers with an older one."""


def wall_budget_spent(state: OrchestratorState, steps: int, max_seconds: float | None) -> bool:
    """Whether ``orchestrator.max_seconds`` ends a run after its last completed step: the step's end
    is at or past the budget and steps remain (a run that reached its steps simply finished)."""
    return max_seconds is not None and state.completed_step < steps and state.elapsed_seconds >= max_seconds


@dataclass
class PendingStep:
    step: int
    trajectories: list[Trajectory]
    state_after: OrchestratorState
    metrics: StepRow


def _atomic_write(path: Path, data: bytes) -> None:
    temporary = path.with_name(path.name + ".tmp")
    with temporary.open("wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    temporary.replace(path)


class CheckpointStore:
    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        # The names are the run folder's (``lecritique.run_folder``), which readers go through.
        self.state_path = self.directory / STATE_FILE
        self.pending_path = self.directory / PENDING_FILE

    def load(self) -> OrchestratorState:
        if not self.state_path.exists():
            return OrchestratorState()
        return OrchestratorState(**json.loads(self.state_path.read_text()))

    def save(self, state: OrchestratorState) -> None:
        _atomic_write(self.state_path, json.dumps(asdict(state), indent=1).encode())

    def save_pending(self, pending: PendingStep) -> None:
        header = json.dumps(
            {
                "step": pending.step,
                "state_after": asdict(pending.state_after),
                "metrics": pending.metrics.to_dict(),
            }
        ).encode()
        parts = [struct.pack("<II", len(header), len(pending.trajectories)), header]
        for trajectory in pending.trajectories:
            payload = trajectory.to_bytes()
            parts += [struct.pack("<I", len(payload)), payload]
        _atomic_write(self.pending_path, b"".join(parts))

    def load_pending(self) -> PendingStep | None:
        if not self.pending_path.exists():
            return None
        data = memoryview(self.pending_path.read_bytes())
        header_len, count = struct.unpack_from("<II", data, 0)
        offset = 8
        header = json.loads(bytes(data[offset : offset + header_len]))
        offset += header_len
        trajectories = []
        for _ in range(count):
            (length,) = struct.unpack_from("<I", data, offset)
            offset += 4
            trajectories.append(Trajectory.from_bytes(data[offset : offset + length]))
            offset += length
        return PendingStep(
            step=header["step"],
            trajectories=trajectories,
            state_after=OrchestratorState(**header["state_after"]),
            metrics=StepRow.from_dict(header["metrics"]),
        )

    def clear_pending(self) -> None:
        self.pending_path.unlink(missing_ok=True)
