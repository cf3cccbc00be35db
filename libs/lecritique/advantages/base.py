"""The estimator interface and registry.

Every estimator has one uniform signature: ``compute(batch)`` returns frozen token advantages
[B, T] (zero off-policy tokens) using only state fitted on *earlier* batches; ``update(batch)``
is called afterwards and may fit state (TETHER's rho, EVPO's explained variance) on this batch,
for use by the next one. ``state_dict``/``load_state_dict`` make that state survive restarts.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
from pydantic import ValidationError

from lecritique.advantages.batch import AdvantageBatch, FloatArray


class AdvantageEstimator(ABC):
    """Base class: subclasses implement :meth:`_token_advantages` and optionally :meth:`update`."""

    name: ClassVar[str]
    uses_critic: ClassVar[bool] = False
    """Whether the estimator reads ``values`` (the orchestrator then waits for critic warmup)."""
    gauges: ClassVar[Mapping[str, str]] = {}
    """Metric keys of :meth:`report` exported as Prometheus gauges ``lecritique_<key>`` (value: the
    help text); a key ``<key>_bucket_<m>`` is the same gauge with label ``bucket=m``."""
    chunk_tokens: ClassVar[int | None] = 1 << 16
    """Token-level work runs on group-aligned row chunks of about this many tokens (None: whole
    batch). Every estimator here is group- or row-local given its fitted state, so chunking
    changes no result, only keeps temporaries cache-sized."""

    def compute(self, batch: AdvantageBatch) -> Any:
        """Token advantages [B, T] (float32; torch if ``batch.rewards`` was torch)."""
        if self.chunk_tokens is None:
            return batch.output(self._token_advantages(batch))
        out = np.zeros(batch.mask.shape, dtype=np.float32)
        for rows in batch.group_chunks(self.chunk_tokens):
            chunk = batch.select(rows)
            advantages = self._token_advantages(chunk)
            if isinstance(rows, slice):
                np.copyto(out[rows], advantages, where=chunk.mask, casting="same_kind")
            else:
                out[rows] = np.where(chunk.mask, advantages, 0.0)
        return batch.wrap(out)

    @abstractmethod
    def _token_advantages(self, batch: AdvantageBatch) -> FloatArray:
        """Advantages for every token of ``batch`` (a whole batch or a group-aligned chunk of
        one); off-policy tokens are zeroed by the caller."""

    def update(self, batch: AdvantageBatch) -> None:  # noqa: B027 - stateless by default
        """Fit lagged state on this batch after its advantages were frozen."""

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            raise ValueError(f"estimator {self.name!r} has no state, got keys {sorted(state)}")

    def metrics(self) -> dict[str, float]:
        """Scalars of the current fitted state (e.g. ``tether_rho``)."""
        return {}

    def freeze_and_fit(self, batch: AdvantageBatch) -> tuple[Any, dict[str, float]]:
        """One policy step's worth of estimation: this batch's advantages, frozen with the state
        fitted on earlier batches (:meth:`compute`), then the state fitted on this batch for the
        next one (:meth:`update`); returns the advantages and the step's metrics (:meth:`report`).

        The only admissible order (Le Critique, arXiv:2608.16739, §5.1): "A batch never uses a
        mixture coefficient fitted on its own returns." Fitting first would make a trajectory's
        baseline depend on its own return, violating the admissibility condition (eq. 5) and
        biasing the gradient; the same holds for every stateful estimator (EVPO's switch)."""
        used = self.metrics()
        advantages = self.compute(batch)
        self.update(batch)
        return advantages, self.report(used, self.metrics())

    def report(self, used: dict[str, float], fitted: dict[str, float]) -> dict[str, float]:
        """The metrics of one step, from :meth:`metrics` before the fit (the state this batch
        used) and after it (the state the next batch will use); by default the latter."""
        return fitted


_REGISTRY: dict[str, type[AdvantageEstimator]] = {}


def register(cls: type[AdvantageEstimator]) -> type[AdvantageEstimator]:
    if cls.name in _REGISTRY:
        raise ValueError(f"estimator {cls.name!r} registered twice")
    _REGISTRY[cls.name] = cls
    return cls


def estimator_names() -> list[str]:
    return sorted(_REGISTRY)


def estimator_gauges() -> dict[str, str]:
    """Every registered estimator's :attr:`~AdvantageEstimator.gauges`: metric key -> help text."""
    return {key: text for cls in _REGISTRY.values() for key, text in cls.gauges.items()}


def get_estimator(name: str, **options: Any) -> AdvantageEstimator:
    """Build a registered estimator by name; unknown names or options raise ``ValueError``."""
    try:
        cls = _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown estimator {name!r}; known: {', '.join(estimator_names())}") from None
    try:
        return cls(**options)
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
        raise ValueError(f"invalid options for estimator {name!r}: {problems}") from None
    except TypeError as error:
        raise ValueError(f"invalid options for estimator {name!r}: {error}") from None
