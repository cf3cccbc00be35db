"""TETHER, the adaptive group-value baseline (Le Critique: Privileged Value Functions for LLM
Reinforcement Learning, arXiv:2608.16739, §5 eqs. 15-17, token buckets §7.3 eq. 18, Appendix C).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from lecritique.advantages.base import AdvantageEstimator, EstimatorSpecBase, register
from lecritique.advantages.batch import AdvantageBatch, BoolArray, FloatArray, IntArray
from lecritique.advantages.groups import leave_one_out_mean
from lecritique.advantages.positions import position_buckets


def _per_bucket_sum(weights: FloatArray, bucket: IntArray | None, buckets: int) -> FloatArray:
    """Sum of ``weights`` per bucket (the whole sum when there is one bucket)."""
    if bucket is None:
        return np.array([weights.sum()])
    sums: FloatArray = np.bincount(bucket.ravel(), weights=weights.ravel(), minlength=buckets).astype(
        np.float64
    )
    return sums


class TetherSpec(EstimatorSpecBase):
    name: Literal["tether"] = "tether"
    """TETHER: b = (1 - rho) b_LOO + rho V with rho fitted on earlier batches (eqs. 15-18)."""
    ema_decay: float = Field(default=0.95, ge=0.0, le=1.0)
    """EMA decay d of the fitted coefficient (eq. 17)."""
    buckets: int = Field(default=1, ge=1, le=1024)
    """Number of uniform token-position buckets, each with its own rho (eq. 18). At most 1024: each
    bucket is an array entry when the estimator is built (which validating a spec does) and two
    metrics columns in every step's row."""
    max_length: int | None = Field(default=None, ge=1)
    """The maximum response length in policy tokens (every turn's generated tokens), the range the
    buckets split uniformly. Required when buckets > 1; an experiment spec fills it in:
    sampling.max_tokens x the environment's turn limit."""

    def needs_max_length(self) -> bool:
        return self.max_length is None and self.buckets > 1

    def ev_buckets(self) -> int:
        # The critic's explained variance per bucket sits next to each bucket's rho.
        return self.buckets if self.buckets > 1 else super().ev_buckets()


