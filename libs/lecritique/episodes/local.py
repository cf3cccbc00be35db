"""A local rollout engine and environment as the episode player's policy and environment."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lecritique.engines.base import RolloutEngine, SamplingParams
from lecritique.envs.base import Environment, EpisodeState, StepResult, Task
from lecritique.episodes.player import SampledAction


@dataclass(frozen=True)
class EngineSampler:
    """Samples actions with an in-process engine (HF or vLLM)."""

    engine: RolloutEngine

    def sample(self, prompts: list[list[int]], n: int, sampling: SamplingParams) -> list[list[SampledAction]]:
        return [
            [SampledAction(c.token_ids, c.logprobs, int(c.metadata.get("weights_version", 0))) for c in group]
            for group in self.engine.generate(prompts, n=n, sampling=sampling)
        ]


@dataclass(frozen=True)
class LocalEnvironment:
    """Steps an in-process environment, one episode after the other."""

    environment: Environment

    def reset(self, tasks: Sequence[Task]) -> list[EpisodeState]:
        return [self.environment.reset(task) for task in tasks]

    def step(self, items: Sequence[tuple[EpisodeState, str]]) -> list[StepResult]:
        return [self.environment.step(state, action) for state, action in items]
