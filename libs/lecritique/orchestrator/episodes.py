"""Run groups of K episodes per task through rollout and the environment-verifier, turn by turn.

A conversation is one growing token sequence (see :mod:`lecritique.models.templates`): the first
prompt is encoded with special tokens, each action is the policy's tokens up to and including its
EOS, and each observation is encoded without special tokens and appended with mask 0. The
resulting :class:`~lecritique.trajectory.Trajectory` therefore records exactly the tokens the
policy conditioned on and generated, with the rollout engine's logprobs.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lecritique.envs.base import EpisodeState, Task
from lecritique.orchestrator.clients import EnvironmentClient, GeneratedCompletion, RolloutClient
from lecritique.trajectory import Trajectory

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SamplingSettings:
    temperature: float
    top_p: float
    max_tokens: int


@dataclass
class _Episode:
    task: Task
    group_id: int
    member: int
    prompt_text: str
    prompt_ids: list[int]
    state: EpisodeState
    ids: list[int] = field(default_factory=list)
    mask: list[bool] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    step_ids: list[int] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    policy_versions: list[int] = field(default_factory=list)
    reward: float = 0.0
    done: bool = False
    diagnostic: str = ""

    def add_action(self, completion: GeneratedCompletion, turn: int) -> None:
        self.ids.extend(int(t) for t in completion.token_ids)
        self.mask.extend([True] * len(completion.token_ids))
        self.logprobs.extend(float(x) for x in completion.logprobs)
        self.step_ids.extend([turn] * len(completion.token_ids))
        self.policy_versions.append(completion.policy_version)

    def add_observation(self, ids: list[int], turn: int) -> None:
        self.ids.extend(ids)
        self.mask.extend([False] * len(ids))
        self.logprobs.extend([0.0] * len(ids))
        self.step_ids.extend([turn] * len(ids))


@dataclass
class EpisodeBatch:
    """Finished episodes of one batch, group by group (K consecutive trajectories per task)."""

    trajectories: list[Trajectory]
    tasks: list[Task]
    """The task of every trajectory."""
    action_texts: list[list[str]]
    """Decoded actions of every trajectory (for text critics and LOO contexts)."""
    prompt_texts: list[str]


class EpisodeRunner:
    def __init__(
        self,
        rollout: RolloutClient,
        environment: EnvironmentClient,
        tokenizer: Any,
        template: Any,
        sampling: SamplingSettings,
        *,
        max_sequence_tokens: int,
        max_turns: int,
    ) -> None:
        if tokenizer.eos_token_id is None:
            raise ValueError("the policy tokenizer has no EOS token: actions could never end")
        self.rollout = rollout
        self.environment = environment
        self.tokenizer = tokenizer
        self.template = template
        self.sampling = sampling
        self.max_sequence_tokens = max_sequence_tokens
        self.max_turns = max_turns

    def _decode_action(self, token_ids: np.ndarray) -> str:
        ids = [int(t) for t in token_ids]
        if ids and ids[-1] == self.tokenizer.eos_token_id:
            ids = ids[:-1]
        return str(self.tokenizer.decode(ids, skip_special_tokens=True))

    def run(
        self,
        tasks: Sequence[Task],
        group_size: int,
        *,
        first_group_id: int,
        seed: int,
        trajectory_prefix: str,
        sampling: SamplingSettings | None = None,
    ) -> EpisodeBatch:
        sampling = sampling or self.sampling
        states = self.environment.reset(tasks)
        prompt_texts = [self.template.initial(s.observation) for s in states]
        prompts = [self.tokenizer.encode(text, add_special_tokens=True) for text in prompt_texts]
        episodes: list[_Episode] = []
        first = self.rollout.generate(
            [np.asarray(p) for p in prompts], group_size, temperature=sampling.temperature,
            top_p=sampling.top_p, max_tokens=sampling.max_tokens, seed=seed,
        )
        rows = zip(tasks, states, prompt_texts, prompts, first, strict=True)
        for index, (task, state, prompt_text, prompt, completions) in enumerate(rows):
            for member, completion in enumerate(completions):
                episode = _Episode(task, first_group_id + index, member, prompt_text, list(prompt), state)
                episode.add_action(completion, 0)
                episode.actions.append(self._decode_action(completion.token_ids))
                episodes.append(episode)

        turn = 0
        while True:
            acting = [e for e in episodes if not e.done and len(e.actions) == turn + 1]
            if acting:
                outcomes = self.environment.step([(e.state, e.actions[-1]) for e in acting])
                for episode, outcome in zip(acting, outcomes, strict=True):
                    episode.state = outcome.state
                    if outcome.done:
                        episode.done, episode.reward, episode.diagnostic = True, outcome.reward, outcome.diagnostic
                    else:
                        ids = self.tokenizer.encode(
                            self.template.continuation(outcome.observation), add_special_tokens=False
                        )
                        episode.add_observation(ids, turn + 1)
            turn += 1
            waiting = [e for e in episodes if not e.done]
            if not waiting:
                break
            for episode in waiting:
                too_long = len(episode.prompt_ids) + len(episode.ids) + sampling.max_tokens > self.max_sequence_tokens
                if too_long or turn >= self.max_turns:
                    # The model's context (or the safety turn cap) is exhausted: the episode fails.
                    episode.done, episode.reward = True, 0.0
                    episode.diagnostic = "context limit reached" if too_long else "turn limit reached"
            waiting = [e for e in episodes if not e.done]
            if not waiting:
                break
            next_turn = self.rollout.generate(
                [np.asarray(e.prompt_ids + e.ids) for e in waiting], 1, temperature=sampling.temperature,
                top_p=sampling.top_p, max_tokens=sampling.max_tokens, seed=seed + 7919 * turn,
            )
            for episode, (completion,) in zip(waiting, next_turn, strict=True):
                episode.add_action(completion, turn)
                episode.actions.append(self._decode_action(completion.token_ids))

        trajectories = [
            Trajectory(
                trajectory_id=f"{trajectory_prefix}-{e.group_id}-{e.member}",
                task_id=e.task.task_id,
                group_id=e.group_id,
                prompt_ids=np.asarray(e.prompt_ids),
                token_ids=np.asarray(e.ids),
                policy_mask=np.asarray(e.mask),
                logprobs=np.asarray(e.logprobs),
                step_ids=np.asarray(e.step_ids),
                reward=float(e.reward),
                # The oldest weights that acted in the episode decide its staleness.
                policy_version=min(e.policy_versions),
                metadata={"diagnostic": e.diagnostic, "turns": len(e.actions)},
            )
            for e in episodes
        ]
        return EpisodeBatch(
            trajectories=trajectories,
            tasks=[e.task for e in episodes],
            action_texts=[e.actions for e in episodes],
            prompt_texts=[e.prompt_text for e in episodes],
        )
