"""Write ``arithmetic-word-problems.jsonl``: 400 multi-digit addition/subtraction word problems.

Deterministic (a fixed seed; ``tests/envs/test_dataset_example.py`` checks the file is current).
Columns:

- ``id``: stable row id;
- ``question``: the word problem (for a real instruction-tuned policy);
- ``expression``: the same computation as ``37+45-12`` (the prompt format of the tiny
  ``arithmetic`` policy, so the example runs on a CPU);
- ``answer``: the result (the reference);
- ``solution``: the worked steps (a second privileged column for the critic);
- ``split``: ``train`` or ``test`` (about 15% test).

Run: ``python examples/datasets/generate_problems.py``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

OUT = Path(__file__).resolve().parent / "arithmetic-word-problems.jsonl"
ROWS = 400
TEST_SHARE = 0.15
NAMES = ("Ada", "Ben", "Chen", "Dara", "Emil", "Fatima", "Gus", "Hana", "Ivo", "Jun", "Kofi", "Lena")
ITEMS = ("apples", "marbles", "stamps", "coins", "books", "shells", "cards", "pencils")
GAINS = ("finds {n} more", "buys {n} more", "is given {n} more", "wins {n} more")
LOSSES = ("gives {n} away", "loses {n}", "sells {n}", "uses {n}")


def _problem(rng: random.Random) -> tuple[list[int], list[str]]:
    """Operands (1-2 digits, mostly 2) and operators, with every running total >= 0."""
    while True:
        count = rng.choice((2, 2, 3))
        operands = [rng.randint(10, 99) if rng.random() < 0.8 else rng.randint(1, 9) for _ in range(count)]
        operators = [rng.choice("+-") for _ in range(count - 1)]
        total, ok = operands[0], True
        for operator, operand in zip(operators, operands[1:], strict=True):
            total = total + operand if operator == "+" else total - operand
            ok = ok and total >= 0
        if ok:
            return operands, operators


def make_row(index: int, rng: random.Random) -> dict[str, str]:
    operands, operators = _problem(rng)
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    sentences = [f"{name} has {operands[0]} {item}."]
    steps, total = [], operands[0]
    for operator, operand in zip(operators, operands[1:], strict=True):
        phrase = rng.choice(GAINS if operator == "+" else LOSSES).format(n=operand)
        sentences.append(f"Then {name} {phrase}.")
        after = total + operand if operator == "+" else total - operand
        steps.append(f"{total} {operator} {operand} = {after}")
        total = after
    sentences.append(f"How many {item} does {name} have now?")
    expression = str(operands[0]) + "".join(f"{o}{n}" for o, n in zip(operators, operands[1:], strict=True))
    return {
        "id": f"arith-{index:04d}",
        "question": " ".join(sentences),
        "expression": expression,
        "answer": str(total),
        "solution": "; ".join(steps),
        "split": "test" if rng.random() < TEST_SHARE else "train",
    }


def rows() -> list[dict[str, str]]:
    rng = random.Random(20261130)
    return [make_row(index, rng) for index in range(ROWS)]


def render() -> str:
    return "".join(json.dumps(row) + "\n" for row in rows())


if __name__ == "__main__":
    OUT.write_text(render())
    print(f"wrote {ROWS} problems to {OUT}")
