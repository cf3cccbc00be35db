"""The scalar-head critic as a backend: one forward pass over ``context + prompt + trajectory``."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from lecritique.critics.backends import ActorInfo, CriticQuery, CriticValues


class DiscriminativeCritic:
    trained: ClassVar[bool] = True

    def __init__(self, path: Path, config: Any) -> None:
        from lecritique.training.critic_trainer import CriticTrainer

        self.predictor = CriticTrainer.load(path, config)

    def values(self, queries: list[CriticQuery], actor: ActorInfo) -> CriticValues:
        return CriticValues(self.predictor.predict([query.trajectory for query in queries]))

    def close(self) -> None:
        """Nothing runs in the background."""
