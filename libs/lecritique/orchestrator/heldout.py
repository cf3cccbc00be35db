"""Held-out evaluation: greedy episodes of the current policy on the same eval-split tasks every time."""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from lecritique.config.experiment import ExperimentSpec
from lecritique.engines.base import SamplingParams
from lecritique.episodes import EpisodePlayer
from lecritique.orchestrator.clients import EnvironmentClient
from lecritique.orchestrator.episodes import play_batch
from lecritique.orchestrator.state import OrchestratorState, wall_budget_spent

logger = logging.getLogger(__name__)


def evaluation_due(spec: ExperimentSpec, step: int, state: OrchestratorState) -> bool:
    """Whether policy step ``step`` (``state`` after it) is evaluated: every ``eval_every`` steps, and
    after the run's last step (its steps done, or its wall-time budget spent: arms compared at equal
    wall time are evaluated where each one ended)."""
    settings = spec.orchestrator
    if settings.eval_every is None:
        return False
    last = step >= settings.steps or wall_budget_spent(state, settings.steps, settings.max_seconds)
    return step % settings.eval_every == 0 or last


def held_out_success(
    player: EpisodePlayer, environment: EnvironmentClient, tasks: int, seed: int, step: int
) -> dict[str, float]:
    """``eval_success`` (reward >= 1), ``eval_reward_mean`` and ``eval_seconds`` of one greedy
    episode per task on ``tasks`` eval-split tasks (the same ones for the same ``seed``)."""
    start = time.perf_counter()
    sampled = environment.sample_tasks(tasks, "eval", seed)
    greedy = SamplingParams(temperature=0.0, top_p=1.0, max_tokens=player.sampling.max_tokens)
    episodes = play_batch(
        player, sampled, 1, first_group_id=0, seed=seed, trajectory_prefix=f"eval{step}", sampling=greedy
    )
    rewards = np.array([t.reward for t in episodes.trajectories], dtype=np.float64)
    success = float(np.mean(rewards >= 1.0))
    logger.info("step %d: held-out greedy success %.3f on %d tasks", step, success, len(sampled))
    return {
        "eval_success": success,
        "eval_reward_mean": float(rewards.mean()),
        "eval_seconds": time.perf_counter() - start,
    }


def initial_row(
    player: EpisodePlayer, environment: EnvironmentClient, spec: ExperimentSpec, elapsed: float
) -> dict[str, Any]:
    """The metrics row of step 0: the initial policy's held-out evaluation, before any update, so
    that every run's held-out curve starts from the same point; ``seconds`` is the experiment's
    wall time at the start (the evaluation is outside ``max_seconds``), ``policy_version`` 0."""
    held_out = held_out_success(player, environment, spec.orchestrator.eval_tasks, spec.seed, 0)
    return {"step": 0, **held_out, "seconds": elapsed, "policy_version": 0}
