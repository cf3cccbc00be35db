"""Single-turn Countdown: reach a target from given numbers with ``+ - *`` and parentheses.

Turn protocol::

    prompt   the numbers, ' -> ', the target and a newline, e.g. "3 5 7 -> 22\\n"
             (with ``answer_tags`` the answer-tag instruction follows on the next line)
    action   an expression over the given numbers, e.g. "3*5+7" (whitespace ignored), or with
             ``answer_tags`` any text containing <answer>3*5+7</answer>

The expression is verified by a bounded parser (no ``eval``): it may use only ``+ - *``,
parentheses and the given numbers, each as often as it is given (all of them when ``use_all``),
and must evaluate to the target. Tasks are generated from a random expression tree over the
drawn numbers, so every task has a solution (its reference). Splits: by a hash of the sorted
numbers and the target. Privileged context: ``answer`` (one solution expression).
"""

from __future__ import annotations

import random
from collections import Counter
from typing import ClassVar, Literal

from pydantic import model_validator

from lecritique.envs.answers import ANSWER_INSTRUCTION, extract_answer, short, tagged
from lecritique.envs.base import Demonstration, Environment, ScoreResult, Split, Task
from lecritique.envs.config import EnvironmentConfigBase
from lecritique.envs.expressions import ExpressionError, evaluate, random_tree
from lecritique.envs.splits import derive_seed, sample_split, task_id


class CountdownConfig(EnvironmentConfigBase):
    kind: Literal["countdown"] = "countdown"
    """Selects the single-turn Countdown environment."""
    numbers: tuple[int, int] = (3, 3)
    """Inclusive range of how many numbers a task gives."""
    max_number: int = 10
    """Given numbers are drawn from 1..max_number."""
    max_target: int = 100
    """Targets must lie in 1..max_target (expressions outside are redrawn)."""
    operators: tuple[Literal["+", "-", "*"], ...] = ("+", "-", "*")
    """Operators the generator uses (a solution may use any of + - *)."""
    use_all: bool = True
    """Whether a solution must use every given number exactly once (otherwise at most once)."""
    answer_tags: bool = False
    """Require the expression inside <answer></answer> (the prompt then says so)."""

    @model_validator(mode="after")
    def _check_ranges(self) -> CountdownConfig:
        if not 2 <= self.numbers[0] <= self.numbers[1] <= 8:
            raise ValueError(f"numbers must satisfy 2 <= low <= high <= 8, got {list(self.numbers)}")
        if not 2 <= self.max_number <= 1000:
            raise ValueError(f"max_number must be in 2..1000, got {self.max_number}")
        if self.max_target < 1:
            raise ValueError(f"max_target must be >= 1, got {self.max_target}")
        if not self.operators:
            raise ValueError("operators must not be empty")
        return self


class CountdownEnvironment(Environment):
    name: ClassVar[str] = "countdown"
    privileged_kinds: ClassVar[tuple[str, ...]] = ("answer",)
    max_action_chars: int = 128

    def __init__(self, config: CountdownConfig | None = None) -> None:
        self.config = config or CountdownConfig()
        if self.config.answer_tags:
            self.max_action_chars = 4096

    def _candidate(self, seed: int, index: int) -> tuple[str, Task] | None:
        rng = random.Random(derive_seed(self.name, seed, index))
        count = rng.randint(*self.config.numbers)
        numbers = [rng.randint(1, self.config.max_number) for _ in range(count)]
        tree = random_tree(numbers, list(self.config.operators), rng)
        if not 1 <= tree.value <= self.config.max_target:
            return None
        shown = sorted(numbers)
        head = f"{' '.join(map(str, shown))} -> {tree.value}\n"
        prompt = f"{head}{ANSWER_INSTRUCTION}\n" if self.config.answer_tags else head
        solution = tree.text()
        content = f"{shown} {tree.value}"
        task = Task(
            task_id=task_id(self.name, content),
            prompt=prompt,
            reference=solution,
            privileged={"answer": solution},
            metadata={"numbers": shown, "target": tree.value, "solution": solution},
        )
        return content, task

    def sample_tasks(self, n: int, split: Split = "train", seed: int = 0) -> list[Task]:
        return sample_split(
            lambda index: self._candidate(seed, index), n, split, self.name, self.config.eval_fraction
        )

    def score(self, task: Task, completion: str) -> ScoreResult:
        answer, problem = extract_answer(completion, self.config.answer_tags)
        if answer is None:
            return ScoreResult(0.0, problem)
        if len(answer) > self.max_action_chars:
            return ScoreResult(0.0, f"expression longer than {self.max_action_chars} characters")
        try:
            evaluated = evaluate(answer)
        except ExpressionError as error:
            return ScoreResult(0.0, f"malformed expression {short(answer)}: {error}")
        used, given = Counter(evaluated.numbers), Counter(task.metadata["numbers"])
        if used - given:
            return ScoreResult(0.0, f"uses numbers not given: {sorted((used - given).elements())}")
        if self.config.use_all and used != given:
            return ScoreResult(0.0, f"leaves numbers unused: {sorted((given - used).elements())}")
        if evaluated.value != task.metadata["target"]:
            return ScoreResult(0.0, f"evaluates to {evaluated.value}, not {task.metadata['target']}")
        return ScoreResult(1.0, "correct")

    def demonstrations(self, task: Task, rng: random.Random) -> Demonstration:
        solution = str(task.metadata["solution"])
        return Demonstration([(task.prompt, tagged(solution) if self.config.answer_tags else solution)])
