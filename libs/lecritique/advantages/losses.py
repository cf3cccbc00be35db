"""Token-level value losses (Le Critique Appendix B.4): BCE for binary rewards, MSE otherwise.

Both take the critic's per-token outputs, per-token targets and a mask, and average over the
masked tokens (token-normalised, like the policy loss of eq. 1).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _masked_mean(per_token: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    weights = mask.to(per_token.dtype)
    count = weights.sum()
    if count.item() == 0:
        raise ValueError("mask selects no tokens: the value loss is undefined")
    return (per_token * weights).sum() / count


def _check(outputs: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> None:
    if outputs.shape != targets.shape or outputs.shape != mask.shape:
        raise ValueError(
            f"value loss shapes differ: outputs {tuple(outputs.shape)}, targets {tuple(targets.shape)}, "
            f"mask {tuple(mask.shape)}"
        )


def bce_value_loss(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Binary cross-entropy on the value head's logits; the value is sigmoid(logit) in [0, 1].

    Targets may be fractional (Monte-Carlo or lambda-return targets): BCE's minimiser is still
    the expected return.
    """
    _check(logits, targets, mask)
    if torch.any((targets < 0) | (targets > 1)):
        raise ValueError("targets must lie in [0, 1] for the bce value loss; use mse for other returns")
    per_token = F.binary_cross_entropy_with_logits(logits, targets.to(logits.dtype), reduction="none")
    return _masked_mean(per_token, mask)


def mse_value_loss(values: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Squared error of predicted values against targets."""
    _check(values, targets, mask)
    return _masked_mean((values - targets.to(values.dtype)) ** 2, mask)


VALUE_LOSSES = {"bce": bce_value_loss, "mse": mse_value_loss}


def value_loss(kind: str, outputs: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Dispatch by name: ``bce`` expects logits, ``mse`` expects values."""
    try:
        loss = VALUE_LOSSES[kind]
    except KeyError:
        raise ValueError(f"unknown value loss {kind!r}; known: {sorted(VALUE_LOSSES)}") from None
    return loss(outputs, targets, mask)
