"""Parameter dtypes by name: the one ``DType`` literal every config uses (no torch import here)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import torch

DType = Literal["float32", "bfloat16", "float16", "float64"]
"""Parameter dtype of a model (engines, trainers, teachers)."""


def torch_dtype(name: DType) -> torch.dtype:
    """The ``torch.dtype`` called ``name`` (imports torch)."""
    import torch

    dtype: torch.dtype = getattr(torch, name)
    return dtype
