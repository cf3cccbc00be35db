"""Estimator choices as a discriminated union on ``name``: each is its estimator's options plus ``name``."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from lecritique.advantages import AdvantageEstimator, get_estimator
from lecritique.advantages.options import GAEOptions, LVRLOptions, MeanOptions, TetherOptions
from lecritique.advantages.returns import resolve_lambda
from lecritique.config.base import SpecModel


class _EstimatorSpecBase(SpecModel):
    def build(self) -> AdvantageEstimator:
        options: dict[str, Any] = self.model_dump(exclude={"name"})
        return get_estimator(self.name, **options)  # type: ignore[attr-defined]

    def critic_target_lambda(self) -> float:
        """lambda of the critic's value targets (1: Monte-Carlo returns)."""
        return 1.0

    def needs_max_length(self) -> bool:
        """Whether ``max_length`` (the maximum response length in policy tokens) is needed and
        unset: the experiment spec then fills it in from its rollout and environment."""
        return False


class MeanSpec(MeanOptions, _EstimatorSpecBase):
    name: Literal["mean"] = "mean"
    """GRPO group-mean baseline (Le Critique eq. 3)."""


class RLOOSpec(_EstimatorSpecBase):
    name: Literal["rloo"] = "rloo"
    """Leave-one-out group baseline (eq. 4)."""


class ValueSpec(_EstimatorSpecBase):
    name: Literal["value"] = "value"
    """Monte-Carlo value baseline A = R - V (eq. 8; a PVF when the critic has a context)."""


class GAESpec(GAEOptions, _EstimatorSpecBase):
    name: Literal["gae"] = "gae"
    """Generalised advantage estimation (eqs. 9-11)."""

    def critic_target_lambda(self) -> float:
        # ``auto`` resolves against max_length (0.4^(1/L), Le Critique §7.2).
        return resolve_lambda("lambda_target", self.lambda_target, self.max_length)

    def needs_max_length(self) -> bool:
        return self.max_length is None and "auto" in (self.lambda_gae, self.lambda_target)


class TetherSpec(TetherOptions, _EstimatorSpecBase):
    name: Literal["tether"] = "tether"
    """TETHER: b = (1 - rho) b_LOO + rho V with rho fitted on earlier batches (eqs. 15-18)."""

    def needs_max_length(self) -> bool:
        return self.max_length is None and self.buckets > 1


class EVPOSpec(_EstimatorSpecBase):
    name: Literal["evpo"] = "evpo"
    """EVPO: the critic when the previous batch's explained variance is positive, else the group mean."""


class LVRLSpec(LVRLOptions, _EstimatorSpecBase):
    name: Literal["lvrl"] = "lvrl"
    """LVRL step advantages from anchored consecutive value differences."""


EstimatorSpec = Annotated[
    MeanSpec | RLOOSpec | ValueSpec | GAESpec | TetherSpec | EVPOSpec | LVRLSpec,
    Field(discriminator="name"),
]
