"""The scalar-head critic as a backend: one forward pass over ``context + prompt + trajectory``."""

from __future__ import annotations

from pathlib import Path

from lecritique.critics.types import ActorInfo, CriticQuery, CriticValues
from lecritique.training.config import CriticTrainerConfig


class DiscriminativeCritic:
    def __init__(self, path: Path, config: CriticTrainerConfig) -> None:
        from lecritique.training.critic_trainer import CriticTrainer

        self.predictor = CriticTrainer.load(path, config)

    def values(self, queries: list[CriticQuery], actor: ActorInfo) -> CriticValues:
        return CriticValues(self.predictor.predict([query.trajectory for query in queries]))

    def reload(self, version: int, path: Path) -> bool:
        """A new version is a new model: the caller builds a new backend."""
        return False

    def close(self) -> None:
        """Nothing runs in the background."""
