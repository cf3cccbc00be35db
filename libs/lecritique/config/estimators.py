"""Estimator choices as a discriminated union on ``name`` (options per estimator)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from lecritique.advantages import AdvantageEstimator, get_estimator
from lecritique.config.base import SpecModel


class _EstimatorSpecBase(SpecModel):
    def build(self) -> AdvantageEstimator:
        options: dict[str, Any] = self.model_dump(exclude={"name"})
        return get_estimator(self.name, **options)  # type: ignore[attr-defined]

    def needs_max_length(self) -> bool:
        """Whether ``max_length`` (the maximum response length in policy tokens) is needed and
        unset: the experiment spec then fills it in from its rollout and environment."""
        return False


LambdaSetting = Annotated[float, Field(ge=0.0, le=1.0)] | Literal["auto"]
"""A lambda in [0, 1], or ``auto``: 0.4^(1/L) with L the maximum response length (Le Critique §7.2)."""


class MeanSpec(_EstimatorSpecBase):
    name: Literal["mean"] = "mean"
    """GRPO group-mean baseline (Le Critique eq. 3)."""
    normalize_std: bool = False
    """Divide group-centred returns by the group's standard deviation."""


class RLOOSpec(_EstimatorSpecBase):
    name: Literal["rloo"] = "rloo"
    """Leave-one-out group baseline (eq. 4)."""


class ValueSpec(_EstimatorSpecBase):
    name: Literal["value"] = "value"
    """Monte-Carlo value baseline A = R - V (eq. 8; a PVF when the critic has a context)."""


class GAESpec(_EstimatorSpecBase):
    name: Literal["gae"] = "gae"
    """Generalised advantage estimation (eqs. 9-11)."""
    gamma: float = Field(default=1.0, ge=0.0, le=1.0)
    """Discount per policy token."""
    lambda_gae: LambdaSetting = 1.0
    """lambda of the policy advantages (1: unbiased Monte-Carlo advantages; auto: 0.4^(1/max_length))."""
    lambda_target: LambdaSetting = 1.0
    """lambda of the critic's value targets (1: Monte-Carlo targets; auto: 0.4^(1/max_length))."""
    max_length: int | None = Field(default=None, ge=1)
    """Maximum response length L in policy tokens for ``auto`` lambdas; None: sampling.max_tokens x
    the environment's turn limit."""

    def needs_max_length(self) -> bool:
        return self.max_length is None and "auto" in (self.lambda_gae, self.lambda_target)


class TetherSpec(_EstimatorSpecBase):
    name: Literal["tether"] = "tether"
    """TETHER: b = (1 - rho) b_LOO + rho V with rho fitted on earlier batches (eqs. 15-18)."""
    ema_decay: float = Field(default=0.95, ge=0.0, le=1.0)
    """EMA decay d of the fitted coefficient (eq. 17)."""
    buckets: int = Field(default=1, ge=1)
    """Number of uniform token-position buckets, each with its own rho (eq. 18)."""
    max_length: int | None = Field(default=None, ge=1)
    """Maximum response length in policy tokens, the position range the buckets split uniformly
    (positions count every turn's generated tokens); None: sampling.max_tokens x the environment's
    turn limit."""

    def needs_max_length(self) -> bool:
        return self.max_length is None and self.buckets > 1


class EVPOSpec(_EstimatorSpecBase):
    name: Literal["evpo"] = "evpo"
    """EVPO: the critic when the previous batch's explained variance is positive, else the group mean."""


class LVRLSpec(_EstimatorSpecBase):
    name: Literal["lvrl"] = "lvrl"
    """LVRL step advantages from anchored consecutive value differences."""
    normalize_std: bool = True
    """Divide the group-centred step advantages by their standard deviation."""
    center: bool = True
    """Subtract the group's mean step advantage."""


EstimatorSpec = Annotated[
    MeanSpec | RLOOSpec | ValueSpec | GAESpec | TetherSpec | EVPOSpec | LVRLSpec,
    Field(discriminator="name"),
]
