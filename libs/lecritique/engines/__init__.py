"""Rollout engines: one interface over vLLM and Hugging Face ``generate``."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from lecritique.engines.base import Completion, FinishReason, RolloutEngine, SamplingParams
from lecritique.engines.hf import HFEngine, HFEngineConfig
from lecritique.engines.vllm import VLLMEngine, VLLMEngineConfig

EngineConfig = Annotated[HFEngineConfig | VLLMEngineConfig, Field(discriminator="kind")]
"""Which backend serves the policy, and its settings (``kind: hf | vllm``)."""


def build_engine(config: HFEngineConfig | VLLMEngineConfig) -> RolloutEngine:
    """Start the engine ``config`` describes (vLLM: call from a ``__main__``-guarded context)."""
    if isinstance(config, HFEngineConfig):
        return HFEngine(config)
    if isinstance(config, VLLMEngineConfig):
        return VLLMEngine(config)
    raise TypeError(f"unknown engine config {type(config).__name__}")


__all__ = [
    "Completion",
    "EngineConfig",
    "FinishReason",
    "HFEngine",
    "HFEngineConfig",
    "RolloutEngine",
    "SamplingParams",
    "VLLMEngine",
    "VLLMEngineConfig",
    "build_engine",
]
