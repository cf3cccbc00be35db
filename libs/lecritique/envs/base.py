"""The environment interface every task suite implements (served by the environment-verifier).

Every environment is episodic and text-in/text-out. Single-turn tasks are one-step episodes, so
the orchestrator drives all of them the same way::

    state = env.reset(task)                 # state.observation: the first prompt
    while not state.done:
        action = policy(conversation)        # the policy's text up to its end-of-sequence token
        result = env.step(state, action)     # result.observation is shown to the policy next
        state = result.state

``score(task, completion)`` scores a single-turn completion directly. Episode state is a plain
JSON-serialisable dict so stateless verifier replicas can step any episode.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

Split = Literal["train", "eval"]


@dataclass(frozen=True)
class Task:
    """One problem instance."""

    task_id: str
    """Stable id, unique within the environment (derived from content, not from the seed)."""
    prompt: str
    """What the policy sees first."""
    reference: str | None
    """The reference answer as text, or None."""
    privileged: dict[str, str]
    """Privileged context only the critic may see, keyed by kind (e.g. "answer", "solution")."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """JSON-serialisable data the environment needs to score or step (puzzle, dataset entry)."""


@dataclass(frozen=True)
class ScoreResult:
    reward: float
    """In [0, 1]."""
    diagnostic: str
    """Short human-readable reason ("correct", "no <answer> tag", "illegal move r2c3=4", ...)."""


@dataclass
class EpisodeState:
    task: Task
    observation: str
    """Text shown to the policy before its next action (the prompt at turn 0)."""
    turn: int = 0
    done: bool = False
    data: dict[str, Any] = field(default_factory=dict)
    """Environment-specific JSON-serialisable state (e.g. the current grid)."""


@dataclass(frozen=True)
class StepResult:
    state: EpisodeState
    observation: str
    """Text appended after the action (empty when the episode is done)."""
    reward: float
    """Terminal reward when ``done``; 0 before."""
    done: bool
    diagnostic: str


@dataclass(frozen=True)
class Demonstration:
    """A reference episode: (observation, action) per turn, for supervised warm-starts."""

    turns: list[tuple[str, str]]


class Environment(ABC):
    """Base class of every task suite."""

    name: ClassVar[str]
    multi_turn: ClassVar[bool] = False
    privileged_kinds: ClassVar[tuple[str, ...]] = ()
    """Kinds of privileged context this environment's tasks carry in ``Task.privileged``."""
    prompt_budget_tokens: ClassVar[int] = 1
    """Tokens a first prompt may take, so an engine's context must hold this plus one action
    (Le Critique Appendix D's input budgets where it gives one; else just a non-empty prompt)."""
    max_turns: int = 1
    """Turn limit of an episode."""
    max_action_chars: int = 256
    """Upper bound on one action's length: the verifier scores a longer single-turn answer 0
    before any scorer sees it (multi-turn environments check their actions themselves)."""
    answer_sandbox_seconds: float = 0.0
    """Wall-clock limit of a sandbox that scoring one answer may start (0: none); the verifier's
    per-answer limit is raised above it, so the sandbox's own limit stops such an answer."""

    @abstractmethod
    def sample_tasks(self, n: int, split: Split = "train", seed: int = 0) -> list[Task]:
        """``n`` tasks of ``split``, deterministic per ``seed``; train and eval never share a task."""

    @abstractmethod
    def score(self, task: Task, completion: str) -> ScoreResult:
        """Score a complete single-turn completion; never raises on malformed text."""

    def sandbox_seconds(self, task: Task) -> float:
        """Wall-clock limit of a sandbox that scoring an answer to ``task`` may start (0: none)."""
        return self.answer_sandbox_seconds

    def reset(self, task: Task) -> EpisodeState:
        return EpisodeState(task=task, observation=task.prompt)

    def step(self, state: EpisodeState, action: str) -> StepResult:
        """Default single-turn episode: the first action is scored and ends it."""
        result = self.score(state.task, action)
        done_state = EpisodeState(
            task=state.task, observation="", turn=state.turn + 1, done=True, data=state.data
        )
        return StepResult(done_state, "", result.reward, True, result.diagnostic)

    def demonstrations(self, task: Task, rng: random.Random) -> Demonstration:
        """A reference episode for this task (used by ``models build-tiny`` warm-starts)."""
        raise NotImplementedError(f"environment {self.name!r} provides no demonstrations")
