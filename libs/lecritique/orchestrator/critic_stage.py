"""The evaluation stage: every trajectory of a batch is shown to the critic and gets its values.

What the critic is shown is :func:`lecritique.critics.inputs.critic_queries`'s; this stage adds
In-Context Conditioning (GenAC §5.1): who the actor is, and the smoothed average of its batch
rewards, into which a batch's own rewards are folded only after it was evaluated.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from lecritique.critics.icc import RewardAverage
from lecritique.critics.inputs import attempt_of, critic_queries
from lecritique.critics.prompts import describe_actor
from lecritique.critics.specs import ActorConditioning, CriticSpec
from lecritique.critics.types import ActorInfo
from lecritique.orchestrator.clients import ValueEvaluatorClient
from lecritique.orchestrator.episodes import EpisodeBatch
from lecritique.trajectory import Trajectory


@dataclass
class Scored:
    """A batch's trajectories with the critic's values and what it took."""

    trajectories: list[Trajectory]
    """With critic contexts and values attached (as played, when there is no critic)."""
    value_version: int
    """The critic version that produced the values (-1: no critic)."""
    seconds: float
    stats: dict[str, float]
    """The value evaluator's statistics (states scored, parse failures, LLM tokens and cost)."""
    reward_average_after: tuple[float, int]
    """The actor's reward average and its batch count once this batch is folded in (checkpointed)."""


class CriticStage:
    def __init__(
        self, critic: CriticSpec | None, evaluator: ValueEvaluatorClient | None, tokenizer: object, policy_path: str | Path | None
    ) -> None:
        self.critic = critic
        self.evaluator = evaluator
        # The evaluation stage encodes critic contexts while the rollout stage encodes prompts:
        # it gets a tokenizer of its own (a Rust-backed tokenizer must not be shared across threads).
        self.tokenizer = tokenizer
        conditioning = critic.actor_conditioning() if critic is not None else ActorConditioning()
        self.actor_description = conditioning.description or describe_actor(policy_path)
        self.reward_average = RewardAverage(conditioning.reward_average_decay, conditioning.initial_reward_average)

    def restore(self, average: float | None, batches: int) -> None:
        """Continue from a checkpointed reward average (None: none yet, keep the prior)."""
        if average is not None:
            self.reward_average.value = average
            self.reward_average.batches = batches

    def score(self, episodes: EpisodeBatch) -> Scored:
        scored = self._values(episodes)
        # Folded in after evaluation: no critic input ever contains its own batch's rewards.
        self.reward_average.update(float(np.mean([t.reward for t in episodes.trajectories])))
        scored.reward_average_after = (self.reward_average.value, self.reward_average.batches)
        return scored

    def _values(self, episodes: EpisodeBatch) -> Scored:
        trajectories = episodes.trajectories
        if self.evaluator is None or self.critic is None:
            return Scored(trajectories, -1, 0.0, {}, (0.0, 0))
        actor = ActorInfo(self.actor_description, self.reward_average.value)
        attempts = [attempt_of(r, t) for r, t in zip(episodes.records, trajectories, strict=True)]
        queries = critic_queries(self.critic, attempts, self.tokenizer, actor)
        start = time.perf_counter()
        values, version, stats = self.evaluator.evaluate(queries, episodes.prompt_texts, actor)
        seconds = time.perf_counter() - start
        evaluated = [replace(q.trajectory, values=v, value_version=version) for q, v in zip(queries, values, strict=True)]
        return Scored(evaluated, version, seconds, {**stats, "reward_average": actor.reward_average}, (0.0, 0))