@register
class TetherEstimator(AdvantageEstimator):
    """TETHER: b = (1 - rho) b^LOO + rho V, A = R - b (eq. 15; per-bucket rho_m(t), eq. 18).

    ``compute`` uses the coefficient fitted on earlier batches (rho_{k-1}); ``update`` then fits
    rho_hat_k = clip_[0,1](sum (R - B)(V - B) / sum (V - B)^2) over this batch's policy tokens
    (eqs. 16, 22) and smooths rho_k = d rho_{k-1} + (1 - d) rho_hat_k (eq. 17), so no batch
    ever uses a coefficient fitted on its own returns. rho_0 = 0 (pure group baseline).

    With ``buckets`` > 1, bucket m covers the response positions [m L / M, (m + 1) L / M) with
    L = ``max_length`` (required): positions count policy tokens from the episode's first
    generated token (:mod:`lecritique.advantages.positions`), so a bucket means the same tokens
    in every batch whatever its padded length. The orchestrator reports the critic's explained
    variance on the same buckets (``value_ev_bucket_{m}`` next to ``tether_rho_bucket_{m}``).
    """

    name = "tether"
    Spec = TetherSpec
    uses_critic = True
    # rho_0 = 0: the leave-one-out baseline, which needs no critic (Le Critique §5.1).
    steps_while_critic_warms = True
    min_group_size = 2
    group_reason = (
        "its baseline mixes the leave-one-out mean of the group's other returns, and a group of one has none"
    )
    gauges: ClassVar[Mapping[str, str]] = {
        "tether_rho": "TETHER coefficient used for the last batch",
    }

    def __init__(self, *, initial_rho: float = 0.0, **options: Any) -> None:
        """``options``: the fields of :class:`TetherSpec` but ``name``; ``initial_rho``: rho_0."""
        checked = TetherSpec(**options)
        buckets, max_length = checked.buckets, checked.max_length
        if buckets > 1 and max_length is None:
            raise ValueError(
                "buckets > 1 needs max_length, the maximum response length in policy tokens: bucket "
                "edges must not move with each batch's padded length (an experiment spec fills it in "
                "from sampling.max_tokens x the environment's turn limit)"
            )
        if not 0.0 <= initial_rho <= 1.0:
            raise ValueError(f"initial_rho must be in [0, 1], got {initial_rho}")
        self.ema_decay = checked.ema_decay
        self.buckets = buckets
        self.max_length = max_length
        self.rho = np.full(buckets, float(initial_rho))
        self.last_fit = np.full(buckets, np.nan)
        self.updates = 0

    def _bucket(self, mask: BoolArray) -> IntArray | None:
        """m(t) of every token, or None with a single bucket."""
        if self.buckets == 1 or self.max_length is None:
            return None
        return position_buckets(mask, self.buckets, self.max_length)

    def _mixture_terms(self, batch: AdvantageBatch) -> tuple[FloatArray, FloatArray]:
        """A^B = R - B^LOO ([B, 1]) and V - B^LOO ([B, T])."""
        values = batch.require_values(self.name)
        loo = leave_one_out_mean(batch.rewards, batch.group_ids, self.name)[:, None]
        group_advantage: FloatArray = batch.rewards[:, None] - loo
        correction: FloatArray = values - loo
        return group_advantage, correction

    def _token_advantages(self, batch: AdvantageBatch) -> FloatArray:
        group_advantage, correction = self._mixture_terms(batch)
        bucket = self._bucket(batch.mask)
        rho = self.rho[0] if bucket is None else self.rho[bucket]
        # A_rho = A_B - rho * (V - B), eq. 19 of Appendix C.
        advantages: FloatArray = group_advantage - rho * correction
        return advantages

    def fit(self, batch: AdvantageBatch) -> FloatArray:
        """rho_hat per bucket on this batch (NaN where sum (V - B)^2 = 0)."""
        numerator = np.zeros(self.buckets)
        denominator = np.zeros(self.buckets)
        for rows in batch.group_chunks(self.chunk_tokens or batch.mask.size):
            chunk = batch.select(rows)
            group_advantage, correction = self._mixture_terms(chunk)
            bucket = self._bucket(chunk.mask)
            weighted = np.where(chunk.mask, correction, 0.0)
            numerator += _per_bucket_sum(weighted * group_advantage, bucket, self.buckets)
            denominator += _per_bucket_sum(weighted * correction, bucket, self.buckets)
        fitted = np.full(self.buckets, np.nan)
        defined = denominator > 0
        fitted[defined] = np.clip(numerator[defined] / denominator[defined], 0.0, 1.0)
        return fitted

    def update(self, batch: AdvantageBatch) -> None:
        fitted = self.fit(batch)
        defined = ~np.isnan(fitted)
        self.rho = np.where(
            defined, self.ema_decay * self.rho + (1 - self.ema_decay) * np.nan_to_num(fitted), self.rho
        )
        self.last_fit = fitted
        self.updates += 1

    def state_dict(self) -> dict[str, Any]:
        return {
            "rho": self.rho.tolist(),
            "last_fit": _nan_to_none(self.last_fit),
            "updates": self.updates,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        rho = np.asarray(state["rho"], dtype=np.float64)
        if rho.shape != (self.buckets,):
            raise ValueError(f"rho in state has {rho.size} bucket(s), estimator has {self.buckets}")
        if np.any((rho < 0) | (rho > 1)):
            raise ValueError("rho in state must lie in [0, 1]")
        self.rho = rho
        unset = [None] * self.buckets
        self.last_fit = _none_to_nan(state.get("last_fit", unset))
        self.updates = int(state.get("updates", 0))

    def metrics(self) -> dict[str, float]:
        out = {"tether_rho": float(self.rho.mean())}
        if self.buckets > 1:
            out.update({f"tether_rho_bucket_{m}": float(r) for m, r in enumerate(self.rho)})
        return out

    def report(self, used: dict[str, float], fitted: dict[str, float]) -> dict[str, float]:
        """The coefficients this batch used (mean and per bucket) and the mean fitted for the next
        batch (``tether_rho_fitted``)."""
        return {**used, "tether_rho_fitted": fitted["tether_rho"]}


def _nan_to_none(array: FloatArray) -> list[float | None]:
    return [None if np.isnan(x) else float(x) for x in array]


def _none_to_nan(items: list[float | None]) -> FloatArray:
    return np.asarray([np.nan if x is None else float(x) for x in items], dtype=np.float64)
