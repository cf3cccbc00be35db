"""Single-turn arithmetic: answers, difficulty knobs, splits, demonstrations."""

from __future__ import annotations

import random
import re

import pytest

from lecritique.envs import get_environment


def test_correct_scores_one_wrong_scores_zero():
    env = get_environment("arithmetic")
    for task in env.sample_tasks(50, seed=0):
        assert task.prompt.endswith("=")
        assert env.score(task, task.reference).reward == 1.0
        assert env.score(task, f"  {task.reference}\n").reward == 1.0
        wrong = env.score(task, str(int(task.reference) + 1))
        assert wrong.reward == 0.0 and "wrong answer" in wrong.diagnostic
        assert task.privileged == {"answer": task.reference}


def test_answers_match_independent_evaluation():
    env = get_environment(
        "arithmetic", operands=[3, 3], digits=[2, 2], operators=["+", "-", "*"], allow_negative=True
    )
    for task in env.sample_tasks(100, seed=1):
        expression = task.prompt[:-1]
        assert re.fullmatch(r"\d\d([-+*]\d\d){2}", expression)
        # Python's own integer arithmetic is the independent oracle for these generated strings.
        assert int(task.reference) == eval(expression)


def test_difficulty_knobs_and_no_negative_results_by_default():
    env = get_environment("arithmetic", operands=[4, 4], digits=[1, 1])
    tasks = env.sample_tasks(100, seed=2)
    assert all(len(re.findall(r"\d+", t.prompt)) == 4 for t in tasks)
    assert all(int(t.reference) >= 0 for t in tasks)


def test_answer_tags_mode():
    env = get_environment("arithmetic", answer_tags=True)
    task = env.sample_tasks(1, seed=3)[0]
    assert "<answer>" in task.prompt
    assert env.score(task, f"I think <answer>{task.reference}</answer>").reward == 1.0
    result = env.score(task, task.reference)
    assert result.reward == 0.0 and result.diagnostic == "no <answer> tag"
    demo = env.demonstrations(task, random.Random(0))
    assert env.score(task, demo.turns[0][1]).reward == 1.0


def test_demonstration_is_the_answer_and_single_turn_step():
    env = get_environment("arithmetic")
    task = env.sample_tasks(1, seed=4)[0]
    demo = env.demonstrations(task, random.Random(0))
    assert demo.turns == [(task.prompt, task.reference)]
    result = env.step(env.reset(task), task.reference)
    assert result.done and result.reward == 1.0 and result.observation == ""


def test_splits_disjoint_and_deterministic():
    env = get_environment("arithmetic", operands=[2, 2], digits=[1, 2], eval_fraction=0.2)
    train = env.sample_tasks(2000, split="train", seed=0) + env.sample_tasks(2000, split="train", seed=1)
    evals = env.sample_tasks(300, split="eval", seed=0)
    assert not {t.prompt for t in train} & {t.prompt for t in evals}
    assert [t.task_id for t in env.sample_tasks(20, seed=5)] == [
        t.task_id for t in env.sample_tasks(20, seed=5)
    ]
    # Not a constant: the tasks differ from each other and under another seed.
    assert len({t.task_id for t in env.sample_tasks(20, seed=5)}) > 1
    assert [t.task_id for t in env.sample_tasks(20, seed=6)] != [
        t.task_id for t in env.sample_tasks(20, seed=5)
    ]


def test_bad_config():
    with pytest.raises(ValueError, match="operands"):
        get_environment("arithmetic", operands=[1, 2])
    with pytest.raises(ValueError, match="operators"):
        get_environment("arithmetic", operators=["/"])
