"""A fixed policy whose values are known exactly: a tiny Llama that is a first-order Markov chain.

Every attention and MLP block writes zero into the residual stream (``o_proj`` and ``down_proj``
are zero), embeddings are one-hot, so the final hidden state depends only on the current token
and the logits are a table: P(next | current). The task ("count_a") rewards an action with at
least two ``a`` characters, so V(prefix) follows from a small dynamic programme over (current
token, number of ``a`` so far, tokens left) with the model's own transition probabilities.
"""

from __future__ import annotations

import math
import random
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from lecritique.envs.base import Environment, ScoreResult, Task
from lecritique.models.char_tokenizer import build_char_tokenizer

ALPHABET = "ab. "
# P(next | current) over the characters and EOS ("$"); unlisted tokens (pad, unk, bos) get ~0.
TRANSITIONS = {
    ".": {"a": 0.15, "b": 0.1, " ": 0.6, "$": 0.15},
    "a": {"a": 0.3, "b": 0.25, ".": 0.3, "$": 0.15},
    "b": {"a": 0.3, "b": 0.25, ".": 0.3, "$": 0.15},
    " ": {"a": 0.5, "b": 0.5},
}
MAX_TOKENS = 8


def write_markov_policy(directory: Path) -> Path:
    tokenizer = build_char_tokenizer(ALPHABET)
    vocab = len(tokenizer)
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=vocab,
        intermediate_size=8,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=False,
        rms_norm_eps=1e-6,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = LlamaForCausalLM(config)
    ids = {char: tokenizer.convert_tokens_to_ids(char) for char in ALPHABET}
    ids["$"] = tokenizer.eos_token_id
    logits = np.full((vocab, vocab), -40.0)  # [current, next]
    for current in range(vocab):
        row = TRANSITIONS.get(tokenizer.convert_ids_to_tokens(current), {"a": 0.5, "b": 0.5})
        for char, probability in row.items():
            logits[current, ids[char]] = math.log(probability)
    with torch.no_grad():
        model.model.embed_tokens.weight.copy_(torch.eye(vocab))
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        model.model.norm.weight.fill_(1.0)
        # rmsnorm(one-hot) = sqrt(d) x one-hot, so logits[next] = sqrt(d) W[next, current].
        model.lm_head.weight.copy_(torch.tensor(logits.T / math.sqrt(vocab), dtype=torch.float32))
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def transition_matrix(directory: Path) -> np.ndarray:
    """The model's own P(next | current), read from its logits (one forward per current token)."""
    model = LlamaForCausalLM.from_pretrained(directory).eval()
    vocab = model.config.vocab_size
    with torch.no_grad():
        logits = model(input_ids=torch.arange(vocab)[:, None]).logits[:, -1]
    return torch.softmax(logits.double(), dim=-1).numpy()


class ExactValues:
    """V(prefix) of the count_a task under the Markov policy, by dynamic programming."""

    def __init__(self, directory: Path) -> None:
        from lecritique.models.policy import load_tokenizer

        self.tokenizer = load_tokenizer(directory)
        self.p = transition_matrix(directory)
        self.a = self.tokenizer.convert_tokens_to_ids("a")
        self.eos = self.tokenizer.eos_token_id
        self.value = lru_cache(maxsize=None)(self._value)

    def _value(self, current: int, count: int, left: int) -> float:
        if count >= 2:
            return 1.0
        if left == 0:
            return 0.0
        total = 0.0
        for nxt, probability in enumerate(self.p[current]):
            if nxt == self.eos:
                continue  # the action ends with fewer than two a's
            total += probability * self.value(nxt, count + (nxt == self.a), left - 1)
        return total

    def of_prefix(self, action_prefix: str) -> float:
        """Value of the state after the first prompt "." and ``action_prefix`` (one token per char)."""
        current = self.tokenizer.convert_tokens_to_ids(action_prefix[-1] if action_prefix else ".")
        return self.value(current, min(action_prefix.count("a"), 2), MAX_TOKENS - len(action_prefix))


class CountAEnvironment(Environment):
    """Single-turn: reward 1 when the action holds at least two ``a``."""

    name = "count_a"
    max_action_chars = 64

    def sample_tasks(self, n: int, split="train", seed: int = 0) -> list[Task]:
        rng = random.Random(seed)
        return [
            Task(task_id=f"{split}-{seed}-{i}-{rng.random():.6f}", prompt=".", reference=None, privileged={})
            for i in range(n)
        ]

    def score(self, task: Task, completion: str) -> ScoreResult:
        count = completion.count("a")
        return ScoreResult(float(count >= 2), f"{count} a")
