"""Arms compared at equal wall time (issue 39 §5): curves against the run's own clock."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lecritique.study.summary import curve_against_minutes, run_summary


def _summary(minutes_per_step: float, rewards: list[float]) -> dict[str, Any]:
    rows = [
        {"step": step, "reward_mean": reward, "seconds": 60.0 * minutes_per_step * step}
        for step, reward in enumerate(rewards, start=1)
    ]
    return run_summary(rows, window=1)


def test_a_fast_and_a_slow_seed_are_read_at_the_same_minutes() -> None:
    fast = _summary(0.5, [0.1 * step for step in range(1, 21)])  # 2 steps a minute, 10 minutes
    slow = _summary(2.0, [0.2 * step for step in range(1, 6)])  # a step every 2 minutes, 10 minutes
    minutes, mean, std = curve_against_minutes({0: fast, 1: slow}, "reward_mean", points=5)
    assert minutes[0] == pytest.approx(2.0) and minutes[-1] == pytest.approx(10.0)
    # At minute m the fast seed has made 2m steps (reward 0.2 m), the slow one m / 2 (reward 0.1 m).
    assert mean == pytest.approx(0.15 * minutes)
    assert std == pytest.approx(np.std([0.2 * minutes, 0.1 * minutes], axis=0, ddof=1))


def test_a_run_without_wall_time_draws_nothing() -> None:
    rows = [{"step": step, "reward_mean": 0.5} for step in range(1, 4)]
    minutes, mean, _ = curve_against_minutes({0: run_summary(rows, window=1)}, "reward_mean")
    assert minutes.size == 0 and mean.size == 0


def test_the_moving_average_is_taken_over_steps_before_the_clock() -> None:
    steady = _summary(1.0, [0.0, 1.0] * 5)
    minutes, mean, _ = curve_against_minutes({0: steady}, "reward_mean", points=3, window=2)
    assert minutes[-1] == pytest.approx(10.0) and mean[-1] == pytest.approx(0.5)
