"""A synthetic probe of privileged critics: guess a hidden digit string that only the critic sees.

Turn protocol::

    prompt   the same uninformative text for every task ("digits:")
    action   a digit string (surrounding whitespace ignored)

The hidden string (``digits`` long, drawn uniformly) is the task's privileged context
(``hidden``); the policy never sees it, so the prompt says nothing about the outcome and an
ordinary value function (VF) can do no better than the mean return. A privileged value
function (PVF, Le Critique §3) that reads its context and the response can predict the return
exactly once the response is written: ``exact`` scoring pays 1 for the whole string, ``fraction``
the share of positions that match. ``tests/integration/critics/test_privileged_context.py`` holds every
critic input layout the project ships to that (``docs/critics.md``). Splits: by a hash of the
hidden string, so held-out tasks are strings the critic never saw in training.
"""

from __future__ import annotations

import random
from typing import ClassVar, Literal

from pydantic import model_validator

from lecritique.envs.answers import clean_completion, short
from lecritique.envs.base import Demonstration, Environment, ScoreResult, Split, Task
from lecritique.envs.config import EnvironmentConfigBase
from lecritique.envs.splits import derive_seed, sample_split, task_id

PROMPT = "digits:"
"""The prompt of every task: it carries nothing about the hidden string."""


class HiddenDigitsConfig(EnvironmentConfigBase):
    kind: Literal["hidden_digits"] = "hidden_digits"
    """Selects the hidden-digits probe (a fixed prompt; the return depends on the critic's context)."""
    digits: tuple[int, int] = (2, 2)
    """Inclusive range of the hidden string's length."""
    scoring: Literal["exact", "fraction"] = "exact"
    """``exact``: 1 when the response is the hidden string, else 0; ``fraction``: the share of the
    hidden string's positions the response matches (a longer response scores 0)."""

    @model_validator(mode="after")
    def _check_digits(self) -> HiddenDigitsConfig:
        if not 1 <= self.digits[0] <= self.digits[1] <= 12:
            raise ValueError(f"digits must satisfy 1 <= low <= high <= 12, got {list(self.digits)}")
        return self


class HiddenDigitsEnvironment(Environment):
    name: ClassVar[str] = "hidden_digits"
    privileged_kinds: ClassVar[tuple[str, ...]] = ("hidden",)
    max_action_chars: int = 64

    def __init__(self, config: HiddenDigitsConfig | None = None) -> None:
        self.config = config or HiddenDigitsConfig()

    def _candidate(self, seed: int, index: int) -> tuple[str, Task]:
        rng = random.Random(derive_seed(self.name, seed, index))
        hidden = "".join(str(rng.randrange(10)) for _ in range(rng.randint(*self.config.digits)))
        task = Task(
            task_id=task_id(self.name, hidden),
            prompt=PROMPT,
            reference=hidden,
            privileged={"hidden": hidden},
            metadata={"hidden": hidden},
        )
        return hidden, task

    def sample_tasks(self, n: int, split: Split = "train", seed: int = 0) -> list[Task]:
        return sample_split(
            lambda index: self._candidate(seed, index), n, split, self.name, self.config.eval_fraction
        )

    def score(self, task: Task, completion: str) -> ScoreResult:
        text, problem = clean_completion(completion, self.max_action_chars)
        if text is None:
            return ScoreResult(0.0, problem)
        hidden, response = str(task.metadata["hidden"]), text.strip()
        if response == hidden:
            return ScoreResult(1.0, "correct")
        if self.config.scoring == "exact" or len(response) > len(hidden):
            return ScoreResult(0.0, f"wrong digits {short(response)}")
        matched = sum(a == b for a, b in zip(response, hidden, strict=False))
        return ScoreResult(matched / len(hidden), f"{matched} of {len(hidden)} digits")

    def demonstrations(self, task: Task, rng: random.Random) -> Demonstration:
        return Demonstration([(task.prompt, str(task.metadata["hidden"]))])
