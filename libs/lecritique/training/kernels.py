"""Which attention kernel the trainers and the critic's forward-only path run, and determinism.

HF models call ``torch.nn.functional.scaled_dot_product_attention`` (``attn_implementation``
``sdpa``, their default); :func:`sdpa_backends` picks the backends it may choose from, and
:func:`attention_kernels` holds them for a forward and its backward (activation checkpointing
recomputes inside the backward, so the recompute runs the same kernel).

``auto``: flash, then memory-efficient attention for bf16/fp16 on CUDA; memory-efficient, then
math for float32 on CUDA; math on the CPU. cuDNN attention is never chosen by ``auto``: measured
on an H200 (issue #38) it rebuilt its execution graph on every call in the policy trainer (1.8 s
of CPU time per step). Flash attention takes no explicit mask, so ``flash`` alone fails on a
padded micro-batch (HF passes the padding mask); ``auto`` falls back to memory-efficient there.

``deterministic``: ``torch.use_deterministic_algorithms(True)``, cuBLAS's fixed workspace
(``CUBLAS_WORKSPACE_CONFIG=:4096:8``, which must be set before the first cuBLAS call) and the math
SDPA backend (flash and memory-efficient backward accumulate with atomics), so that two runs, or
a resumed run and a straight one, compute bit-identical steps on the same machine.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from typing import Literal

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

logger = logging.getLogger(__name__)

AttentionBackend = Literal["auto", "flash", "efficient", "math", "cudnn"]

_NAMED: dict[str, SDPBackend] = {
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "math": SDPBackend.MATH,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
}
_NAMES = {backend: name for name, backend in _NAMED.items()}

CUBLAS_WORKSPACE = ":4096:8"
"""The cuBLAS workspace setting under which its kernels are deterministic."""


def sdpa_backends(
    setting: str, device_type: str, dtype: torch.dtype, deterministic: bool = False
) -> list[SDPBackend]:
    """The SDPA backends for ``setting`` on a ``device_type`` (``cuda``, ``cpu``) at compute ``dtype``, in priority order."""
    if setting != "auto" and setting not in _NAMED:
        raise ValueError(f"attention_backend must be one of auto, {', '.join(_NAMED)}; got {setting!r}")
    if deterministic:
        if setting not in ("auto", "math"):
            raise ValueError(
                f"attention_backend {setting!r} has a nondeterministic backward: use 'auto' or 'math' with deterministic"
            )
        return [SDPBackend.MATH]
    if setting != "auto":
        return [_NAMED[setting]]
    if device_type != "cuda":
        return [SDPBackend.MATH]
    if dtype in (torch.bfloat16, torch.float16):
        return [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]
    return [SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


def backend_names(backends: list[SDPBackend]) -> list[str]:
    """The setting names of ``backends`` (``flash``, ``efficient``, ``math``, ``cudnn``)."""
    return [_NAMES[backend] for backend in backends]


@contextlib.contextmanager
def attention_kernels(backends: list[SDPBackend]) -> Iterator[None]:
    """SDPA restricted to ``backends`` inside the block (forward and the backward run in it)."""
    with sdpa_kernel(backends):
        yield


def log_attention(
    role: str, setting: str, backends: list[SDPBackend], device: torch.device, dtype: torch.dtype
) -> str:
    """One log line naming the backends that run; returned for the caller's metrics."""
    line = (
        f"{role}: attention backend {'+'.join(backend_names(backends))} "
        f"(attention_backend {setting}, {device.type}, {str(dtype).removeprefix('torch.')})"
    )
    logger.info(line)
    return line


def apply_determinism() -> None:
    """Deterministic kernels for this process (idempotent); call before CUDA is first used."""
    if os.environ.get("CUBLAS_WORKSPACE_CONFIG") not in (CUBLAS_WORKSPACE, ":16:8"):
        if torch.cuda.is_available() and torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
            logger.warning("deterministic: CUDA was initialised before CUBLAS_WORKSPACE_CONFIG was set")
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = CUBLAS_WORKSPACE
    torch.use_deterministic_algorithms(True)
    if torch.backends.cudnn.is_available():  # type: ignore[no-untyped-call]
        torch.backends.cudnn.benchmark = False
