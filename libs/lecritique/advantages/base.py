"""The estimator interface and registry.

Every estimator has one uniform signature: ``compute(batch)`` returns frozen token advantages
[B, T] (zero off-policy tokens) using only state fitted on *earlier* batches; ``update(batch)``
is called afterwards and may fit state (TETHER's rho, EVPO's explained variance) on this batch,
for use by the next one. ``state_dict``/``load_state_dict`` make that state survive restarts.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from lecritique.advantages.batch import AdvantageBatch, FloatArray


class AdvantageEstimator(ABC):
    """Base class: subclasses implement :meth:`_token_advantages` and optionally :meth:`update`."""

    name: ClassVar[str]
    uses_critic: ClassVar[bool] = False
    """Whether the estimator reads ``values`` (the orchestrator then waits for critic warmup)."""

    def compute(self, batch: AdvantageBatch) -> Any:
        """Token advantages [B, T] (float32; torch if ``batch.rewards`` was torch)."""
        return batch.output(self._token_advantages(batch))

    @abstractmethod
    def _token_advantages(self, batch: AdvantageBatch) -> FloatArray:
        """Advantages for every token (off-policy tokens are zeroed by the caller)."""

    def update(self, batch: AdvantageBatch) -> None:  # noqa: B027 - stateless by default
        """Fit lagged state on this batch after its advantages were frozen."""

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            raise ValueError(f"estimator {self.name!r} has no state, got keys {sorted(state)}")

    def metrics(self) -> dict[str, float]:
        """Scalars worth logging (e.g. ``tether_rho``)."""
        return {}


_REGISTRY: dict[str, type[AdvantageEstimator]] = {}


def register(cls: type[AdvantageEstimator]) -> type[AdvantageEstimator]:
    if cls.name in _REGISTRY:
        raise ValueError(f"estimator {cls.name!r} registered twice")
    _REGISTRY[cls.name] = cls
    return cls


def estimator_names() -> list[str]:
    return sorted(_REGISTRY)


def get_estimator(name: str, **options: Any) -> AdvantageEstimator:
    """Build a registered estimator by name; unknown names or options raise ``ValueError``."""
    try:
        cls = _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown estimator {name!r}; known: {', '.join(estimator_names())}") from None
    try:
        return cls(**options)
    except TypeError as error:
        raise ValueError(f"invalid options for estimator {name!r}: {error}") from None
