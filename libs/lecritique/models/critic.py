"""The discriminative critic: the policy's backbone plus a scalar value head per token.

Stored as a normal Hugging Face token-classification model with one label
(``AutoModelForTokenClassification``, e.g. ``LlamaForTokenClassification``), so it is saved and
loaded with ``save_pretrained``/``from_pretrained`` like any model. Initialised from the policy
(backbone copied, head random), as in Le Critique Appendix B.3. The head's output is a logit;
the value in [0, 1] is its sigmoid (BCE training) or the raw output (MSE training).

Alignment: the critic reads ``[critic context][prompt][trajectory tokens]``. The value of the
state *before* trajectory token t, V(h_t), is the head output at the position of the token that
precedes it, i.e. ``context_len + prompt_len + t - 1``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForTokenClassification, PreTrainedModel

logger = logging.getLogger(__name__)


def critic_from_policy(policy_dir: str | Path, dtype: torch.dtype = torch.float32) -> PreTrainedModel:
    """A critic whose backbone is the policy's and whose scalar head is freshly initialised."""
    model: PreTrainedModel = AutoModelForTokenClassification.from_pretrained(
        str(policy_dir), num_labels=1, dtype=dtype
    )
    logger.info("initialised critic from policy %s (head random)", policy_dir)
    return model


def load_critic(critic_dir: str | Path, dtype: torch.dtype = torch.float32) -> PreTrainedModel:
    """Load a critic saved with ``save_pretrained``."""
    model: PreTrainedModel = AutoModelForTokenClassification.from_pretrained(str(critic_dir), dtype=dtype)
    if model.config.num_labels != 1:
        raise ValueError(f"{critic_dir} is not a critic: num_labels={model.config.num_labels}, expected 1")
    return model


def value_outputs(model: PreTrainedModel, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Head output (logit) at every position, shape [B, L]."""
    logits: torch.Tensor = model(input_ids=input_ids, attention_mask=attention_mask).logits
    return logits[..., 0]


def state_value_positions(prefix_len: int, num_tokens: int) -> np.ndarray:
    """Positions whose head output is V(h_t) for t = 0..num_tokens-1.

    ``prefix_len`` is everything before the first trajectory token (critic context + prompt);
    it must be >= 1 so that V(h_0) has a position to be read from.
    """
    if prefix_len < 1:
        raise ValueError(f"prefix_len must be >= 1 (the critic needs a prompt), got {prefix_len}")
    return np.arange(prefix_len - 1, prefix_len - 1 + num_tokens)


@torch.no_grad()
def critic_values(
    model: PreTrainedModel,
    sequences: Sequence[tuple[Sequence[int], Sequence[int]]],
    batch_size: int = 32,
    pad_token_id: int = 0,
    sigmoid: bool = True,
) -> list[np.ndarray]:
    """V(h_t) for every trajectory token: ``sequences`` are ``(prefix_ids, token_ids)`` pairs.

    ``prefix_ids`` is everything the critic reads before the trajectory (``critic_context_ids +
    prompt_ids`` of a :class:`~lecritique.trajectory.Trajectory`); the result for a pair is a
    float32 array aligned with ``token_ids``. Batches are right-padded, which leaves a causal
    model's outputs at real positions unchanged. ``sigmoid`` maps logits to [0, 1] (BCE critics).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    device = next(model.parameters()).device
    results: list[np.ndarray] = []
    for start in range(0, len(sequences), batch_size):
        chunk = sequences[start : start + batch_size]
        rows = [[*prefix, *tokens] for prefix, tokens in chunk]
        width = max(len(row) for row in rows)
        input_ids = torch.full((len(rows), width), pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
        for index, row in enumerate(rows):
            input_ids[index, : len(row)] = torch.tensor(row, dtype=torch.long)
            attention_mask[index, : len(row)] = 1
        outputs = value_outputs(model, input_ids.to(device), attention_mask.to(device)).float()
        if sigmoid:
            outputs = torch.sigmoid(outputs)
        outputs_cpu = outputs.cpu().numpy()
        for index, (prefix, tokens) in enumerate(chunk):
            positions = state_value_positions(len(prefix), len(tokens))
            results.append(outputs_cpu[index, positions].astype(np.float32))
    return results
