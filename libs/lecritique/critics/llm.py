"""Text generation for critics on a rollout engine (HF ``generate`` or vLLM), and chat rendering.

Critics generate on the same :class:`~lecritique.engines.RolloutEngine` interface as rollout.
:class:`EngineGenerator` adds what a critic needs on top: a lock (one request at a time on the
engine, weight swaps between requests), the version of the weights that generated, prompt
truncation to the model's context, and token counts.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lecritique.engines import RolloutEngine, SamplingParams

Message = dict[str, str]


def render_messages(messages: Sequence[Message], tokenizer: Any) -> list[int]:
    """Token ids of a chat: the tokenizer's chat template when it has one, else plain text.

    Plain rendering (tiny character-level models have no template) writes every message's
    content followed by a newline, after the tokenizer's special prefix (BOS).
    """
    if getattr(tokenizer, "chat_template", None):
        ids = tokenizer.apply_chat_template(
            list(messages), add_generation_prompt=True, tokenize=True, return_dict=False
        )
        return [int(t) for t in ids]
    text = "".join(f"{message['content']}\n" for message in messages)
    return [int(t) for t in tokenizer.encode(text, add_special_tokens=True)]


@dataclass(frozen=True)
class Generated:
    """One critic completion."""

    text: str
    token_ids: list[int]
    logprobs: list[float]
    prompt_tokens: int
    finish_reason: str


@dataclass(frozen=True)
class GenerationBatch:
    completions: list[list[Generated]]
    """``n`` completions per prompt."""
    prompts: list[list[int]]
    """The prompt ids actually generated from (after truncation)."""
    version: int
    """Weight version that generated every completion."""
    truncated_prompts: int
    """Prompts cut on the left to fit the model's context."""


def max_model_tokens(engine: RolloutEngine) -> int:
    info = engine.info()
    for key in ("max_model_len", "max_position_embeddings"):
        if info.get(key):
            return int(info[key])
    return 2048


class EngineGenerator:
    """A rollout engine used by a critic: serialised requests, in-place weight swaps."""

    def __init__(self, engine: RolloutEngine, tokenizer: Any, version: int = 0) -> None:
        self.engine = engine
        self.tokenizer = tokenizer
        self.version = version
        self.context_tokens = max_model_tokens(engine)
        self._lock = threading.Lock()

    def reload(self, version: int, path: str) -> None:
        """Swap in new weights (waits for the request in flight)."""
        with self._lock:
            self.engine.load_weights(version, path)
            self.version = version

    def _fit(self, ids: list[int], max_tokens: int) -> tuple[list[int], bool]:
        room = self.context_tokens - max_tokens
        if room < 2:
            raise ValueError(
                f"max_tokens {max_tokens} leaves no room for a prompt in a {self.context_tokens}-token context"
            )
        if len(ids) <= room:
            return ids, False
        # Keep the first token (BOS or the template's start) and the end, where the question is.
        return [ids[0], *ids[len(ids) - room + 1 :]], True

    def generate(self, prompts: Sequence[list[int]], sampling: SamplingParams, n: int = 1) -> GenerationBatch:
        fitted = [self._fit(list(ids), sampling.max_tokens) for ids in prompts]
        truncated = sum(cut for _, cut in fitted)
        if not prompts:
            return GenerationBatch([], [], self.version, 0)
        with self._lock:
            groups = self.engine.generate([ids for ids, _ in fitted], n=n, sampling=sampling)
            version = self.version
        completions = [
            [Generated(c.text, list(c.token_ids), list(c.logprobs), len(ids), c.finish_reason) for c in group]
            for (ids, _), group in zip(fitted, groups, strict=True)
        ]
        return GenerationBatch(completions, [ids for ids, _ in fitted], version, truncated)

    def close(self) -> None:
        self.engine.close()
