"""Malformed completions score 0 with a diagnostic and never raise, in every environment."""

from __future__ import annotations

import pytest

from lecritique.envs import get_environment
from tests.unit.envs.dataset_support import EXAMPLE_DATA

ENVIRONMENTS = {
    "sudoku": {"size": 4, "empty_cells": [3, 4]},
    "arithmetic": {},
    "arithmetic-tags": {"answer_tags": True},
    "countdown": {},
    "reasoning_gym": {"datasets": {"basic_arithmetic": 1, "mini_sudoku": 1}},
    "codeio": {"parallel_executions": 2},
    "babyai_text": {},
    "hidden_digits": {"scoring": "fraction"},
    "dataset": {"path": str(EXAMPLE_DATA), "prompt_column": "expression", "verifier": {"kind": "numeric"}},
    "dataset-math": {
        "path": str(EXAMPLE_DATA),
        "prompt_column": "question",
        "answer_tags": True,
        "verifier": {"kind": "math_verify"},
    },
    "dataset-python": {
        "path": str(EXAMPLE_DATA),
        "prompt_column": "expression",
        "verifier": {"kind": "python", "entry_point": "tests.unit.envs.dataset_verifiers:within_one"},
    },
}

MALFORMED = {
    "empty": "",
    "whitespace": " \n\t ",
    "huge": "7" * 1_000_000,
    "binary": "\x00\x01\xff\xfe junk \x7f\x1b[2J",
    "bytes": b"\xff\xfe\x00",
    "no answer tag": "the answer is probably 42",
    "unclosed tag": "<answer>42",
    "surrogates": "\ud800\udfff",
    "none": None,
}


@pytest.fixture(scope="module", params=sorted(ENVIRONMENTS))
def env_and_task(request):
    name = request.param
    env = get_environment(name.split("-")[0], **ENVIRONMENTS[name])
    return env, env.sample_tasks(1, seed=0)[0]


@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_malformed_completion_scores_zero(env_and_task, kind):
    env, task = env_and_task
    result = env.score(task, MALFORMED[kind])
    assert result.reward == 0.0
    assert isinstance(result.diagnostic, str) and 0 < len(result.diagnostic) <= 200


@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_malformed_action_never_rewards(env_and_task, kind):
    env, task = env_and_task
    result = env.step(env.reset(task), MALFORMED[kind])
    assert result.reward == 0.0 and result.diagnostic
    # Single-turn episodes and Sudoku end at once; BabyAI answers an error and costs a step.
    assert result.done or "Invalid action" in result.observation
