"""lambda-returns: the GAE recursion over policy tokens and the length-calibrated lambda.

Equations refer to Le Critique: Privileged Value Functions for LLM Reinforcement Learning
(arXiv:2608.16739): eqs. 9-11 (GAE), §7.2 (lambda calibrated to the response length).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import numpy as np
import numpy.typing as npt
from pydantic import Field

from lecritique.advantages.batch import FloatArray

LambdaSetting = Annotated[float, Field(ge=0.0, le=1.0)] | Literal["auto"]
"""A lambda in [0, 1], or ``auto``: 0.4^(1/L), L the maximum response length (Le Critique §7.2)."""

AUTO_LAMBDA_RETAINED = 0.4
"""Share of the terminal signal the first token keeps under ``lambda: auto`` (Le Critique §7.2)."""


def length_calibrated_lambda(max_length: int, retained: float = AUTO_LAMBDA_RETAINED) -> float:
    """lambda = retained^(1/L): after L policy tokens the terminal signal is scaled by ``retained``.

    Le Critique §7.2: 0.4^(1/8192) ~ 0.999888 for 8192-token responses. With lambda < 1 the
    advantage of a token n policy tokens before the end weighs the terminal return by lambda^n
    (gamma = 1), so calibrating to the longest response keeps at least ``retained`` of it.
    """
    if max_length < 1:
        raise ValueError(f"max_length must be >= 1, got {max_length}")
    if not 0.0 < retained <= 1.0:
        raise ValueError(f"retained must be in (0, 1], got {retained}")
    return float(retained ** (1.0 / max_length))


def resolve_lambda(name: str, setting: float | str, max_length: int | None) -> float:
    """A lambda option as a number: itself, or for ``"auto"`` 0.4^(1/max_length) (§7.2)."""
    if isinstance(setting, str):
        if setting != "auto":
            raise ValueError(f"{name} must be a number in [0, 1] or 'auto', got {setting!r}")
        if max_length is None:
            raise ValueError(
                f"{name} 'auto' needs max_length, the maximum response length in policy tokens "
                "(an experiment spec fills it in from sampling.max_tokens x the environment's turn limit)"
            )
        return length_calibrated_lambda(max_length)
    if not 0.0 <= setting <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {setting}")
    return float(setting)


def lambda_returns_advantages(
    rewards: FloatArray, values: FloatArray, mask: np.ndarray[Any, Any], gamma: float, lam: float
) -> npt.NDArray[np.float32]:
    """GAE over the policy tokens of each row (eqs. 9-11), skipping non-policy gaps.

    The reward R_i arrives on the last policy token; the state after it is terminal (V = 0).
    Tokens of other turns are not steps of the policy's MDP, so the recursion jumps over them:
    the "next state" of a turn's last token is the next turn's first policy token.
    The recursion runs backwards over time, one vectorised step per position for all rows, on
    blocks of ``GAE_TIME_BLOCK`` positions transposed to [time, B]: every step reads contiguous
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
    padded_values = np.empty((batch_size, length + GAE_ROW_PAD), dtype=np.float64)[:, :length]
    padded_values[...] = values
    padded_mask = np.empty((batch_size, length + GAE_ROW_PAD), dtype=bool)[:, :length]
    padded_mask[...] = mask
    for stop in range(length, 0, -GAE_TIME_BLOCK):
        start = max(0, stop - GAE_TIME_BLOCK)
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


GAE_TIME_BLOCK = 64
"""Positions per transposed block of the GAE recursion (64 x B=1024 float64 = 512 KiB)."""
GAE_ROW_PAD = 8
"""Extra elements per row of the padded copies (breaks power-of-two row strides)."""
