"""Reasoning Gym mixtures: tagged answers scored by each dataset's own scorer."""

from __future__ import annotations

import random
from collections import Counter

import pytest
import reasoning_gym

from lecritique.envs import get_environment
from lecritique.envs.answers import tagged
from lecritique.envs.reasoning_gym import registered_datasets

MIXTURE = {"basic_arithmetic": 2, "chain_sum": 1}


@pytest.fixture(scope="module")
def env():
    return get_environment("reasoning_gym", datasets=MIXTURE)


def test_correct_scores_one_wrong_scores_zero(env):
    for task in env.sample_tasks(30, seed=0):
        assert task.prompt.rstrip().endswith("</answer>.")
        assert task.privileged == {"answer": task.reference}
        assert env.score(task, f"Let me think.\n{tagged(task.reference)}").reward == 1.0
        wrong = env.score(task, tagged(str(int(task.reference) + 1)))
        assert wrong.reward == 0.0 and task.metadata["dataset"] in wrong.diagnostic
        untagged = env.score(task, task.reference)
        assert untagged.reward == 0.0 and untagged.diagnostic == "no <answer> tag"


def test_mixture_weights_and_determinism(env):
    tasks = env.sample_tasks(300, seed=1)
    counts = Counter(task.metadata["dataset"] for task in tasks)
    assert set(counts) == set(MIXTURE)
    assert 1.4 < counts["basic_arithmetic"] / counts["chain_sum"] < 2.8
    assert [t.task_id for t in tasks[:20]] == [t.task_id for t in env.sample_tasks(20, seed=1)]
    assert [t.task_id for t in tasks[:20]] != [t.task_id for t in env.sample_tasks(20, seed=2)]


def test_another_replica_scores_the_same_task(env):
    task = next(t for t in env.sample_tasks(20, seed=3) if t.metadata["dataset"] == "chain_sum")
    replica = get_environment("reasoning_gym", datasets=MIXTURE)
    assert replica.score(task, tagged(task.reference)).reward == 1.0
    other = get_environment("reasoning_gym", datasets={"basic_arithmetic": 1})
    with pytest.raises(ValueError, match="not sampled under"):
        other.score(task, tagged(task.reference))


def test_splits_disjoint(env):
    train = env.sample_tasks(600, split="train", seed=0)
    evals = env.sample_tasks(100, split="eval", seed=0) + env.sample_tasks(100, split="eval", seed=9)
    assert not {t.prompt for t in train} & {t.prompt for t in evals}


def test_dataset_settings_and_binary_reward():
    env = get_environment(
        "reasoning_gym",
        datasets={"mini_sudoku": {"weight": 1, "config": {"min_empty": 4, "max_empty": 4}}},
        binary_reward=True,
    )
    task = env.sample_tasks(1, seed=0)[0]
    assert task.metadata["dataset"] == "mini_sudoku"
    assert env.entry(task)["metadata"]["num_empty"] == 4
    assert env.score(task, env.demonstrations(task, random.Random(0)).turns[0][1]).reward == 1.0
    assert env.score(task, tagged("1 2 3 4\n" * 4)).reward == 0.0


def test_config_errors():
    with pytest.raises(ValueError, match=r"unknown reasoning-gym dataset.*basic_arithmetc"):
        get_environment("reasoning_gym", datasets={"basic_arithmetc": 1})
    with pytest.raises(ValueError, match="unexpected keyword argument 'colour'"):
        get_environment("reasoning_gym", datasets={"chain_sum": {"weight": 1, "config": {"colour": 1}}})
    with pytest.raises(ValueError, match="weight"):
        get_environment("reasoning_gym", datasets={"chain_sum": 0})
    with pytest.raises(ValueError, match="seed and size"):
        get_environment("reasoning_gym", datasets={"chain_sum": {"config": {"seed": 1}}})


def test_every_registered_dataset_works_by_name():
    names = registered_datasets()
    assert len(names) > 90
    for name in names:
        env = get_environment("reasoning_gym", datasets={name: 1})
        task = env.sample_tasks(1, seed=0)[0]
        entry = env.entry(task)
        assert task.metadata["dataset"] == name
        garbage = env.score(task, tagged("\u2603 not an answer"))
        assert 0.0 <= garbage.reward <= 1.0 and garbage.diagnostic
        if task.reference is None:
            continue
        own = reasoning_gym.create_dataset(name, seed=1, size=1).score_answer(task.reference, entry)
        result = env.score(task, env.demonstrations(task, random.Random(0)).turns[0][1])
        assert result.reward == pytest.approx(min(1.0, own)), name
