"""Settings of the rollout engines (light: no torch, no transformers, no vLLM).

Experiment specs embed these; :func:`lecritique.engines.build_engine` starts the engine one names.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from lecritique.models.dtypes import DType


class HFEngineConfig(BaseModel):
    """Transformers ``generate`` backend (CPU or one GPU)."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["hf"] = "hf"
    """Discriminator."""
    model_path: str | None = Field(default=None, json_schema_extra={"x-tenant-rule": "model_path"})
    """Hugging Face model directory of the initial policy weights (filled in at launch when None)."""
    dtype: DType = "float32"
    """Parameter dtype."""
    device: str = "cpu"
    """Torch device ("cpu", "cuda", "cuda:1")."""
    max_batch_size: int = Field(default=256, ge=1, le=65_536)
    """Most sequences decoded together in one ``generate`` call."""
    seed: int = 0
    """Seed of the engine's generator, used for requests without their own seed."""


class VLLMEngineConfig(BaseModel):
    """vLLM offline-engine backend."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["vllm"] = "vllm"
    """Discriminator."""
    model_path: str | None = Field(default=None, json_schema_extra={"x-tenant-rule": "model_path"})
    """Hugging Face model directory of the initial policy weights (filled in at launch when None)."""
    dtype: DType = "float32"
    """Parameter and activation dtype (float32 on CPU so logprobs match the trainer's)."""
    max_model_len: int = Field(default=512, ge=16, le=1_048_576)
    """Longest prompt + completion the engine accepts."""
    seed: int = 0
    """Engine seed, used for requests without their own seed."""
    enforce_eager: bool = True
    """Skip CUDA-graph / torch.compile capture (fast start; required for tiny CPU models)."""
    enable_prefix_caching: bool = True
    """Reuse KV of shared prompt prefixes (the n samples of a prompt share it)."""
    cpu_kv_cache_gib: int = Field(default=1, ge=1, le=1024)
    """KV cache size on CPU (``VLLM_CPU_KVCACHE_SPACE``); ignored on GPU."""
    gpu_memory_utilization: float = Field(default=0.85, gt=0, le=1)
    """Fraction of GPU memory vLLM may take; ignored on CPU."""
    tensor_parallel_size: int = Field(default=1, ge=1, le=64)
    """GPUs one engine shards the model over."""

    @field_validator("dtype")
    @classmethod
    def _vllm_dtype(cls, dtype: DType) -> DType:
        if dtype == "float64":
            raise ValueError("vLLM does not run float64; use float32, bfloat16 or float16")
        return dtype


EngineConfig = Annotated[HFEngineConfig | VLLMEngineConfig, Field(discriminator="kind")]
"""Which backend serves the policy, and its settings (``kind: hf | vllm``)."""
