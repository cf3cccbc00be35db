"""A batch of episode groups, played through the rollout and environment-verifier services.

The turn protocol is :class:`lecritique.episodes.EpisodePlayer`'s; this module fixes how the
orchestrator seeds it and names the resulting trajectories.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from lecritique.engines.base import SamplingParams
from lecritique.envs.base import Task
from lecritique.episodes import EpisodePlayer, EpisodeRecord
from lecritique.trajectory import Trajectory

TURN_SEED_STRIDE = 7919
"""Turn t of a batch samples with seed ``seed + TURN_SEED_STRIDE * t``."""


@dataclass
class EpisodeBatch:
    """Finished episodes of one batch, group by group (K consecutive trajectories per task)."""

    records: list[EpisodeRecord]
    trajectories: list[Trajectory]

    @property
    def tasks(self) -> list[Task]:
        """The task of every trajectory."""
        return [r.task for r in self.records]

    @property
    def prompt_texts(self) -> list[str]:
        return [r.prompt_text for r in self.records]


def play_batch(
    player: EpisodePlayer,
    tasks: Sequence[Task],
    group_size: int,
    *,
    first_group_id: int,
    seed: int,
    trajectory_prefix: str,
    sampling: SamplingParams | None = None,
) -> EpisodeBatch:
    """``group_size`` episodes per task; trajectory ids ``{prefix}-{group}-{member}``."""
    turn_seeds = (seed + TURN_SEED_STRIDE * turn for turn in itertools.count())
    records = player.play_groups(
        tasks, group_size, first_group_id=first_group_id, seeds=lambda: next(turn_seeds), sampling=sampling
    )
    trajectories = [r.trajectory(f"{trajectory_prefix}-{r.group_id}-{r.member}") for r in records]
    return EpisodeBatch(records, trajectories)
