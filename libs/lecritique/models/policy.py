"""The policy: any Hugging Face causal LM directory (config, safetensors, tokenizer)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel

from lecritique.models.dtypes import DType, torch_dtype

logger = logging.getLogger(__name__)


def load_tokenizer(path: str | Path) -> Any:
    """The tokenizer saved with the model; left padding, so batched generation lines up."""
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    tokenizer.padding_side = "left"
    if tokenizer.eos_token_id is None:
        raise ValueError(f"the tokenizer in {path} has no eos_token; policy actions must end with one")
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_policy(path: str | Path, dtype: DType | torch.dtype = "float32") -> tuple[PreTrainedModel, Any]:
    """``(model, tokenizer)`` from a causal-LM directory (``AutoModelForCausalLM``)."""
    parameter_dtype = torch_dtype(dtype) if isinstance(dtype, str) else dtype
    directory = Path(path)
    if not (directory / "config.json").is_file():
        raise FileNotFoundError(f"policy directory {directory} has no config.json")
    model = AutoModelForCausalLM.from_pretrained(str(directory), dtype=parameter_dtype)
    tokenizer = load_tokenizer(directory)
    logger.info(
        "loaded policy %s (%s, %.2fM parameters)",
        directory,
        model.config.model_type,
        model.num_parameters() / 1e6,
    )
    return model, tokenizer
