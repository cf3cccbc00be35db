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
from typing import Any

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


def value_outputs(
    model: PreTrainedModel, input_ids: torch.Tensor, attention_mask: torch.Tensor
) -> torch.Tensor:
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


class CriticShapeError(ValueError):
    """A critic shape or start that cannot be built from this policy; the message names the spec field."""


def _shaped_config(
    config: Any, policy_dir: str | Path, layers: int | None, hidden: int | None, init: str
) -> Any:
    """The policy's config at the critic's depth and width with one label; refuses shapes that
    cannot be built (``CriticShapeError`` naming the spec field)."""
    if (layers is not None or hidden is not None) and config.model_type != "llama":
        raise CriticShapeError(
            f"critic.tiny: the policy in {policy_dir} is a {config.model_type!r} model, not a tiny Llama; "
            "give an HF policy a critic of another size with critic.model_path (same tokenizer)"
        )
    heads = int(config.num_attention_heads)
    width = hidden or int(config.hidden_size)
    if width % heads:
        raise CriticShapeError(
            f"critic.tiny.hidden: {width} is not divisible by the policy's {heads} attention heads"
        )
    if init == "policy" and width != int(config.hidden_size):
        raise CriticShapeError(
            f"critic.init: 'policy' copies the policy's weights, which needs critic.tiny.hidden = the policy's "
            f"hidden size {config.hidden_size} (got {width}); set critic.init: fresh for another width"
        )
    scale = width / int(config.hidden_size)
    return config.__class__.from_dict(
        {
            **config.to_dict(),
            "num_hidden_layers": layers or int(config.num_hidden_layers),
            "hidden_size": width,
            "intermediate_size": round(int(config.intermediate_size) * scale),
            "head_dim": width // heads,
            "num_labels": 1,
            "architectures": None,
        }
    )


def shaped_critic(
    policy_dir: str | Path,
    *,
    layers: int | None = None,
    hidden: int | None = None,
    init: str = "policy",
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
) -> PreTrainedModel:
    """A critic of its own depth and width for a tiny (Llama) policy, started from the policy or fresh.

    ``init="policy"`` copies every backbone tensor of the policy whose name and shape the critic
    has (embeddings, final norm, the first ``min(layers, policy layers)`` layers), so it needs the
    policy's width; the rest, and the head, are random (``seed``). ``init="fresh"``: all random.
    """
    from transformers import AutoConfig, AutoModelForCausalLM

    shaped = _shaped_config(AutoConfig.from_pretrained(str(policy_dir)), policy_dir, layers, hidden, init)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model: PreTrainedModel = AutoModelForTokenClassification.from_config(shaped, dtype=dtype)  # type: ignore[no-untyped-call]
    if init == "policy":
        policy = AutoModelForCausalLM.from_pretrained(str(policy_dir), dtype=dtype)
        own = model.model.state_dict()
        copied = {k: v for k, v in policy.model.state_dict().items() if k in own and own[k].shape == v.shape}
        model.model.load_state_dict(copied, strict=False)
        logger.info(
            "critic %s: %d of %d backbone tensors copied from policy %s",
            shaped.num_hidden_layers,
            len(copied),
            len(own),
            policy_dir,
        )
    return model


def same_tokenizer(path: str | Path, policy_dir: str | Path) -> str | None:
    """Why the tokenizer saved in ``path`` is not the policy's (None: it is, token for token)."""
    from transformers import AutoConfig, AutoTokenizer

    try:
        theirs, ours = (
            AutoTokenizer.from_pretrained(str(path)),
            AutoTokenizer.from_pretrained(str(policy_dir)),
        )
    except (OSError, ValueError):
        # A directory without tokenizer files (a bare model): the embedding sizes are all there is to compare.
        sizes = [int(AutoConfig.from_pretrained(str(p)).vocab_size) for p in (path, policy_dir)]
        return None if sizes[0] == sizes[1] else f"its vocab_size {sizes[0]} is not the policy's {sizes[1]}"
    if theirs.get_vocab() != ours.get_vocab():
        return f"its vocabulary ({len(theirs)} tokens) is not the policy's ({len(ours)} tokens)"
    for name in ("bos_token_id", "eos_token_id", "pad_token_id"):
        if getattr(theirs, name) != getattr(ours, name):
            return f"its {name} is {getattr(theirs, name)}, the policy's {getattr(ours, name)}"
    return None


def is_saved_critic(path: str | Path) -> bool:
    """Whether ``path`` holds a critic (a one-label token-classification model), not another model."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(str(path))
    architectures = config.architectures or []
    return getattr(config, "num_labels", None) == 1 and any(
        a.endswith("ForTokenClassification") for a in architectures
    )


def critic_or_backbone(path: str | Path, dtype: torch.dtype = torch.float32) -> PreTrainedModel:
    """A saved critic (one label) as it is, or any other model's backbone with a fresh scalar head."""
    return load_critic(path, dtype) if is_saved_critic(path) else critic_from_policy(path, dtype)
