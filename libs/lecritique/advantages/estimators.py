"""One small class per advantage estimator, each with its spec section (options plus ``name``) above it.

Equation numbers refer to Le Critique: Privileged Value Functions for LLM Reinforcement
Learning (arXiv:2608.16739) unless stated otherwise; LVRL is *LLM Value Functions for Credit
Assignment in Agentic RL* (Zhu et al., 2026). Returns are terminal, undiscounted unless an option
says otherwise. TETHER lives in :mod:`lecritique.advantages.tether`.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from pydantic import Field

from lecritique.advantages.base import AdvantageEstimator, EstimatorSpecBase, register
from lecritique.advantages.batch import AdvantageBatch, FloatArray
from lecritique.advantages.groups import group_index, group_mean, group_std, leave_one_out_mean
from lecritique.advantages.metrics import explained_variance_from_moments, explained_variance_moments
from lecritique.advantages.returns import LambdaSetting, lambda_returns_advantages, resolve_lambda

_EPS = 1e-6


def _broadcast(per_trajectory: FloatArray, batch: AdvantageBatch) -> FloatArray:
    tokens: FloatArray = np.broadcast_to(per_trajectory[:, None], batch.mask.shape).astype(np.float64)
    return tokens


class MeanSpec(EstimatorSpecBase):
    name: Literal["mean"] = "mean"
    """GRPO group-mean baseline (Le Critique eq. 3)."""
    normalize_std: bool = False
    """Divide group-centred returns by the group's standard deviation."""


@register
class MeanEstimator(AdvantageEstimator):
    """GRPO group-mean baseline: A_i = R_i - mean_j R_j (eq. 3), optionally / group std.

    Uses the trajectory's own return in its baseline, hence biased by the factor (K-1)/K
    (eq. 6); kept because it is the standard critic-free reference.
    """

    name = "mean"
    Spec = MeanSpec
    min_group_size = 2
    group_reason = "its baseline is the group's mean return, which for a group of one is the return itself: every advantage is 0"

    def __init__(self, **options: Any) -> None:
        """``options``: the fields of :class:`MeanSpec` but ``name``."""
        self.normalize_std = MeanSpec(**options).normalize_std

    def _token_advantages(self, batch: AdvantageBatch) -> FloatArray:
        advantages = batch.rewards - group_mean(batch.rewards, batch.group_ids)
        if self.normalize_std:
            # All-equal groups have std 0 and advantage 0: dividing by std + eps keeps them 0.
            advantages = advantages / (group_std(batch.rewards, batch.group_ids) + _EPS)
        return _broadcast(advantages, batch)


class RLOOSpec(EstimatorSpecBase):
    name: Literal["rloo"] = "rloo"
    """Leave-one-out group baseline (eq. 4)."""


@register
class RLOOEstimator(AdvantageEstimator):
    """Leave-one-out baseline: A_i = R_i - (1/(K-1)) sum_{j!=i} R_j (eq. 4). Unbiased."""

    name = "rloo"
    Spec = RLOOSpec
    min_group_size = 2
    group_reason = "its baseline is the mean return of the group's other members, and a group of one has none"

    def _token_advantages(self, batch: AdvantageBatch) -> FloatArray:
        baseline = leave_one_out_mean(batch.rewards, batch.group_ids, self.name)
        return _broadcast(batch.rewards - baseline, batch)


class ValueSpec(EstimatorSpecBase):
    name: Literal["value"] = "value"
    """Monte-Carlo value baseline A = R - V (eq. 8; a PVF when the critic has a context)."""


@register
class ValueEstimator(AdvantageEstimator):
    """Monte-Carlo value baseline: A_{i,t} = R_i - V(h_{i,t}) (eq. 8; eq. 12 for a PVF)."""

    name = "value"
    Spec = ValueSpec
    uses_critic = True

    def _token_advantages(self, batch: AdvantageBatch) -> FloatArray:
        values = batch.require_values(self.name)
        advantages: FloatArray = batch.rewards[:, None] - values
        return advantages


class GAESpec(EstimatorSpecBase):
    name: Literal["gae"] = "gae"
    """Generalised advantage estimation (eqs. 9-11)."""
    gamma: float = Field(default=1.0, ge=0.0, le=1.0)
    """Discount per policy token."""
    lambda_gae: LambdaSetting = 1.0
    """lambda of the policy advantages (1: unbiased Monte-Carlo advantages; auto: 0.4^(1/max_length))."""
    lambda_target: LambdaSetting = 1.0
    """lambda of the critic's value targets (1: Monte-Carlo targets; auto: 0.4^(1/max_length))."""
    max_length: int | None = Field(default=None, ge=1)
    """L of ``auto`` lambdas: the maximum response length in policy tokens. Required by ``auto``;
    an experiment spec fills it in: sampling.max_tokens x the environment's turn limit."""

    def critic_target_lambda(self) -> float:
        # ``auto`` resolves against max_length (0.4^(1/L), Le Critique §7.2).
        return resolve_lambda("lambda_target", self.lambda_target, self.max_length)

    def needs_max_length(self) -> bool:
        return self.max_length is None and "auto" in (self.lambda_gae, self.lambda_target)


