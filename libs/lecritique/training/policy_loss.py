"""Token-level policy losses: PRIME-RL's DPPO+KL (Le Critique Table 1) and PPO-clip.

Every loss has one signature::

    loss, statistics = policy_loss(logprobs, old_logprobs, advantages, mask, config, num_tokens=N)

with ``logprobs`` the trainer's log-probabilities of the sampled tokens (differentiable),
``old_logprobs`` the rollout engine's (the importance ratio is taken against them),
``advantages`` the frozen per-token advantages and ``mask`` the policy tokens. All four have
the same shape. The loss is a *sum* over the masked tokens divided by ``num_tokens``: the number
of policy tokens in the whole (global) batch, which makes it eq. 1's token-normalised estimator
however the batch is split into micro-batches or across data-parallel ranks (the pieces add up
to the full-batch loss). ``statistics`` holds token *sums* that add across pieces the same way.

DPPO (PRIME-RL's default loss; DPPO-Binary-TV mask plus Kimi-K2.5's squared log-ratio penalty)::

    r = exp(logp - old_logp)                       (importance ratio)
    dropped = (A > 0 and p - p_old > mask_high) or (A < 0 and p_old - p > mask_low)
    loss_t = -[not dropped] * A * r + kl_coef * (logp - old_logp)^2

i.e. a token whose probability already moved past the threshold in the direction its advantage
pushes gets no policy-gradient signal; the penalty applies to every policy token, dropped or not.
Gradients flow through ``r`` (d r / d logp = r): an importance-weighted policy gradient.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch

from lecritique.training.config import DPPOLossConfig, PPOClipLossConfig


@dataclass
class LossStatistics:
    """Token sums of one loss evaluation; they add across micro-batches and ranks."""

    tokens: torch.Tensor
    """Number of policy tokens seen."""
    pg_loss: torch.Tensor
    """Sum of the per-token policy-gradient term (the loss without the penalty)."""
    kl_penalty: torch.Tensor
    """Sum of (logp - old_logp)^2 (before the coefficient)."""
    masked: torch.Tensor
    """DPPO: tokens dropped by the probability-change mask."""
    masked_high: torch.Tensor
    """DPPO: tokens dropped because A > 0 and their probability rose too much."""
    masked_low: torch.Tensor
    """DPPO: tokens dropped because A < 0 and their probability fell too much."""
    clipped: torch.Tensor
    """PPO-clip: tokens where the clipped branch is active (their gradient is zero)."""
    ratio: torch.Tensor
    """Sum of importance ratios exp(logp - old_logp)."""
    mismatch_kl: torch.Tensor
    """Sum of r - log r - 1, the k3 estimate of KL(rollout policy || trainer policy)."""

    @classmethod
    def zeros(cls, device: torch.device | str = "cpu") -> LossStatistics:
        return cls(**{f.name: torch.zeros((), dtype=torch.float64, device=device) for f in fields(cls)})

    def __add__(self, other: LossStatistics) -> LossStatistics:
        return LossStatistics(
            **{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)}
        )

    def as_tensor(self) -> torch.Tensor:
        """All sums in one float64 vector (one all-reduce for every statistic)."""
        return torch.stack([getattr(self, f.name).to(torch.float64) for f in fields(self)])

    @classmethod
    def from_tensor(cls, vector: torch.Tensor) -> LossStatistics:
        return cls(**{f.name: vector[i] for i, f in enumerate(fields(cls))})

    def as_metrics(self) -> dict[str, float]:
        """Per-token means: masked / clipped fractions, mean ratio, KL estimates."""
        count = max(float(self.tokens), 1.0)
        return {
            "policy_tokens": float(self.tokens),
            "pg_loss": float(self.pg_loss) / count,
            "kl_penalty": float(self.kl_penalty) / count,
            "masked_fraction": float(self.masked) / count,
            "masked_high_fraction": float(self.masked_high) / count,
            "masked_low_fraction": float(self.masked_low) / count,
            "clip_fraction": float(self.clipped) / count,
            "mean_ratio": float(self.ratio) / count,
            "mismatch_kl": float(self.mismatch_kl) / count,
        }


def _check_inputs(
    logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor
) -> None:
    shapes = {
        "logprobs": logprobs.shape,
        "old_logprobs": old_logprobs.shape,
        "advantages": advantages.shape,
        "mask": mask.shape,
    }
    if len(set(shapes.values())) != 1:
        described = ", ".join(f"{name} {tuple(shape)}" for name, shape in shapes.items())
        raise ValueError(f"policy loss inputs must have one shape, got {described}")
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must be a bool tensor, got dtype {mask.dtype}")


def _normaliser(mask: torch.Tensor, num_tokens: float | None) -> float:
    if num_tokens is None:
        num_tokens = float(mask.sum())
    if num_tokens <= 0:
        raise ValueError(f"num_tokens must be positive (policy tokens in the global batch), got {num_tokens}")
    return float(num_tokens)


def _finish(
    per_token_pg: torch.Tensor,
    log_ratio: torch.Tensor,
    ratio: torch.Tensor,
    mask: torch.Tensor,
    kl_coef: float,
    num_tokens: float | None,
    masked_high: torch.Tensor,
    masked_low: torch.Tensor,
    clipped: torch.Tensor,
) -> tuple[torch.Tensor, LossStatistics]:
    normaliser = _normaliser(mask, num_tokens)
    zero = torch.zeros((), dtype=per_token_pg.dtype, device=per_token_pg.device)
    # torch.where, not multiplication: padding may hold anything, and 0 * inf = nan.
    pg_sum = torch.where(mask, per_token_pg, zero).sum()
    squared_log_ratio = torch.where(mask, log_ratio, zero) ** 2
    kl_sum = squared_log_ratio.sum()
    loss = (pg_sum + kl_coef * kl_sum) / normaliser
    with torch.no_grad():
        safe_log_ratio = torch.where(mask, log_ratio.detach(), zero)
        safe_ratio = torch.where(mask, ratio, zero)
        statistics = LossStatistics(
            tokens=mask.sum().to(torch.float64),
            pg_loss=pg_sum.detach().to(torch.float64),
            kl_penalty=kl_sum.detach().to(torch.float64),
            masked=(masked_high | masked_low)[mask].sum().to(torch.float64),
            masked_high=masked_high[mask].sum().to(torch.float64),
            masked_low=masked_low[mask].sum().to(torch.float64),
            clipped=clipped[mask].sum().to(torch.float64),
            ratio=safe_ratio.sum().to(torch.float64),
            mismatch_kl=torch.where(mask, safe_ratio - safe_log_ratio - 1.0, zero).sum().to(torch.float64),
        )
    return loss, statistics


def dppo_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    config: DPPOLossConfig,
    num_tokens: float | None = None,
) -> tuple[torch.Tensor, LossStatistics]:
    """DPPO+KL (module docstring); ``num_tokens`` defaults to the policy tokens in ``mask``."""
    _check_inputs(logprobs, old_logprobs, advantages, mask)
    log_ratio = logprobs - old_logprobs
    with torch.no_grad():
        ratio = torch.exp(log_ratio)
        probability_change = torch.exp(logprobs) - torch.exp(old_logprobs)
        masked_high = (advantages > 0) & (probability_change > config.mask_high)
        masked_low = (advantages < 0) & (probability_change < -config.mask_low)
        keep = mask & ~(masked_high | masked_low)
    # The ratio is exponentiated only where kept: a dropped token may have a huge log-ratio, and
    # an overflowing exp in the unselected branch of torch.where still poisons the gradient (0 * inf).
    kept_ratio = torch.exp(torch.where(keep, log_ratio, torch.zeros_like(log_ratio)))
    advantages = advantages.to(kept_ratio.dtype)
    per_token_pg = torch.where(keep, -advantages * kept_ratio, torch.zeros_like(kept_ratio))
    return _finish(
        per_token_pg,
        log_ratio,
        ratio,
        mask,
        config.kl_coef,
        num_tokens,
        masked_high,
        masked_low,
        torch.zeros_like(mask),
    )


def ppo_clip_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    config: PPOClipLossConfig,
    num_tokens: float | None = None,
) -> tuple[torch.Tensor, LossStatistics]:
    """-min(r A, clip(r, 1 - clip_low, 1 + clip_high) A) per token, plus the optional penalty."""
    _check_inputs(logprobs, old_logprobs, advantages, mask)
    log_ratio = logprobs - old_logprobs
    ratio = torch.exp(log_ratio)
    advantages = advantages.to(ratio.dtype)
    unclipped = ratio * advantages
    clipped_objective = torch.clamp(ratio, 1.0 - config.clip_low, 1.0 + config.clip_high) * advantages
    per_token_pg = -torch.minimum(unclipped, clipped_objective)
    with torch.no_grad():
        clipped = clipped_objective < unclipped
    no_mask = torch.zeros_like(mask)
    return _finish(
        per_token_pg, log_ratio, ratio, mask, config.kl_coef, num_tokens, no_mask, no_mask, clipped
    )


def policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    config: DPPOLossConfig | PPOClipLossConfig,
    num_tokens: float | None = None,
) -> tuple[torch.Tensor, LossStatistics]:
    """Dispatch on ``config.kind``."""
    if isinstance(config, DPPOLossConfig):
        return dppo_loss(logprobs, old_logprobs, advantages, mask, config, num_tokens)
    if isinstance(config, PPOClipLossConfig):
        return ppo_clip_loss(logprobs, old_logprobs, advantages, mask, config, num_tokens)
    raise ValueError(f"unknown policy loss config {type(config).__name__}")
