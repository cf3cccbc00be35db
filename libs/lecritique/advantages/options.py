"""The options of the estimators that have any: fields, defaults and bounds said once.

An estimator validates its keyword options with its model here; the experiment spec's
estimator section (:mod:`lecritique.config.estimators`) is the same model plus ``name``.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class EstimatorOptions(BaseModel):
    """Base of every estimator's options: unknown options are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class MeanOptions(EstimatorOptions):
    normalize_std: bool = False
    """Divide group-centred returns by the group's standard deviation."""


LambdaSetting = Annotated[float, Field(ge=0.0, le=1.0)] | Literal["auto"]
"""A lambda in [0, 1], or ``auto``: 0.4^(1/L), L the maximum response length (Le Critique §7.2)."""

class GAEOptions(EstimatorOptions):
    gamma: float = Field(default=1.0, ge=0.0, le=1.0)
    """Discount per policy token."""
    lambda_gae: LambdaSetting = 1.0
    """lambda of the policy advantages (1: unbiased Monte-Carlo advantages; auto: 0.4^(1/max_length))."""
    lambda_target: LambdaSetting = 1.0
    """lambda of the critic's value targets (1: Monte-Carlo targets; auto: 0.4^(1/max_length))."""
    max_length: int | None = Field(default=None, ge=1)
    """L of ``auto`` lambdas: the maximum response length in policy tokens. Required by ``auto``;
    an experiment spec fills it in: sampling.max_tokens x the environment's turn limit."""


class TetherOptions(EstimatorOptions):
    ema_decay: float = Field(default=0.95, ge=0.0, le=1.0)
    """EMA decay d of the fitted coefficient (eq. 17)."""
    buckets: int = Field(default=1, ge=1)
    """Number of uniform token-position buckets, each with its own rho (eq. 18)."""
    max_length: int | None = Field(default=None, ge=1)
    """The maximum response length in policy tokens (every turn's generated tokens), the range the
    buckets split uniformly. Required when buckets > 1; an experiment spec fills it in:
    sampling.max_tokens x the environment's turn limit."""


class LVRLOptions(EstimatorOptions):
    normalize_std: bool = True
    """Divide the group-centred step advantages by their standard deviation."""
    center: bool = True
    """Subtract the group's mean step advantage."""
