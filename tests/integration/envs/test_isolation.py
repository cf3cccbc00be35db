"""The scoring pool itself (issue #46 item 1): deaths, refusals, limits, the in-process checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lecritique.envs import build_environment, parse_environment_config
from lecritique.envs.isolation import IsolatedEnvironment, ScoringError
from lecritique.envs.scoring_pool import Killed, ScoringLimits, ScoringPool
from lecritique.envs.verifiers import NumericVerifier, NumericVerifierConfig

ROWS = [{"prompt": f"What is {n} + {n}?", "answer": str(2 * n)} for n in range(1, 9)]


def _dataset(tmp: Path, verifier: dict, **settings: object):
    path = tmp / "rows.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    config = parse_environment_config(
        {"kind": "dataset", "path": str(path), "verifier": verifier, **settings}
    )
    return config, build_environment(config)


def test_a_dying_scorer_scores_zero_and_its_worker_is_replaced(tmp_path: Path) -> None:
    config, environment = _dataset(
        tmp_path, {"kind": "python", "entry_point": "tests.unit.envs.dataset_verifiers:exits"}
    )
    pool = ScoringPool(ScoringLimits(workers=1, answer_seconds=30))
    kills: list[Killed] = []
    try:
        isolated = IsolatedEnvironment(environment, config, pool, on_kill=kills.append)
        tasks = isolated.sample_tasks(3)
        results = isolated.score_many([(tasks[0], "die"), (tasks[1], str(tasks[1].reference))])
        assert results[0].reward == 0.0 and "died" in results[0].diagnostic
        assert results[1].reward == 1.0  # the rest of the batch went to the replacement
        assert [kill.reason for kill in kills] == ["died"]
        assert pool.kills == 1 and pool.restarts == 1
    finally:
        pool.close()


def test_a_foreign_task_is_refused_not_scored(tmp_path: Path) -> None:
    config, environment = _dataset(tmp_path, {"kind": "exact"})
    other = parse_environment_config({"kind": "arithmetic"})
    foreign = build_environment(other).sample_tasks(1)[0]
    pool = ScoringPool(ScoringLimits(workers=1))
    try:
        isolated = IsolatedEnvironment(environment, config, pool)
        with pytest.raises(ScoringError, match="does not come from dataset"):
            isolated.score(foreign, "1")
    finally:
        pool.close()


def test_answer_length_limits_hold_in_process_too(tmp_path: Path) -> None:
    _, environment = _dataset(tmp_path, {"kind": "exact"}, max_answer_chars=16)
    task = environment.sample_tasks(1)[0]
    assert environment.score(task, str(task.reference)).reward == 1.0
    long = str(task.reference) + " " * 20
    assert environment.score(task, long).diagnostic == "answer longer than 16 characters"
    gym = build_environment(parse_environment_config({"kind": "reasoning_gym"}))
    gym_task = gym.sample_tasks(1)[0]
    assert gym.score(gym_task, "<answer>1</answer>" + "x" * 60_000).reward == 0.0


def test_numeric_verifier_refuses_huge_exponents_at_once() -> None:
    verifier = NumericVerifier(NumericVerifierConfig())
    assert verifier.verify("1e99999999", "1", {}).reward == 0.0
    assert verifier.verify("1e400", "1", {}).reward == 0.0  # beyond a float: no OverflowError
    assert verifier.verify("2.5e3", "2500", {}).reward == 1.0


def test_limits_from_variables() -> None:
    limits = ScoringLimits.from_environment(
        {"LECRITIQUE_SCORING_WORKERS": "3", "LECRITIQUE_ANSWER_SECONDS": "2.5"}
    )
    assert (limits.workers, limits.answer_seconds) == (3, 2.5)
    assert ScoringLimits.from_environment({}) == ScoringLimits()


def test_multi_turn_episodes_step_through_the_workers() -> None:
    """Sudoku's demonstration, stepped through the pool turn by turn, ends solved; the state
    travels back and forth as JSON like the gRPC messages carry it."""
    import random

    config = parse_environment_config({"kind": "sudoku", "size": 4, "empty_cells": [2, 3]})
    environment = build_environment(config)
    pool = ScoringPool(ScoringLimits(workers=2))
    try:
        isolated = IsolatedEnvironment(environment, config, pool)
        tasks = isolated.sample_tasks(3, seed=1)
        assert [task.task_id for task in tasks] == [
            task.task_id for task in environment.sample_tasks(3, seed=1)
        ]
        for task in tasks:
            state = isolated.reset(task)
            for _, action in environment.demonstrations(task, random.Random(0)).turns:
                [result] = isolated.step_many([(state, action)])
                state = result.state
            assert result.done and result.reward == 1.0
        # An over-long action is the environment's to judge in a multi-turn episode.
        [long] = isolated.step_many([(isolated.reset(tasks[0]), "r1c1=1" + " " * 100)])
        assert long.reward == 0.0 and long.diagnostic
    finally:
        pool.close()


def test_only_answers_that_start_a_sandbox_get_its_longer_limit() -> None:
    config = parse_environment_config(
        {"kind": "reasoning_gym", "datasets": {"puzzle24": 1, "basic_arithmetic": 1}}
    )
    environment = build_environment(config)
    pool = ScoringPool(ScoringLimits(workers=1, answer_seconds=4))
    try:
        isolated = IsolatedEnvironment(environment, config, pool)
        limits = {task.metadata["dataset"]: isolated.limit(task) for task in isolated.sample_tasks(40)}
        assert limits == {"puzzle24": 25.0, "basic_arithmetic": 4.0}  # the sandbox's 20 s wall + 5
        assert isolated.answer_seconds == 25.0
    finally:
        pool.close()
