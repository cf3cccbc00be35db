"""One episode as a growing token sequence, with what it takes to continue it from any token.

A conversation is one growing token sequence (see :mod:`lecritique.models.templates`): the first
prompt is encoded with special tokens, each action is the policy's tokens up to and including its
EOS, and each observation is encoded without special tokens and appended with mask 0. The record
keeps the environment state before every turn, so it can be cut before any policy token
(:meth:`EpisodeRecord.cut`) and played on from there: Monte-Carlo continuations of one state are
independent samples of the policy.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np

from lecritique.envs.base import EpisodeState, Task
from lecritique.trajectory import ENGINE_LOGPROBS_TEMPERATURE, LOGPROBS_TEMPERATURE_KEY, Trajectory


@dataclass
class EpisodeRecord:
    """One episode (finished or in progress) of one member of a group."""

    task: Task
    group_id: int
    member: int
    """Its index within the group."""
    prompt_text: str
    """The first prompt as rendered by the template."""
    prompt_ids: list[int]
    token_ids: list[int] = field(default_factory=list)
    """Everything after the prompt: actions (with their EOS) and observations."""
    policy_mask: list[bool] = field(default_factory=list)
    step_ids: list[int] = field(default_factory=list)
    """The turn of every token (an observation belongs to the turn it precedes)."""
    logprobs: list[float] = field(default_factory=list)
    turn_states: list[EpisodeState] = field(default_factory=list)
    """Environment state before each turn's action."""
    turn_starts: list[int] = field(default_factory=list)
    """Token index at which each turn's action starts."""
    actions: list[str] = field(default_factory=list)
    """Decoded text of every finished action."""
    policy_versions: list[int] = field(default_factory=list)
    """Policy version of every sampled action."""
    reward: float = 0.0
    done: bool = False
    diagnostic: str = ""

    @property
    def turn(self) -> int:
        """The turn being played: finished turns that did not end the episode."""
        return len(self.turn_states) - 1

    def partial_action(self) -> list[int]:
        """Tokens of the current turn's action generated so far."""
        return self.token_ids[self.turn_starts[-1] :]

    def end(self, reward: float, diagnostic: str) -> None:
        self.done, self.reward, self.diagnostic = True, float(reward), diagnostic

    def cut(self, t: int) -> EpisodeRecord:
        """The episode as it was before token ``t`` (a policy token), ready to be continued."""
        if not 0 <= t < len(self.token_ids) or not self.policy_mask[t]:
            raise ValueError(
                f"token {t} is not a policy token of this episode ({len(self.token_ids)} tokens)"
            )
        turn = int(np.searchsorted(self.turn_starts, t, side="right")) - 1
        return EpisodeRecord(
            task=self.task,
            group_id=self.group_id,
            member=self.member,
            prompt_text=self.prompt_text,
            prompt_ids=list(self.prompt_ids),
            token_ids=self.token_ids[:t],
            policy_mask=self.policy_mask[:t],
            step_ids=self.step_ids[:t],
            logprobs=self.logprobs[:t],
            turn_states=[copy.deepcopy(s) for s in self.turn_states[: turn + 1]],
            turn_starts=self.turn_starts[: turn + 1],
            actions=self.actions[:turn],
            policy_versions=self.policy_versions[:turn],
        )

    def trajectory(self, trajectory_id: str) -> Trajectory:
        """The finished episode as a trajectory."""
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
            # The oldest weights that acted in the episode decide its staleness.
            policy_version=min(self.policy_versions, default=0),
            metadata={
                "diagnostic": self.diagnostic,
                "turns": len(self.actions),
                # Recorded with the logprobs: the trainer reads it, it is never configured twice.
                LOGPROBS_TEMPERATURE_KEY: ENGINE_LOGPROBS_TEMPERATURE,
            },
        )