@register
class GAEEstimator(AdvantageEstimator):
    """Generalised advantage estimation (eqs. 9-11) with separate lambdas for policy and critic.

    ``compute`` returns A^{lambda_gae}; :meth:`value_targets` returns R^{lambda_target} =
    V + A^{lambda_target} for the value loss. With gamma = lambda = 1 the residuals telescope
    and the advantages equal the ``value`` estimator's R - V. Either lambda may be ``"auto"``:
    0.4^(1/L) with L = ``max_length`` (§7.2); the resolved numbers are in :meth:`metrics`.
    """

    name = "gae"
    Spec = GAESpec
    uses_critic = True
    # The backward recursion is one vectorised pass over time for the whole batch; chunking
    # rows would repeat its per-step overhead for every chunk.
    chunk_tokens = None

    def __init__(self, **options: Any) -> None:
        """``options``: the fields of :class:`GAESpec` but ``name``."""
        checked = GAESpec(**options)
        self.gamma = checked.gamma
        self.max_length = checked.max_length
        self.lambda_gae = resolve_lambda("lambda_gae", checked.lambda_gae, checked.max_length)
        self.lambda_target = resolve_lambda("lambda_target", checked.lambda_target, checked.max_length)

    def _token_advantages(self, batch: AdvantageBatch) -> FloatArray:
        return self._advantages(batch).astype(np.float64)

    def _advantages(self, batch: AdvantageBatch) -> npt.NDArray[np.float32]:
        values = batch.require_values(self.name)
        return lambda_returns_advantages(batch.rewards, values, batch.mask, self.gamma, self.lambda_gae)

    def compute(self, batch: AdvantageBatch) -> Any:
        # The recursion already writes float32 zeros off-policy: no second masking pass.
        return batch.wrap(self._advantages(batch))

    def value_targets(self, batch: AdvantageBatch) -> Any:
        """Critic regression targets R^{lambda_target}_{i,t} (eq. 10), zero off-policy."""
        values = batch.require_values(self.name)
        advantages = lambda_returns_advantages(
            batch.rewards, values, batch.mask, self.gamma, self.lambda_target
        )
        return batch.output(values + advantages)

    def metrics(self) -> dict[str, float]:
        return {"gae_lambda": self.lambda_gae, "gae_lambda_target": self.lambda_target}


class EVPOSpec(EstimatorSpecBase):
    name: Literal["evpo"] = "evpo"
    """EVPO: the critic when the previous batch's explained variance is positive, else the group mean."""


@register
class EVPOEstimator(AdvantageEstimator):
    """EVPO (Le Critique Appendix C, eq. 25): use the critic (A = R - V) when the previous
    batch's explained variance was positive, else the group mean (A = R - mean R).

    The decision is lagged like TETHER's rho: the first batch uses the group mean.
    """

    name = "evpo"
    Spec = EVPOSpec
    uses_critic = True
    # No explained variance fitted yet: the group mean, which needs no critic.
    steps_while_critic_warms = True

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


class LVRLSpec(EstimatorSpecBase):
    name: Literal["lvrl"] = "lvrl"
    """LVRL step advantages from anchored consecutive value differences."""
    normalize_std: bool = True
    """Divide the group-centred step advantages by their standard deviation."""
    center: bool = True
    """Subtract the group's mean step advantage."""


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
    Spec = LVRLSpec
    uses_critic = True
    # V(s_j) for j >= 1 is a state value used in a step's advantage, not a baseline of its own
    # action, so values that read the whole trajectory (the paper's frozen LLM) are admissible.
    admits_hindsight = True
    min_group_size = 2
    group_reason = (
        "its first state value is the group's success rate, which for a group of one is the return itself: "
        "a single-step response's advantage is 0"
    )

    @classmethod
    def ignored_values(cls, turn_limit: int) -> str | None:
        if turn_limit > 1:
            return None
        return (
            "estimator 'lvrl' on a single-turn environment: each response is one step, so its only state "
            "values are mu_G and R and the critic's values are never read (A = R - mu_G: this is GRPO, the "
            "'mean' estimator); LVRL needs a multi-turn environment"
        )

    def __init__(self, **options: Any) -> None:
        """``options``: the fields of :class:`LVRLSpec` but ``name``."""
        checked = LVRLSpec(**options)
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
            index,
            weights=[((a - means[g]) ** 2).sum() for a, g in zip(per_row, index, strict=True)],
            minlength=groups,
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


class _CriticFreeFallback(AdvantageEstimator):
    """Leave-one-out group baseline; baseline 0 for a trajectory without peers (not registered)."""

    name = "critic_free_fallback"

    def _token_advantages(self, batch: AdvantageBatch) -> FloatArray:
        index, counts = group_index(batch.group_ids)
        sizes = counts[index]
        sums = np.bincount(index, weights=batch.rewards)[index]
        baseline = np.where(sizes > 1, (sums - batch.rewards) / np.maximum(sizes - 1, 1), 0.0)
        return _broadcast(batch.rewards - baseline, batch)


def critic_free_advantages(batch: AdvantageBatch) -> Any:
    """Advantages of a batch the critic could not score (the value plane was degraded).

    The leave-one-out group baseline (Le Critique eq. 4): TETHER with rho = 0, and the unbiased
    critic-free baseline the papers compare ``value``/``gae``/``evpo`` against. No estimator state
    is read or fitted, so a degraded stretch neither corrupts nor resets TETHER's rho or EVPO's
    switch. A trajectory alone in its group (group_size 1) has baseline 0 (plain REINFORCE)."""
    return _CriticFreeFallback().compute(batch)
