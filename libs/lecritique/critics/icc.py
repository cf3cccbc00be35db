"""In-Context Conditioning (GenAC §5.1): what the critic is told about the current actor.

The orchestrator keeps a smoothed running average of the actor's batch mean reward and sends it,
with a short description of the actor, in every Evaluate request. A batch's own rewards enter the
average only after the batch has been evaluated, so no trajectory's critic input contains its own
reward. The values shown are recorded in each trajectory's metadata, so the value trainer
rebuilds exactly the prompt the evaluator scored.
"""

from __future__ import annotations

from dataclasses import dataclass

ACTOR_KEY = "critic_actor"
"""Trajectory metadata key: the actor description the critic was shown."""
REWARD_AVERAGE_KEY = "critic_reward_average"
"""Trajectory metadata key: the actor's running average reward the critic was shown."""
REWARD_AVERAGE_DECAY = 0.9
"""Default decay of the running average (critic kinds that do not configure it still report it)."""
INITIAL_REWARD_AVERAGE = 0.5
"""Default average shown before the first batch has finished."""


@dataclass
class RewardAverage:
    """Exponential moving average of batch mean rewards, starting from a prior."""

    decay: float
    value: float
    batches: int = 0

    def __post_init__(self) -> None:
        if not 0.0 <= self.decay < 1.0:
            raise ValueError(f"reward average decay must be in [0, 1), got {self.decay}")

    def update(self, batch_mean_reward: float) -> float:
        """Fold in one batch (the first batch replaces the prior); returns the new average."""
        if self.batches == 0:
            self.value = float(batch_mean_reward)
        else:
            self.value = self.decay * self.value + (1.0 - self.decay) * float(batch_mean_reward)
        self.batches += 1
        return self.value
