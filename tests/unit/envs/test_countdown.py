"""Countdown: safe verification of expressions over the given numbers."""

from __future__ import annotations

import random

import pytest

from lecritique.envs import get_environment
from lecritique.envs.expressions import ExpressionError, evaluate


def test_reference_solutions_score_one_and_prompts_are_compact():
    env = get_environment("countdown", numbers=[3, 4])
    for task in env.sample_tasks(100, seed=0):
        assert task.prompt.endswith("\n") and " -> " in task.prompt
        assert env.score(task, task.reference).reward == 1.0, (task.prompt, task.reference)
        assert 1 <= task.metadata["target"] <= 100
        assert task.privileged == {"answer": task.reference}


def test_alternative_solutions_and_rule_violations():
    env = get_environment("countdown")
    task = next(
        t for t in env.sample_tasks(200, seed=1) if t.metadata["numbers"] == sorted(t.metadata["numbers"])
    )
    a, b, c = task.metadata["numbers"]
    target = task.metadata["target"]
    # Any expression over the same numbers with the same value is accepted.
    for candidate in (f"{a}+{b}+{c}", f"{a}*{b}*{c}", f"({a}+{b})*{c}", f"{c}-{b}-{a}"):
        expected = 1.0 if evaluate(candidate).value == target else 0.0
        assert env.score(task, candidate).reward == expected
    assert "not given" in env.score(task, f"{a}+{b}+{c}+{target}").diagnostic
    assert "unused" in env.score(task, f"{a}+{b}").diagnostic
    assert "malformed" in env.score(task, f"{a}/{b}+{c}").diagnostic
    assert "malformed" in env.score(task, "__import__('os').system('true')").diagnostic
    assert env.score(task, f"{a}{b}+{c}").reward == 0.0  # concatenating digits is not allowed


def test_use_all_false_allows_subsets():
    env = get_environment("countdown", use_all=False)
    task = env.sample_tasks(1, seed=2)[0]
    first = task.metadata["numbers"][0]
    result = env.score(task, str(first))
    assert result.reward == (1.0 if first == task.metadata["target"] else 0.0)
    assert "unused" not in result.diagnostic


def test_expression_parser_bounds():
    assert evaluate("2*(3+4)-5").value == 9
    assert evaluate(" 1 + 2 * 3 ").numbers == (1, 2, 3)
    for bad in ("", "1+", "(1+2", "1+2)", "1**2", "-1", "((((" * 20 + "1" + "))))" * 20, "1" * 13, "9" * 300):
        with pytest.raises(ExpressionError):
            evaluate(bad)


def test_demonstration_and_splits():
    env = get_environment("countdown", eval_fraction=0.25)
    task = env.sample_tasks(1, seed=3)[0]
    assert env.demonstrations(task, random.Random(0)).turns == [(task.prompt, task.reference)]
    train = env.sample_tasks(1000, split="train", seed=0)
    evals = env.sample_tasks(300, split="eval", seed=1)
    assert not {t.prompt for t in train} & {t.prompt for t in evals}
    tagged = get_environment("countdown", answer_tags=True)
    task = tagged.sample_tasks(1, seed=0)[0]
    assert tagged.score(task, tagged.demonstrations(task, random.Random(0)).turns[0][1]).reward == 1.0
