"""The in-run critic probe (``critic_probe``): the critic's EV against the Monte-Carlo ceiling.

Every ``every`` policy steps, after the step's weights are loaded: play groups of the current
policy on eval-split tasks (``rollout.group_size`` episodes per task, as the critic sees them in
the run), cut one episode per state at a uniformly drawn policy token, play ``continuations``
Monte-Carlo continuations from each cut through the same rollout and environment services, and
score the uncut episodes with the served critic (the same queries the evaluation stage sends).
The arithmetic is :mod:`lecritique.critic_eval.ceiling`'s: ``probe_ceiling`` (Var(E[R|s]) / Var(R)),
``probe_critic_ev`` (MSE-based EV of V(s) against the continuations' returns) and their ratio
``probe_ceiling_fraction``, each with a bootstrap standard error over states. It runs in the policy
loop: its cost is policy time (``docs/critics.md``, "Critic probe").
"""

from __future__ import annotations

import itertools
import logging
import math
import time
from collections.abc import Callable
from typing import Any, Protocol

import grpc
import numpy as np

from lecritique.config.probe import CriticProbeSpec
from lecritique.critic_eval.ceiling import probe_summary
from lecritique.critics.inputs import attempt_of, critic_queries
from lecritique.critics.specs import CriticSpec
from lecritique.critics.types import ActorInfo, CriticQuery
from lecritique.envs.base import Task
from lecritique.episodes import EpisodePlayer
from lecritique.orchestrator.episodes import TURN_SEED_STRIDE, play_batch
from lecritique.rpc.replica_pool import NoReplicaAvailable

logger = logging.getLogger(__name__)

PROBE_SEED = 104_723
"""Offsets the probe's task and sampling seeds from the run's batches and held-out evaluation."""


class TaskSource(Protocol):
    def sample_tasks(self, n: int, split: str, seed: int) -> list[Task]: ...


class Evaluator(Protocol):
    def evaluate(
        self, queries: list[CriticQuery], prompt_texts: list[str], actor: ActorInfo
    ) -> tuple[list[np.ndarray], int, dict[str, float]]: ...


class CriticProbe:
    def __init__(
        self,
        settings: CriticProbeSpec,
        critic: CriticSpec,
        player: EpisodePlayer,
        tasks: TaskSource,
        evaluator: Evaluator,
        actor: Callable[[], ActorInfo],
        *,
        group_size: int,
        seed: int,
    ) -> None:
        self.settings = settings
        self.critic = critic
        self.player = player
        self.tasks = tasks
        self.evaluator = evaluator
        self.actor = actor
        """The In-Context Conditioning the evaluation stage shows now."""
        self.group_size = group_size
        self.seed = seed

    def due(self, step: int) -> bool:
        return step % self.settings.every == 0

    def run(self, step: int) -> dict[str, Any]:
        """The probe's metrics row keys (``probe_*``); an unreachable critic leaves them out."""
        start = time.perf_counter()
        settings = self.settings
        seed = self.seed * 1_000_003 + PROBE_SEED + step
        tasks = self.tasks.sample_tasks(math.ceil(settings.states / self.group_size), "eval", seed)
        base = play_batch(
            self.player, tasks, self.group_size, first_group_id=0, seed=seed, trajectory_prefix=f"probe{step}"
        )
        rng = np.random.default_rng(seed)
        probed = [i for i, r in enumerate(base.records) if any(r.policy_mask)][: settings.states]
        cuts = [int(rng.choice(np.flatnonzero(base.records[i].policy_mask))) for i in probed]
        actor = self.actor()
        queries = critic_queries(
            self.critic,
            [attempt_of(r, t) for r, t in zip(base.records, base.trajectories, strict=True)],
            self.player.tokenizer,
            actor,
        )
        try:
            values, version, _ = self.evaluator.evaluate(queries, base.prompt_texts, actor)
        except (grpc.RpcError, NoReplicaAvailable) as error:
            logger.warning(
                "step %d: critic probe skipped, the value evaluator did not answer (%s)", step, error
            )
            return {}
        k = settings.continuations
        continued = [base.records[i].cut(t) for i, t in zip(probed, cuts, strict=True) for _ in range(k)]
        turn_seeds = (seed + 1 + TURN_SEED_STRIDE * turn for turn in itertools.count())
        self.player.play(continued, seeds=lambda: next(turn_seeds))
        rewards = np.array([c.reward for c in continued], dtype=np.float64).reshape(len(probed), k)
        state_values = np.array([float(values[i][t]) for i, t in zip(probed, cuts, strict=True)])
        summary = probe_summary(rewards, state_values, bootstrap=settings.bootstrap, seed=seed)
        logger.info(
            "step %d: critic probe on %d states: ceiling %.3f ± %.3f, critic EV %.3f, fraction %s",
            step,
            len(probed),
            summary["ceiling"],
            summary["ceiling_se"],
            summary["critic_ev"],
            summary["fraction"],
        )
        return {
            "probe_ceiling": _finite(summary["ceiling"]),
            "probe_ceiling_se": _finite(summary["ceiling_se"]),
            "probe_critic_ev": _finite(summary["critic_ev"]),
            "probe_critic_ev_se": _finite(summary["critic_ev_se"]),
            "probe_ceiling_fraction": summary["fraction"],
            "probe_states": len(probed),
            "probe_continuations": k,
            "probe_value_version": version,
            "probe_seconds": time.perf_counter() - start,
        }


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def in_run_probe(spec: Any, stage: Any, player: EpisodePlayer, clients: Any) -> CriticProbe | None:
    """The experiment's in-run critic probe (``critic_probe``; None when off or without a critic):
    ``stage`` is the loop's critic stage (the actor description and reward average the critic is
    shown), ``player`` the held-out evaluation's."""
    settings, critic, evaluator = spec.critic_probe, spec.critic, clients.value_evaluator
    if settings is None or critic is None or evaluator is None:
        return None
    return CriticProbe(
        settings,
        critic,
        player,
        clients.environment,
        evaluator,
        lambda: ActorInfo(stage.actor_description, stage.reward_average.value),
        group_size=spec.rollout.group_size,
        seed=spec.seed,
    )
