"""One small class per advantage estimator.

Equation numbers refer to Le Critique (*Le Critique: Privileged Value Functions for LLM
Reinforcement Learning*, arXiv:2608.16739) unless stated otherwise; LVRL is *LLM Value Functions
for Credit Assignment in Agentic RL* (Zhu et al., 2026). Returns are terminal, undiscounted unless an option says otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from lecritique.advantages.base import AdvantageEstimator, register
from lecritique.advantages.batch import AdvantageBatch, FloatArray, IntArray
from lecritique.advantages.groups import group_index, group_mean, group_std, leave_one_out_mean
from lecritique.advantages.metrics import explained_variance_from_moments, explained_variance_moments
from lecritique.advantages.options import GAEOptions, LVRLOptions, MeanOptions, TetherOptions

_EPS = 1e-6


def _broadcast(per_trajectory: FloatArray, batch: AdvantageBatch) -> FloatArray:
    tokens: FloatArray = np.broadcast_to(per_trajectory[:, None], batch.mask.shape).astype(np.float64)
    return tokens


def _check_unit_interval(name: str, value: float) -> float:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {value}")
    return float(value)


@register
class MeanEstimator(AdvantageEstimator):
    """GRPO group-mean baseline: A_i = R_i - mean_j R_j (eq. 3), optionally / group std.

    Uses the trajectory's own return in its baseline, hence biased by the factor (K-1)/K
    (eq. 6); kept because it is the standard critic-free reference.
    """

    name = "mean"

    def __init__(self, **options: Any) -> None:
        """``options``: the fields of :class:`MeanOptions`."""
        self.normalize_std = MeanOptions(**options).normalize_std

    def _token_advantages(self, batch: AdvantageBatch) -> FloatArray:
        advantages = batch.rewards - group_mean(batch.rewards, batch.group_ids)
        if self.normalize_std:
            # All-equal groups have std 0 and advantage 0: dividing by std + eps keeps them 0.
            advantages = advantages / (group_std(batch.rewards, batch.group_ids) + _EPS)
        return _broadcast(advantages, batch)


@register
class RLOOEstimator(AdvantageEstimator):
    """Leave-one-out baseline: A_i = R_i - (1/(K-1)) sum_{j!=i} R_j (eq. 4). Unbiased."""

    name = "rloo"

    def _token_advantages(self, batch: AdvantageBatch) -> FloatArray:
        baseline = leave_one_out_mean(batch.rewards, batch.group_ids, self.name)
        return _broadcast(batch.rewards - baseline, batch)


@register
class ValueEstimator(AdvantageEstimator):
    """Monte-Carlo value baseline: A_{i,t} = R_i - V(h_{i,t}) (eq. 8; eq. 12 for a PVF)."""

    name = "value"
    uses_critic = True

    def _token_advantages(self, batch: AdvantageBatch) -> FloatArray:
        values = batch.require_values(self.name)
        advantages: FloatArray = batch.rewards[:, None] - values
        return advantages


def _lambda_returns_advantages(
    rewards: FloatArray, values: FloatArray, mask: np.ndarray[Any, Any], gamma: float, lam: float
) -> npt.NDArray[np.float32]:
    """GAE over the policy tokens of each row (eqs. 9-11), skipping non-policy gaps.

    The reward R_i arrives on the last policy token; the state after it is terminal (V = 0).
    Tokens of other turns are not steps of the policy's MDP, so the recursion jumps over them:
    the "next state" of a turn's last token is the next turn's first policy token.
    The recursion runs backwards over time, one vectorised step per position for all rows, on
    blocks of ``_GAE_TIME_BLOCK`` positions transposed to [time, B]: every step reads contiguous
    memory, and each transpose stays cache-sized (a whole-batch transpose of a long batch
    thrashes the cache and the TLB, which made the cost grow faster than the batch).
    """
    batch_size, length = mask.shape
    # float32 like every estimator's output, zero off-policy; the recursion itself runs in float64.
    advantages = np.empty((batch_size, length), dtype=np.float32)
    next_value = np.zeros(batch_size)
    next_advantage = np.zeros(batch_size)
    pending_reward = rewards.astype(np.float64, copy=True)
    discount = gamma * lam
    # Row strides that are powers of two (T = 4096 floats = 16 KiB) map every row of a block to
    # the same few cache sets; one streaming copy to a padded stride avoids those conflicts.
    padded_values = np.empty((batch_size, length + _GAE_ROW_PAD), dtype=np.float64)[:, :length]
    padded_values[...] = values
    padded_mask = np.empty((batch_size, length + _GAE_ROW_PAD), dtype=bool)[:, :length]
    padded_mask[...] = mask
    for stop in range(length, 0, -_GAE_TIME_BLOCK):
        start = max(0, stop - _GAE_TIME_BLOCK)
        values_t = np.ascontiguousarray(padded_values[:, start:stop].T)
        mask_t = np.ascontiguousarray(padded_mask[:, start:stop].T)
        block_t = np.zeros((stop - start, batch_size), dtype=np.float64)
        for t in range(stop - start - 1, -1, -1):
            active = mask_t[t]
            # delta_t = r_t + gamma V_{t+1} - V_t, with r_t = R on the row's last policy token only.
            advantage_t = pending_reward + gamma * next_value - values_t[t] + discount * next_advantage
            np.copyto(block_t[t], advantage_t, where=active)
            np.copyto(next_value, values_t[t], where=active)
            np.copyto(next_advantage, advantage_t, where=active)
            np.copyto(pending_reward, 0.0, where=active)
        advantages[:, start:stop] = block_t.T
    return advantages


_GAE_TIME_BLOCK = 64
"""Positions per transposed block of the GAE recursion (64 x B=1024 float64 = 512 KiB)."""
_GAE_ROW_PAD = 8
"""Extra elements per row of the padded copies (breaks power-of-two row strides)."""


@register
class GAEEstimator(AdvantageEstimator):
    """Generalised advantage estimation (eqs. 9-11) with separate lambdas for policy and critic.

    ``compute`` returns A^{lambda_gae}; :meth:`value_targets` returns R^{lambda_target} =
    V + A^{lambda_target} for the value loss. With gamma = lambda = 1 the residuals telescope
    and the advantages equal the ``value`` estimator's R - V.
    """

    name = "gae"
    uses_critic = True
    # The backward recursion is one vectorised pass over time for the whole batch; chunking
    # rows would repeat its per-step overhead for every chunk.
    chunk_tokens = None

    def __init__(self, **options: Any) -> None:
        """``options``: the fields of :class:`GAEOptions`."""
        checked = GAEOptions(**options)
        self.gamma = checked.gamma
        self.lambda_gae = checked.lambda_gae
        self.lambda_target = checked.lambda_target

    def _token_advantages(self, batch: AdvantageBatch) -> FloatArray:
        return self._advantages(batch).astype(np.float64)

    def _advantages(self, batch: AdvantageBatch) -> npt.NDArray[np.float32]:
        values = batch.require_values(self.name)
        return _lambda_returns_advantages(batch.rewards, values, batch.mask, self.gamma, self.lambda_gae)

    def compute(self, batch: AdvantageBatch) -> Any:
        # The recursion already writes float32 zeros off-policy: no second masking pass.
        return batch.wrap(self._advantages(batch))

    def value_targets(self, batch: AdvantageBatch) -> Any:
        """Critic regression targets R^{lambda_target}_{i,t} (eq. 10), zero off-policy."""
        values = batch.require_values(self.name)
        advantages = _lambda_returns_advantages(batch.rewards, values, batch.mask, self.gamma, self.lambda_target)
        return batch.output(values + advantages)


def _bucket_of_positions(length: int, buckets: int, max_length: int | None) -> IntArray:
    """m(t) for every token position: M uniform bins over [0, max_length) (eq. 18)."""
    horizon = max_length if max_length is not None else length
    positions = np.arange(length)
    bucket: IntArray = np.minimum(positions * buckets // max(horizon, 1), buckets - 1).astype(np.int64)
    return bucket


@register
class TetherEstimator(AdvantageEstimator):
    """TETHER: b = (1 - rho) b^LOO + rho V, A = R - b (eq. 15; per-bucket rho_m(t), eq. 18).

    ``compute`` uses the coefficient fitted on earlier batches (rho_{k-1}); ``update`` then fits
    rho_hat_k = clip_[0,1](sum (R - B)(V - B) / sum (V - B)^2) over this batch's policy tokens
    (eqs. 16, 22) and smooths rho_k = d rho_{k-1} + (1 - d) rho_hat_k (eq. 17), so no batch
    ever uses a coefficient fitted on its own returns. rho_0 = 0 (pure group baseline).
    """

    name = "tether"
    uses_critic = True
    gauges: ClassVar[Mapping[str, str]] = {"tether_rho": "TETHER coefficient used for the last batch"}

    def __init__(self, *, initial_rho: float = 0.0, **options: Any) -> None:
        """``options``: the fields of :class:`TetherOptions`; ``initial_rho``: rho_0."""
        checked = TetherOptions(**options)
        self.ema_decay = checked.ema_decay
        self.buckets = checked.buckets
        self.max_length = checked.max_length
        self.rho = np.full(self.buckets, _check_unit_interval("initial_rho", initial_rho))
        self.last_fit = np.full(self.buckets, np.nan)
        self.updates = 0

    def _mixture_terms(self, batch: AdvantageBatch) -> tuple[FloatArray, FloatArray, IntArray]:
        values = batch.require_values(self.name)
        loo = leave_one_out_mean(batch.rewards, batch.group_ids, self.name)[:, None]
        group_advantage: FloatArray = batch.rewards[:, None] - loo
        correction: FloatArray = values - loo
        bucket = _bucket_of_positions(batch.num_tokens, self.buckets, self.max_length)
        return group_advantage, correction, bucket

    def _token_advantages(self, batch: AdvantageBatch) -> FloatArray:
        group_advantage, correction, bucket = self._mixture_terms(batch)
        # A_rho = A_B - rho * (V - B), eq. 19 of Appendix C.
        advantages: FloatArray = group_advantage - self.rho[bucket][None, :] * correction
        return advantages

    def fit(self, batch: AdvantageBatch) -> FloatArray:
        """rho_hat per bucket on this batch (NaN where sum (V - B)^2 = 0)."""
        numerator = np.zeros(self.buckets)
        denominator = np.zeros(self.buckets)
        for rows in batch.group_chunks(self.chunk_tokens or batch.mask.size):
            chunk = batch.select(rows)
            group_advantage, correction, bucket = self._mixture_terms(chunk)
            weighted = np.where(chunk.mask, correction, 0.0)
            numerator += np.bincount(bucket, weights=(weighted * group_advantage).sum(axis=0), minlength=self.buckets)
            denominator += np.bincount(bucket, weights=(weighted * correction).sum(axis=0), minlength=self.buckets)
        fitted = np.full(self.buckets, np.nan)
        defined = denominator > 0
        fitted[defined] = np.clip(numerator[defined] / denominator[defined], 0.0, 1.0)
        return fitted

    def update(self, batch: AdvantageBatch) -> None:
        fitted = self.fit(batch)
        defined = ~np.isnan(fitted)
        self.rho = np.where(defined, self.ema_decay * self.rho + (1 - self.ema_decay) * np.nan_to_num(fitted), self.rho)
        self.last_fit = fitted
        self.updates += 1

    def state_dict(self) -> dict[str, Any]:
        return {
            "rho": self.rho.tolist(),
            "last_fit": [None if np.isnan(x) else float(x) for x in self.last_fit],
            "updates": self.updates,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        rho = np.asarray(state["rho"], dtype=np.float64)
        if rho.shape != (self.buckets,):
            raise ValueError(f"rho in state has {rho.size} bucket(s), estimator has {self.buckets}")
        if np.any((rho < 0) | (rho > 1)):
            raise ValueError("rho in state must lie in [0, 1]")
        self.rho = rho
        self.last_fit = np.asarray([np.nan if x is None else x for x in state.get("last_fit", [None] * self.buckets)])
        self.updates = int(state.get("updates", 0))

    def metrics(self) -> dict[str, float]:
        out = {"tether_rho": float(self.rho.mean())}
        if self.buckets > 1:
            out.update({f"tether_rho_bucket_{m}": float(r) for m, r in enumerate(self.rho)})
        return out

    def report(self, used: dict[str, float], fitted: dict[str, float]) -> dict[str, float]:
        """The coefficients this batch used (mean and per bucket) and the mean fitted for the next."""
        return {**used, "tether_rho_fitted": fitted["tether_rho"]}


@register
class EVPOEstimator(AdvantageEstimator):
    """EVPO (Le Critique Appendix C, eq. 25): use the critic (A = R - V) when the previous
    batch's explained variance was positive, else the group mean (A = R - mean R).

    The decision is lagged like TETHER's rho: the first batch uses the group mean.
    """

    name = "evpo"
    uses_critic = True

    def __init__(self) -> None:
        self.previous_explained_variance: float | None = None

    def _token_advantages(self, batch: AdvantageBatch) -> FloatArray:
        ev = self.previous_explained_variance
        if ev is not None and ev > 0:
            values = batch.require_values(self.name)
            critic: FloatArray = batch.rewards[:, None] - values
            return critic
        return _broadcast(batch.rewards - group_mean(batch.rewards, batch.group_ids), batch)

    def update(self, batch: AdvantageBatch) -> None:
        batch.require_values(self.name)
        moments = np.zeros(5)
        for rows in batch.group_chunks(self.chunk_tokens or batch.mask.size):
            chunk = batch.select(rows)
            moments += explained_variance_moments(chunk.values, chunk.rewards, chunk.mask)
        ev = explained_variance_from_moments(moments)
        if not np.isnan(ev):
            self.previous_explained_variance = ev

    def state_dict(self) -> dict[str, Any]:
        return {"previous_explained_variance": self.previous_explained_variance}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        value = state["previous_explained_variance"]
        self.previous_explained_variance = None if value is None else float(value)

    def metrics(self) -> dict[str, float]:
        ev = self.previous_explained_variance
        return {"evpo_uses_critic": float(ev is not None and ev > 0)}


@register
class LVRLEstimator(AdvantageEstimator):
    """LVRL step advantages (LVRL paper, Figure 1).

    For trajectory i with steps s_0 .. s_{S-1} (from ``step_ids`` on policy tokens), the state
    values are V(s_0) := mu_G (the group's success rate), V(s_j) := the critic's value at the
    first token of step j for 0 < j < S, and V(s_S) := R_i. The step advantage is
    A_j = V(s_{j+1}) - V(s_j), normalised across all steps of the group (centred and, with
    ``normalize_std``, divided by their std), and shared by every token of the step.
    """

    name = "lvrl"
    uses_critic = True

    def __init__(self, **options: Any) -> None:
        """``options``: the fields of :class:`LVRLOptions`."""
        checked = LVRLOptions(**options)
        self.normalize_std = checked.normalize_std
        self.center = checked.center

    def step_advantages(self, batch: AdvantageBatch) -> list[FloatArray]:
        """Unnormalised step advantages of each trajectory (length S_i each)."""
        values = batch.require_values(self.name)
        step_ids = batch.require_step_ids(self.name)
        success_rate = group_mean(batch.rewards, batch.group_ids)
        per_row: list[FloatArray] = []
        for row in range(batch.batch_size):
            positions = np.flatnonzero(batch.mask[row])
            steps, first = np.unique(step_ids[row, positions], return_index=True)
            state_values = np.empty(steps.size + 1)
            state_values[0] = success_rate[row]
            state_values[1:-1] = values[row, positions[first[1:]]]
            state_values[-1] = batch.rewards[row]
            per_row.append(np.diff(state_values))
        return per_row

    def _token_advantages(self, batch: AdvantageBatch) -> FloatArray:
        per_row = self.step_advantages(batch)
        index, _ = group_index(batch.group_ids)
        groups = index.max() + 1
        sums = np.bincount(index, weights=[a.sum() for a in per_row], minlength=groups)
        counts = np.bincount(index, weights=[a.size for a in per_row], minlength=groups)
        means = sums / counts
        squares = np.bincount(
            index, weights=[((a - means[g]) ** 2).sum() for a, g in zip(per_row, index, strict=True)], minlength=groups
        )
        stds = np.sqrt(squares / counts)
        step_ids = batch.require_step_ids(self.name)
        out = np.zeros(batch.mask.shape)
        for row, step_adv in enumerate(per_row):
            g = index[row]
            normalised = step_adv - means[g] if self.center else step_adv
            if self.normalize_std:
                normalised = normalised / (stds[g] + _EPS)
            positions = np.flatnonzero(batch.mask[row])
            steps = np.unique(step_ids[row, positions])
            out[row, positions] = normalised[np.searchsorted(steps, step_ids[row, positions])]
        return out
