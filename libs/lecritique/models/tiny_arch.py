"""Tiny Llama architecture for CPU runs: a character tokenizer plus a few hundred thousand weights."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, Field
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedModel


class TinyArchitecture(BaseModel):
    """Shape of a tiny Llama (defaults: ~0.5M parameters with a ~30-character vocabulary)."""

    model_config = ConfigDict(extra="forbid")
    hidden_size: int = Field(default=128, ge=8)
    """Width of the residual stream."""
    num_layers: int = Field(default=2, ge=1)
    """Number of decoder layers."""
    num_heads: int = Field(default=4, ge=1)
    """Attention heads (head size = hidden_size / num_heads)."""
    intermediate_size: int = Field(default=512, ge=8)
    """Width of the MLP."""
    max_positions: int = Field(default=512, ge=16)
    """Longest sequence (prompt + completion, all turns) the model supports."""
    initializer_range: float = Field(default=0.02, gt=0)
    """Std of the random initialisation."""


def tiny_llama_config(tokenizer: Any, architecture: TinyArchitecture) -> LlamaConfig:
    if architecture.hidden_size % architecture.num_heads:
        raise ValueError(
            f"hidden_size {architecture.hidden_size} is not divisible by num_heads {architecture.num_heads}"
        )
    return LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=architecture.hidden_size,
        intermediate_size=architecture.intermediate_size,
        num_hidden_layers=architecture.num_layers,
        num_attention_heads=architecture.num_heads,
        num_key_value_heads=architecture.num_heads,
        max_position_embeddings=architecture.max_positions,
        initializer_range=architecture.initializer_range,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        dtype="float32",
    )


def init_tiny_policy(tokenizer: Any, architecture: TinyArchitecture, seed: int) -> PreTrainedModel:
    """A randomly initialised tiny Llama, identical for identical ``seed`` and architecture."""
    config = tiny_llama_config(tokenizer, architecture)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)  # type: ignore[no-untyped-call]
    return model


def save_policy(model: PreTrainedModel, tokenizer: Any, directory: str | Path) -> Path:
    """Write an HF model directory (safetensors + config + generation config + tokenizer)."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    return out


def write_random_tiny_policy(
    directory: str | Path,
    alphabet: str,
    seed: int = 0,
    architecture: TinyArchitecture | None = None,
) -> Path:
    """Save an untrained tiny Llama with a character tokenizer over ``alphabet`` (for tests)."""
    from lecritique.models.char_tokenizer import build_char_tokenizer

    tokenizer = build_char_tokenizer(alphabet)
    model = init_tiny_policy(tokenizer, architecture or TinyArchitecture(), seed)
    return save_policy(model, tokenizer, directory)
