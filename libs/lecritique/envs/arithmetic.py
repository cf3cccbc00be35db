"""Single-turn integer arithmetic: ``37+45-12=`` -> ``70``.

Turn protocol::

    prompt   the expression followed by '=' (e.g. "37+45-12="), or, with ``answer_tags``, the
             expression, '=', a newline and the answer-tag instruction
    action   the integer result (e.g. "70"; surrounding whitespace ignored), or with
             ``answer_tags`` any text containing <answer>70</answer>

``*`` binds tighter than ``+``/``-``. Difficulty is set by the number of operands, the digits per
operand and the operators. Splits: by a hash of the expression. Privileged context: ``answer``.
"""

from __future__ import annotations

import random
import re
from typing import ClassVar, Literal

from pydantic import model_validator

from lecritique.envs.answers import ANSWER_INSTRUCTION, extract_answer, short, tagged
from lecritique.envs.base import Demonstration, Environment, ScoreResult, Split, Task
from lecritique.envs.config import EnvironmentConfigBase
from lecritique.envs.expressions import evaluate
from lecritique.envs.splits import derive_seed, sample_split, task_id

_INTEGER = re.compile(r"-?\d{1,40}")


class ArithmeticConfig(EnvironmentConfigBase):
    kind: Literal["arithmetic"] = "arithmetic"
    """Selects the single-turn arithmetic environment."""
    operands: tuple[int, int] = (2, 3)
    """Inclusive range of the number of operands per expression."""
    digits: tuple[int, int] = (1, 2)
    """Inclusive range of the number of digits per operand."""
    operators: tuple[Literal["+", "-", "*"], ...] = ("+", "-")
    """Operators to draw from (uniformly, per position)."""
    allow_negative: bool = False
    """Whether results below zero are allowed (otherwise such expressions are redrawn)."""
    answer_tags: bool = False
    """Require the answer inside <answer></answer> (the prompt then says so)."""

    @model_validator(mode="after")
    def _check_ranges(self) -> ArithmeticConfig:
        if not 2 <= self.operands[0] <= self.operands[1] <= 16:
            raise ValueError(f"operands must satisfy 2 <= low <= high <= 16, got {list(self.operands)}")
        if not 1 <= self.digits[0] <= self.digits[1] <= 9:
            raise ValueError(f"digits must satisfy 1 <= low <= high <= 9, got {list(self.digits)}")
        if not self.operators:
            raise ValueError("operators must not be empty")
        return self


class ArithmeticEnvironment(Environment):
    name: ClassVar[str] = "arithmetic"
    privileged_kinds: ClassVar[tuple[str, ...]] = ("answer",)
    max_action_chars: int = 64

    def __init__(self, config: ArithmeticConfig | None = None) -> None:
        self.config = config or ArithmeticConfig()
        if self.config.answer_tags:
            self.max_action_chars = 4096

    def _expression(self, rng: random.Random) -> str:
        count = rng.randint(*self.config.operands)
        parts: list[str] = []
        for position in range(count):
            digits = rng.randint(*self.config.digits)
            low = 0 if digits == 1 else 10 ** (digits - 1)
            if position:
                parts.append(rng.choice(self.config.operators))
            parts.append(str(rng.randint(low, 10**digits - 1)))
        return "".join(parts)

    def _candidate(self, seed: int, index: int) -> tuple[str, Task] | None:
        rng = random.Random(derive_seed(self.name, seed, index))
        expression = self._expression(rng)
        value = evaluate(expression).value
        if value < 0 and not self.config.allow_negative:
            return None
        prompt = f"{expression}=\n{ANSWER_INSTRUCTION}\n" if self.config.answer_tags else f"{expression}="
        answer = str(value)
        task = Task(
            task_id=task_id(self.name, expression),
            prompt=prompt,
            reference=answer,
            privileged={"answer": answer},
            metadata={"expression": expression, "answer": answer},
        )
        return expression, task

    def sample_tasks(self, n: int, split: Split = "train", seed: int = 0) -> list[Task]:
        return sample_split(
            lambda index: self._candidate(seed, index), n, split, self.name, self.config.eval_fraction
        )

    def score(self, task: Task, completion: str) -> ScoreResult:
        answer, problem = extract_answer(completion, self.config.answer_tags)
        if answer is None:
            return ScoreResult(0.0, problem)
        if not _INTEGER.fullmatch(answer):
            return ScoreResult(0.0, f"not an integer: {short(answer)}")
        if int(answer) == int(task.metadata["answer"]):
            return ScoreResult(1.0, "correct")
        return ScoreResult(0.0, f"wrong answer {short(answer)}")

    def demonstrations(self, task: Task, rng: random.Random) -> Demonstration:
        answer = str(task.metadata["answer"])
        return Demonstration([(task.prompt, tagged(answer) if self.config.answer_tags else answer)])
