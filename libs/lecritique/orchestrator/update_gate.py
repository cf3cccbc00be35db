"""``critic.updates_per_step = k``: the evaluation stage waits for a critic k updates past the last one used.

Versions count publishes, so a version ``ceil(k / publish_every)`` past the one that scored the
previous batch has made at least k updates. The gate polls what the value evaluators serve
(``Info``); the batch is then scored, and scored again if the replica that answered still served
an older version.

It never waits for what cannot come: the value trainer's data for these updates are pushed by the
policy step that consumed the previous batch, and the next push needs this batch. Once that batch
is consumed, a trainer whose replay holds fewer than ``batch_size`` entries and whose update count
has not moved for a while is *starved* (the replay's uniform sampling left uses on too few entries, or stale groups were
dropped); the gate then scores with what is served, and the step's ``critic_updates_done``
says it fell short. So does a value plane that is down or a wait past ``wait_seconds``.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import grpc

from lecritique.rpc.replica_pool import NoReplicaAvailable

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.05
"""How often the gate asks the evaluator and the trainer."""
QUIET_SECONDS = 1.0
"""Least time without a new update before a trainer short of data counts as starved."""


class ServedVersion(Protocol):
    def served_version(self) -> int:
        """The critic version a value-evaluator replica serves."""
        ...


@dataclass(frozen=True)
class TrainerProgress:
    """What the gate reads of the value trainer's Status."""

    updates: int
    replay_depth: int
    update_seconds: float
    """Duration of its last update (0 when unknown)."""


@dataclass
class UpdateGate:
    """Blocks the evaluation stage until the critic has made ``updates_per_step`` more updates."""

    updates_per_step: int
    publish_every: int
    batch_size: int
    """Trajectories per critic update: a replay with fewer entries cannot feed one."""
    evaluator: ServedVersion
    trainer: Callable[[], TrainerProgress] | None
    wait_seconds: float
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    consumed: int = -1
    """The newest batch cursor the policy loop has consumed (and pushed to replay, unless degraded)."""

    def consumed_through(self, cursor: int) -> None:
        """The policy loop took the batch at ``cursor``: its trajectories are in the replay."""
        self.consumed = max(self.consumed, cursor)

    def target(self, previous_version: int) -> int | None:
        """The least version that may score the next batch (None: no bound)."""
        if self.updates_per_step == 0 or previous_version < 0:
            return None
        return previous_version + math.ceil(self.updates_per_step / self.publish_every)

    def deadline(self) -> float:
        return self.clock() + self.wait_seconds

    def wait(self, target: int, deadline: float, previous_cursor: int) -> str | None:
        """Wait until an evaluator serves ``target``; why it stopped short (None: it serves it).

        ``previous_cursor``: the batch scored by the version before; until the loop consumed it, the
        trainer's data for these updates may not be in the replay yet, so it cannot be starved."""
        quiet_since, last_updates = self.clock(), -1
        while True:
            try:
                if self.evaluator.served_version() >= target:
                    return None
                progress = self.trainer() if self.trainer is not None else None
            except (grpc.RpcError, NoReplicaAvailable) as error:
                return f"value plane unreachable ({error.__class__.__name__})"  # Evaluate degrades the batch if it stays down
            now = self.clock()
            if progress is not None:
                if progress.updates != last_updates or self.consumed < previous_cursor:
                    quiet_since, last_updates = now, progress.updates
                quiet = max(QUIET_SECONDS, 2 * progress.update_seconds)
                if progress.replay_depth < self.batch_size and now - quiet_since >= quiet:
                    return f"critic starved: {progress.replay_depth} replay entries < critic batch {self.batch_size}"
            if now >= deadline:
                return "waited orchestrator.rpc_deadline_seconds"
            self.sleep(POLL_SECONDS)


def update_gate(
    critic: object,
    critic_batch_size: int,
    evaluator: ServedVersion | None,
    trainer_status: Callable[[], object] | None,
    wait_seconds: float,
) -> UpdateGate | None:
    """The gate of a spec's critic (None: ``updates_per_step`` is 0, or the critic is never trained)."""
    from lecritique.critics.specs import TrainedCriticSpec

    if not isinstance(critic, TrainedCriticSpec) or critic.updates_per_step == 0 or evaluator is None:
        return None

    def progress() -> TrainerProgress:
        assert trainer_status is not None
        status = trainer_status()
        metrics = dict(getattr(status, "metrics", {}))
        return TrainerProgress(
            int(getattr(status, "updates", 0)),
            int(getattr(status, "replay_depth", 0)),
            float(metrics.get("step_seconds", 0.0)),
        )

    return UpdateGate(
        critic.updates_per_step,
        critic.publish_every,
        critic_batch_size,
        evaluator,
        progress if trainer_status is not None else None,
        wait_seconds,
    )
