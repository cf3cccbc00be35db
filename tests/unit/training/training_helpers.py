"""Tiny models and synthetic trajectories shared by the training tests (imported by name)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from lecritique.trajectory import Trajectory

VOCAB_SIZE = 32


def save_tiny_llama(directory: Path, seed: int = 0) -> Path:
    """A 1-layer random Llama (12k parameters) saved with ``save_pretrained``."""
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=128,
        tie_word_embeddings=False,
    )
    LlamaForCausalLM(config).save_pretrained(directory)
    return directory


def make_trajectory(
    rng: np.random.Generator,
    index: int,
    prompt_len: int,
    num_tokens: int,
    advantage: float | None = 0.0,
    reward: float = 0.0,
    env_tokens: int = 0,
    critic_context_len: int = 0,
) -> Trajectory:
    """Random tokens; the last ``env_tokens`` tokens before the final two are environment tokens."""
    policy_mask = np.ones(num_tokens, dtype=bool)
    if env_tokens:
        policy_mask[num_tokens - 2 - env_tokens : num_tokens - 2] = False
    logprobs = np.where(policy_mask, -rng.uniform(0.5, 4.0, num_tokens), 0.0).astype(np.float32)
    advantages = None if advantage is None else np.where(policy_mask, advantage, 0.0).astype(np.float32)
    return Trajectory(
        trajectory_id=f"t{index}",
        task_id=f"task{index // 2}",
        group_id=index // 2,
        prompt_ids=rng.integers(1, VOCAB_SIZE, prompt_len),
        token_ids=rng.integers(1, VOCAB_SIZE, num_tokens),
        policy_mask=policy_mask,
        logprobs=logprobs,
        step_ids=np.zeros(num_tokens, dtype=np.int32),
        reward=reward,
        policy_version=0,
        advantages=advantages,
        critic_context_ids=rng.integers(1, VOCAB_SIZE, critic_context_len) if critic_context_len else None,
    )
