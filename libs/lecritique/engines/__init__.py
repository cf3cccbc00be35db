"""Rollout engines: one interface over vLLM and Hugging Face ``generate``.

This package's ``__init__`` stays light (configs and the interface): the backends import torch,
transformers or vLLM, so import them from :mod:`lecritique.engines.hf` / :mod:`lecritique.engines.vllm`
or start one with :func:`build_engine`.
"""

from __future__ import annotations

from lecritique.engines.base import Completion, FinishReason, RolloutEngine, SamplingParams
from lecritique.engines.config import EngineConfig, HFEngineConfig, VLLMEngineConfig


def build_engine(config: HFEngineConfig | VLLMEngineConfig) -> RolloutEngine:
    """Start the engine ``config`` describes (vLLM: call from a ``__main__``-guarded context)."""
    if isinstance(config, HFEngineConfig):
        from lecritique.engines.hf import HFEngine

        return HFEngine(config)
    if isinstance(config, VLLMEngineConfig):
        from lecritique.engines.vllm import VLLMEngine

        return VLLMEngine(config)
    raise TypeError(f"unknown engine config {type(config).__name__}")


__all__ = [
    "Completion",
    "EngineConfig",
    "FinishReason",
    "HFEngineConfig",
    "RolloutEngine",
    "SamplingParams",
    "VLLMEngineConfig",
    "build_engine",
]
