"""The hidden-digits probe: an uninformative prompt, the hidden string only in the privileged context."""

from __future__ import annotations

import random

import pytest

from lecritique.envs import get_environment
from lecritique.envs.hidden_digits import PROMPT


def test_the_prompt_says_nothing_and_the_privileged_context_holds_the_string():
    env = get_environment("hidden_digits", digits=[2, 4])
    tasks = env.sample_tasks(64, "train", seed=0)
    assert {t.prompt for t in tasks} == {PROMPT}
    assert {len(t.privileged["hidden"]) for t in tasks} == {2, 3, 4}
    assert all(t.privileged["hidden"].isdigit() for t in tasks)
    assert env.sample_tasks(64, "train", seed=0) == tasks
    held = {t.task_id for t in env.sample_tasks(16, "eval", seed=0)}
    assert held.isdisjoint(t.task_id for t in tasks)


def test_exact_and_fraction_scoring():
    exact = get_environment("hidden_digits", digits=[3, 3])
    task = exact.sample_tasks(1, seed=1)[0]
    hidden = task.privileged["hidden"]
    wrong_last = hidden[:2] + str((int(hidden[2]) + 1) % 10)
    assert exact.score(task, f" {hidden}\n").reward == 1.0
    assert exact.score(task, wrong_last).reward == 0.0
    fraction = get_environment("hidden_digits", digits=[3, 3], scoring="fraction")
    assert fraction.score(task, wrong_last).reward == pytest.approx(2 / 3)
    assert fraction.score(task, hidden[:1]).reward == pytest.approx(1 / 3)
    assert fraction.score(task, hidden + "0").reward == 0.0
    assert fraction.score(task, hidden + "0").diagnostic.startswith("wrong digits")
    assert exact.demonstrations(task, random.Random(0)).turns == [(task.prompt, hidden)]


def test_bad_digit_ranges_are_named():
    with pytest.raises(ValueError, match="digits must satisfy"):
        get_environment("hidden_digits", digits=[0, 2])
    with pytest.raises(ValueError, match="scoring"):
        get_environment("hidden_digits", scoring="close")
