"""Episodes that can be continued from any state, for Monte-Carlo value estimates.

An :class:`EpisodeRecord` keeps what the orchestrator's trajectories keep (token ids after the
first prompt, policy mask, turn of every token, logprobs, reward) plus the environment state
before every turn, so a continuation can start from *any* token of any turn: cut the record at
token t (:meth:`EpisodeRecord.cut`), and :func:`play` finishes the action in progress (with the
remaining token budget of that turn), steps the environment, and plays on to the end.
Continuations of one state are independent samples of the fixed policy, so the mean reward of M
of them is an unbiased Monte-Carlo estimate of the state's value V(h_t).
"""

from __future__ import annotations

import copy
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lecritique.engines import RolloutEngine, SamplingParams
from lecritique.envs.base import Environment, EpisodeState, Task
from lecritique.models.templates import PromptTemplate
from lecritique.trajectory import Trajectory


@dataclass
class EpisodeRecord:
    """One episode (finished or in progress) with everything needed to continue it."""

    task: Task
    group_id: int
    prompt_ids: list[int]
    token_ids: list[int] = field(default_factory=list)
    policy_mask: list[bool] = field(default_factory=list)
    step_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    turn_states: list[EpisodeState] = field(default_factory=list)
    """Environment state before each turn's action."""
    turn_starts: list[int] = field(default_factory=list)
    """Token index at which each turn's action starts."""
    reward: float = 0.0
    done: bool = False
    diagnostic: str = ""

    @property
    def turn(self) -> int:
        return len(self.turn_states) - 1

    def partial_action(self) -> list[int]:
        """Tokens of the current turn's action generated so far."""
        return self.token_ids[self.turn_starts[-1] :]

    def cut(self, t: int) -> EpisodeRecord:
        """The episode as it was before token ``t`` (a policy token), ready to be continued."""
        if not 0 <= t < len(self.token_ids) or not self.policy_mask[t]:
            raise ValueError(f"token {t} is not a policy token of this episode ({len(self.token_ids)} tokens)")
        turn = int(np.searchsorted(self.turn_starts, t, side="right")) - 1
        return EpisodeRecord(
            task=self.task,
            group_id=self.group_id,
            prompt_ids=list(self.prompt_ids),
            token_ids=self.token_ids[:t],
            policy_mask=self.policy_mask[:t],
            step_ids=self.step_ids[:t],
            logprobs=self.logprobs[:t],
            turn_states=[copy.deepcopy(s) for s in self.turn_states[: turn + 1]],
            turn_starts=self.turn_starts[: turn + 1],
        )

    def trajectory(self, trajectory_id: str) -> Trajectory:
        return Trajectory(
            trajectory_id=trajectory_id,
            task_id=self.task.task_id,
            group_id=self.group_id,
            prompt_ids=np.asarray(self.prompt_ids),
            token_ids=np.asarray(self.token_ids),
            policy_mask=np.asarray(self.policy_mask, dtype=bool),
            logprobs=np.asarray(self.logprobs),
            step_ids=np.asarray(self.step_ids),
            reward=float(self.reward),
            policy_version=0,
            metadata={"diagnostic": self.diagnostic},
        )


@dataclass
class Player:
    """Plays episodes of one fixed policy in one environment."""

    engine: RolloutEngine
    tokenizer: Any
    template: PromptTemplate
    environment: Environment
    sampling: SamplingParams
    max_context_tokens: int
    rng: np.random.Generator

    def start(self, tasks: Sequence[Task], group_size: int) -> list[EpisodeRecord]:
        """``group_size`` fresh episodes per task, not yet played (group ids = task order)."""
        records = []
        for group, task in enumerate(tasks):
            state = self.environment.reset(task)
            prompt = self.tokenizer.encode(self.template.initial(state.observation), add_special_tokens=True)
            for _ in range(group_size):
                records.append(
                    EpisodeRecord(task, group, list(prompt), turn_states=[copy.deepcopy(state)], turn_starts=[0])
                )
        return records

    def _decode_action(self, ids: list[int]) -> str:
        if ids and ids[-1] == self.tokenizer.eos_token_id:
            ids = ids[:-1]
        return str(self.tokenizer.decode(ids, skip_special_tokens=True))

    def _end(self, record: EpisodeRecord, reward: float, diagnostic: str) -> None:
        record.done, record.reward, record.diagnostic = True, reward, diagnostic

    def play(self, records: Sequence[EpisodeRecord]) -> None:
        """Play every record to the end of its episode, in place (batched turn by turn)."""
        live = [r for r in records if not r.done]
        while live:
            budgets: dict[int, list[EpisodeRecord]] = defaultdict(list)
            for record in live:
                remaining = self.sampling.max_tokens - len(record.partial_action())
                too_long = len(record.prompt_ids) + len(record.token_ids) + max(remaining, 0) > self.max_context_tokens
                if too_long or record.turn >= self.environment.max_turns:
                    self._end(record, 0.0, "context limit reached" if too_long else "turn limit reached")
                elif remaining <= 0:
                    self._act(record, [], [])  # the turn's token budget is already spent
                else:
                    budgets[remaining].append(record)
            for remaining, group in budgets.items():
                sampling = self.sampling.model_copy(
                    update={"max_tokens": remaining, "seed": int(self.rng.integers(2**31))}
                )
                outputs = self.engine.generate([r.prompt_ids + r.token_ids for r in group], n=1, sampling=sampling)
                for record, (completion,) in zip(group, outputs, strict=True):
                    self._act(record, list(completion.token_ids), list(completion.logprobs))
            live = [r for r in records if not r.done]

    def _act(self, record: EpisodeRecord, ids: list[int], logprobs: list[float]) -> None:
        turn = record.turn
        record.token_ids += ids
        record.policy_mask += [True] * len(ids)
        record.step_ids += [turn] * len(ids)
        record.logprobs += logprobs
        result = self.environment.step(record.turn_states[-1], self._decode_action(record.partial_action()))
        if result.done:
            self._end(record, result.reward, result.diagnostic)
            return
        observation = self.tokenizer.encode(self.template.continuation(result.observation), add_special_tokens=False)
        record.token_ids += observation
        record.policy_mask += [False] * len(observation)
        record.step_ids += [turn + 1] * len(observation)
        record.logprobs += [0.0] * len(observation)
        record.turn_states.append(result.state)
        record.turn_starts.append(len(record.token_ids))
