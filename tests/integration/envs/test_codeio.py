"""CodeIO: output and input prediction verified by executing reference code in the sandbox."""

from __future__ import annotations

import json
import random

import pytest

from lecritique.envs import get_environment
from lecritique.envs.answers import tagged
from lecritique.envs.codeio import json_equal, load_programs
from lecritique.envs.splits import content_digest, split_of


@pytest.fixture(scope="module")
def env():
    return get_environment("codeio", parallel_executions=2)


@pytest.fixture(scope="module")
def tasks(env):
    return env.sample_tasks(8, split="train", seed=0)


def test_both_directions_correct_one_wrong_zero(env, tasks):
    directions = {task.metadata["direction"] for task in tasks}
    assert directions == {"input", "output"}
    for task in tasks:
        assert task.privileged == {"answer": task.reference}
        assert "<answer>" in task.prompt and task.metadata["code"] in task.prompt
        demo = env.demonstrations(task, random.Random(0))
        assert demo.turns == [(task.prompt, tagged(task.reference))]
        assert env.score(task, f"Reasoning...\n{demo.turns[0][1]}").reward == 1.0
        wrong = env.score(task, tagged(json.dumps({"certainly": ["not", "it"]})))
        assert wrong.reward == 0.0 and wrong.diagnostic


def test_input_prediction_accepts_any_feasible_input(env, tasks):
    task = next(t for t in tasks if t.metadata["direction"] == "input")
    # The candidate is checked by running the reference code, not by comparing to the generator's input.
    code = task.metadata["code"]
    constant = "def main_solution(anything):\n    return 7\n"
    identity = dict(task.metadata, code=constant, inputs={"anything": 0}, output=7)
    alias = type(task)(task.task_id, task.prompt, task.reference, task.privileged, identity)
    assert env.score(alias, tagged(json.dumps({"anything": 1}))).reward == 1.0
    assert env.score(task, tagged(json.dumps({"no_such_argument": 1}))).reward == 0.0
    assert code


def test_floats_compare_with_tolerance():
    assert json_equal({"a": [1.0, 2]}, {"a": [1.0000000001, 2.0]}, 1e-6)
    assert not json_equal({"a": 1.0}, {"a": 1.01}, 1e-6)
    assert not json_equal(True, 1, 1e-6)
    assert not json_equal({"a": 1}, {"a": 1, "b": 2}, 1e-6)


def test_sampling_deterministic_and_splits_by_program(env, tasks):
    again = env.sample_tasks(8, split="train", seed=0)
    assert [t.task_id for t in again] == [t.task_id for t in tasks]
    # Not a constant: the tasks differ from each other and under another seed.
    assert len({t.task_id for t in tasks}) > 1
    assert [t.task_id for t in env.sample_tasks(8, split="train", seed=1)] != [t.task_id for t in tasks]
    evals = env.sample_tasks(6, split="eval", seed=0)
    train_programs = {t.metadata["code"] for t in tasks}
    assert not train_programs & {t.metadata["code"] for t in evals}
    for task in evals:
        assert split_of("codeio", content_digest(task.metadata["code"]), 0.1) == "eval"


def test_answers_without_tags_or_json_score_zero(env, tasks):
    task = tasks[0]
    assert env.score(task, task.reference).diagnostic == "no <answer> tag"
    assert "not JSON" in env.score(task, tagged("{'python': 'dict'}")).diagnostic


def test_program_data_and_difficulty_filter():
    assert len(load_programs()) > 2000
    assert 0 < len(load_programs(9)) < len(load_programs())
    with pytest.raises(ValueError, match="difficulty"):
        get_environment("codeio", difficulty=11)
