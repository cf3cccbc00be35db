"""The rollout-engine interface shared by the vLLM and Hugging Face backends.

Logprob convention (both backends): ``Completion.logprobs[i]`` is the log-probability of the
sampled token ``token_ids[i]`` under the model's raw distribution, i.e. ``log_softmax(logits)``
at temperature 1 with no top-p/top-k truncation, whatever temperature the token was sampled at.
That is the quantity the policy trainer recomputes, so importance ratios compare like with like.

Token convention: ``token_ids`` end with the stop token when generation stopped on one
(``finish_reason == "stop"``), so the trainer sees, and learns, the decision to stop; ``text``
is the decoded completion without special tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

FinishReason = Literal["stop", "length"]
Prompts = list[list[int]] | list[str]


class SamplingParams(BaseModel):
    """How completions are sampled."""

    model_config = ConfigDict(extra="forbid")
    temperature: float = Field(default=1.0, ge=0.0)
    """Softmax temperature; 0 means greedy decoding."""
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    """Nucleus sampling mass (1: off)."""
    top_k: int = Field(default=-1, ge=-1)
    """Keep only the k most likely tokens (-1: off)."""
    max_tokens: int = Field(default=64, ge=1)
    """Maximum number of generated tokens per completion."""
    seed: int | None = None
    """Random seed of this request; None draws from the engine's generator."""
    stop_token_ids: list[int] = Field(default_factory=list)
    """Extra token ids that end a completion, in addition to the tokenizer's EOS token."""
    ignore_eos: bool = False
    """Keep generating past the EOS token (benchmarks that need fixed-length completions)."""

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


@dataclass
class Completion:
    """One sampled completion of one prompt."""

    token_ids: list[int]
    """Generated token ids, ending with the stop token when ``finish_reason == "stop"``."""
    logprobs: list[float]
    """Raw-model (temperature 1) log-probability of each generated token."""
    text: str
    """Decoded completion without special tokens."""
    finish_reason: FinishReason
    """``stop``: a stop/EOS token ended it; ``length``: ``max_tokens`` was reached."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Backend extras (e.g. the weight version that produced it)."""


@runtime_checkable
class RolloutEngine(Protocol):
    """A policy inference engine: batched sampling plus in-place weight updates."""

    def generate(
        self, prompts: Prompts, n: int = 1, sampling: SamplingParams | None = None
    ) -> list[list[Completion]]:
        """``n`` completions for each prompt (token ids, or text encoded with special tokens)."""
        ...

    def load_weights(self, version: int, path: str) -> None:
        """Switch to the weights in ``path`` (an HF directory of the same architecture)."""
        ...

    def info(self) -> dict[str, Any]:
        """Backend name, model path, current weight version, limits."""
        ...

    def close(self) -> None:
        """Stop background processes and free the model."""
        ...


def validate_prompts(prompts: Prompts, n: int) -> None:
    """Raise a clear error for inputs no backend can serve."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if not isinstance(prompts, list):
        raise TypeError(f"prompts must be a list of token-id lists or strings, got {type(prompts).__name__}")
    for index, prompt in enumerate(prompts):
        if isinstance(prompt, str):
            continue
        if len(prompt) == 0:
            raise ValueError(f"prompt {index} is empty; every prompt needs at least one token")


def encode_prompts(prompts: Prompts, tokenizer: Any) -> list[list[int]]:
    """Token ids of each prompt; text prompts are encoded with special tokens (e.g. BOS)."""
    encoded: list[list[int]] = []
    vocab_size = len(tokenizer)
    for index, prompt in enumerate(prompts):
        ids = (
            tokenizer.encode(prompt, add_special_tokens=True)
            if isinstance(prompt, str)
            else [int(t) for t in prompt]  # type: ignore[call-overload]
        )
        if not ids:
            raise ValueError(f"prompt {index} encodes to no tokens")
        bad = [t for t in ids if t < 0 or t >= vocab_size]
        if bad:
            raise ValueError(
                f"prompt {index} has token ids outside the vocabulary [0, {vocab_size}): {bad[:5]}"
            )
        encoded.append(ids)
    return encoded


def stop_ids(sampling: SamplingParams, eos_token_id: int | None) -> list[int]:
    """The token ids that end a completion under ``sampling``."""
    stops = list(dict.fromkeys(sampling.stop_token_ids))
    if eos_token_id is not None and not sampling.ignore_eos and eos_token_id not in stops:
        stops.append(eos_token_id)
    return stops
