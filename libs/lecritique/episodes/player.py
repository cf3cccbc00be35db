"""The turn protocol, once: sample every live episode's action, step the environment, append.

Each round, every live episode either ends (its context cannot hold another action, or the turn
cap is reached: reward 0) or gets an action. Episodes with the same remaining action budget are
sampled in one batched call (a fresh turn's budget is ``sampling.max_tokens``; a record cut in the
middle of an action finishes that action). Then the environment steps every action of the call in
one batch: a finished episode gets its reward, the others the next observation.

The policy and the environment are protocols: the orchestrator plays through its gRPC clients,
``critic-eval`` and tiny builds through a local engine and environment (:mod:`~lecritique.episodes.local`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from lecritique.engines.base import SamplingParams
from lecritique.envs.base import EpisodeState, StepResult, Task
from lecritique.episodes.record import EpisodeRecord
from lecritique.models.templates import PromptTemplate

CONTEXT_LIMIT = "context limit reached"
TURN_LIMIT = "turn limit reached"


@dataclass(frozen=True)
class SampledAction:
    """One sampled action: its tokens (ending with EOS when it stopped), their logprobs, the weights."""

    token_ids: Sequence[int]
    logprobs: Sequence[float]
    policy_version: int = 0


class PolicySampler(Protocol):
    def sample(self, prompts: list[list[int]], n: int, sampling: SamplingParams) -> list[list[SampledAction]]:
        """``n`` actions for each prompt (token ids of the whole conversation so far)."""
        ...


class TurnEnvironment(Protocol):
    def reset(self, tasks: Sequence[Task]) -> list[EpisodeState]:
        """The first state of each task's episode."""
        ...

    def step(self, items: Sequence[tuple[EpisodeState, str]]) -> list[StepResult]:
        """Each (state, action) stepped."""
        ...


@dataclass
class EpisodePlayer:
    """Plays episodes of one policy in one environment, batched across episodes, turn by turn."""

    sampler: PolicySampler
    environment: TurnEnvironment
    tokenizer: Any
    template: PromptTemplate
    sampling: SamplingParams
    """How actions are sampled; ``max_tokens`` is one action's token budget."""
    max_context_tokens: int
    """Longest conversation (prompt + everything after it) the policy can hold."""
    max_turns: int | None = None
    """Safety cap on finished turns (None: the environment alone ends episodes)."""
    seeds: Callable[[], int | None] = field(default=lambda: None)
    """The seed of each sampling call, called once per call (None: the sampler's own stream)."""

    def __post_init__(self) -> None:
        if self.tokenizer.eos_token_id is None:
            raise ValueError("the policy tokenizer has no EOS token: actions could never end")

    def start(
        self, tasks: Sequence[Task], group_size: int, *, first_group_id: int = 0
    ) -> list[EpisodeRecord]:
        """``group_size`` fresh episodes per task, not yet played (group ids count from ``first_group_id``)."""
        records = []
        for index, (task, state) in enumerate(zip(tasks, self.environment.reset(tasks), strict=True)):
            prompt_text = self.template.initial(state.observation)
            prompt = self.tokenizer.encode(prompt_text, add_special_tokens=True)
            for member in range(group_size):
                records.append(
                    EpisodeRecord(
                        task,
                        first_group_id + index,
                        member,
                        prompt_text,
                        list(prompt),
                        turn_states=[copy.deepcopy(state)],
                        turn_starts=[0],
                    )
                )
        return records

    def play_groups(
        self,
        tasks: Sequence[Task],
        group_size: int,
        *,
        first_group_id: int = 0,
        seeds: Callable[[], int | None] | None = None,
        sampling: SamplingParams | None = None,
    ) -> list[EpisodeRecord]:
        """``group_size`` episodes per task, played to the end; the first actions of a group are
        sampled together (one prompt, ``n = group_size``), the later turns member by member."""
        seeds = seeds or self.seeds
        sampling = sampling or self.sampling
        records = self.start(tasks, group_size, first_group_id=first_group_id)
        # Members of a group share their prompt, so they start (or end at once) together.
        firsts = [r for r in records if not self._ended(r, sampling.max_tokens)]
        if firsts:
            call = sampling.model_copy(update={"seed": seeds()})
            prompts = [r.prompt_ids for r in firsts if r.member == 0]
            sampled = self.sampler.sample(prompts, group_size, call)
            self._act(firsts, [action for actions in sampled for action in actions])
        self.play(records, seeds=seeds, sampling=sampling)
        return records

    def play(
        self,
        records: Sequence[EpisodeRecord],
        *,
        seeds: Callable[[], int | None] | None = None,
        sampling: SamplingParams | None = None,
    ) -> None:
        """Play every record to the end of its episode, in place."""
        seeds = seeds or self.seeds
        sampling = sampling or self.sampling
        live = [r for r in records if not r.done]
        while live:
            budgets: dict[int, list[EpisodeRecord]] = {}
            spent = []
            for record in live:
                remaining = sampling.max_tokens - len(record.partial_action())
                if self._ended(record, remaining):
                    continue
                if remaining <= 0:
                    spent.append(record)  # the turn's token budget is already spent: the action is complete
                else:
                    budgets.setdefault(remaining, []).append(record)
            if spent:
                self._act(spent, [SampledAction((), ()) for _ in spent])
            for remaining, group in budgets.items():
                call = sampling.model_copy(update={"max_tokens": remaining, "seed": seeds()})
                sampled = self.sampler.sample([r.prompt_ids + r.token_ids for r in group], 1, call)
                self._act(group, [actions[0] for actions in sampled])
            live = [r for r in records if not r.done]

    def _ended(self, record: EpisodeRecord, remaining: int) -> bool:
        """End ``record`` (reward 0) when its context cannot hold the rest of the action or the turn cap is reached."""
        too_long = (
            len(record.prompt_ids) + len(record.token_ids) + max(remaining, 0) > self.max_context_tokens
        )
        if too_long or (self.max_turns is not None and record.turn >= self.max_turns):
            record.end(0.0, CONTEXT_LIMIT if too_long else TURN_LIMIT)
        return record.done

    def _decode(self, ids: list[int]) -> str:
        if ids and ids[-1] == self.tokenizer.eos_token_id:
            ids = ids[:-1]
        return str(self.tokenizer.decode(ids, skip_special_tokens=True))

    def _act(self, records: Sequence[EpisodeRecord], actions: Sequence[SampledAction]) -> None:
        """Append each action, step the environment once for all of them, append what it answers."""
        for record, action in zip(records, actions, strict=True):
            ids = [int(t) for t in action.token_ids]
            record.token_ids += ids
            record.policy_mask += [True] * len(ids)
            record.step_ids += [record.turn] * len(ids)
            record.logprobs += [float(x) for x in action.logprobs]
            if ids:
                record.policy_versions.append(int(action.policy_version))
            record.actions.append(self._decode(record.partial_action()))
        results = self.environment.step([(r.turn_states[-1], r.actions[-1]) for r in records])
        for record, result in zip(records, results, strict=True):
            if result.done:
                record.end(result.reward, result.diagnostic)
                continue
            observation = self.tokenizer.encode(
                self.template.continuation(result.observation), add_special_tokens=False
            )
            record.token_ids += observation
            record.policy_mask += [False] * len(observation)
            record.step_ids += [record.turn + 1] * len(observation)
            record.logprobs += [0.0] * len(observation)
            record.turn_states.append(result.state)
            record.turn_starts.append(len(record.token_ids))
