"""Apply an estimator to one policy batch in the only admissible order: freeze, then fit.

Le Critique: Privileged Value Functions for LLM Reinforcement Learning (arXiv:2608.16739), §5.1:
"A batch never uses a mixture coefficient fitted on its own returns. We first compute and freeze
the advantages [...] with B_k using rho_{k-1}. Only afterward do we use the returns in B_k to
fit rho_hat_k." Fitting first would make a trajectory's baseline depend on its own return,
violating the admissibility condition (eq. 5) and biasing the gradient. The same order holds
for every stateful estimator (EVPO's explained-variance switch).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lecritique.advantages.base import AdvantageEstimator
from lecritique.advantages.batch import AdvantageBatch

_LAGGED_PREFIX = "tether_rho"
"""Metric keys describing the lagged state the advantages were computed with."""


@dataclass(frozen=True)
class FrozenAdvantages:
    """One batch's advantages and the estimator metrics that go with them."""

    advantages: Any
    """Token advantages [B, T], computed with the state fitted on earlier batches only."""
    metrics: dict[str, float]
    """``tether_rho*``: the coefficients these advantages used (and ``tether_rho_fitted``, the
    global coefficient after fitting on this batch, used by the next one); every other key is
    the estimator's metric after fitting on this batch (e.g. ``value_ev_bucket_{m}``)."""


def freeze_then_fit(estimator: AdvantageEstimator, batch: AdvantageBatch) -> FrozenAdvantages:
    """``estimator.compute(batch)`` with its current state, then ``estimator.update(batch)``."""
    used = estimator.metrics()
    advantages = estimator.compute(batch)
    estimator.update(batch)
    fitted = estimator.metrics()
    metrics = {key: value for key, value in used.items() if key.startswith(_LAGGED_PREFIX)}
    if "tether_rho" in fitted:
        metrics["tether_rho_fitted"] = fitted["tether_rho"]
    metrics.update({key: value for key, value in fitted.items() if not key.startswith(_LAGGED_PREFIX)})
    return FrozenAdvantages(advantages, metrics)
