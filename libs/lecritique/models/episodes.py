"""Play whole episodes with a rollout engine: batched across tasks, one turn at a time.

A small, local version of the orchestrator's episode loop, used to measure a policy's success
rate through the environment's real ``reset``/``step`` (tiny-model builds, benchmarks, tests).
The conversation is extended in token ids (see :mod:`lecritique.models.templates`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lecritique.engines.base import RolloutEngine, SamplingParams
from lecritique.envs.base import Environment, EpisodeState, Task
from lecritique.models.templates import PromptTemplate


@dataclass
class EpisodeOutcome:
    """How one episode ended."""

    task_id: str
    reward: float
    """Terminal reward (0 when the episode was cut by the context limit)."""
    turns: int
    """Actions taken."""
    diagnostic: str
    """The environment's last diagnostic ("solved", "illegal move ...", ...)."""
    token_ids: list[int] = field(default_factory=list)
    """The whole conversation in token ids (prompt, actions with EOS, observations)."""


def run_episodes(
    engine: RolloutEngine,
    tokenizer: Any,
    template: PromptTemplate,
    environment: Environment,
    tasks: Sequence[Task],
    sampling: SamplingParams,
    max_context_tokens: int,
) -> list[EpisodeOutcome]:
    """Play one episode per task; every turn is one batched ``generate`` over live episodes.

    ``sampling.max_tokens`` bounds one action; an episode whose conversation would exceed
    ``max_context_tokens`` ends with reward 0 ("context limit").
    """
    states: list[EpisodeState] = [environment.reset(task) for task in tasks]
    conversations = [tokenizer.encode(template.initial(state.observation), add_special_tokens=True) for state in states]
    outcomes: list[EpisodeOutcome | None] = [None] * len(tasks)
    live = list(range(len(tasks)))
    while live:
        runnable = [i for i in live if len(conversations[i]) + sampling.max_tokens <= max_context_tokens]
        for index in set(live) - set(runnable):
            outcomes[index] = EpisodeOutcome(
                tasks[index].task_id, 0.0, states[index].turn, "context limit", conversations[index]
            )
        live = runnable
        if not live:
            break
        completions = engine.generate([conversations[i] for i in live], n=1, sampling=sampling)
        still_live = []
        for index, group in zip(live, completions, strict=True):
            completion = group[0]
            result = environment.step(states[index], completion.text)
            conversations[index] = conversations[index] + completion.token_ids
            states[index] = result.state
            if result.done:
                outcomes[index] = EpisodeOutcome(
                    tasks[index].task_id, result.reward, result.state.turn, result.diagnostic, conversations[index]
                )
                continue
            conversations[index] += tokenizer.encode(template.continuation(result.observation), add_special_tokens=False)
            still_live.append(index)
        live = still_live
    return [outcome for outcome in outcomes if outcome is not None]


def success_rate(outcomes: Sequence[EpisodeOutcome]) -> float:
    """Mean terminal reward: the success rate for 0/1 rewards."""
    if not outcomes:
        raise ValueError("success_rate of no episodes")
    return sum(outcome.reward for outcome in outcomes) / len(outcomes)
