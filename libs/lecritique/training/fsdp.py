"""FSDP2 (``torch.distributed.fsdp.fully_shard``), mixed precision and activation checkpointing.

``fully_shard`` is applied per decoder layer (the classes a HF model lists in
``_no_split_modules``) and then to the whole model, as torchtitan, verl and prime-rl do: each
layer's parameters are all-gathered just before its forward and backward and freed after, and
gradients are reduce-scattered, so a rank holds 1/N of the parameters, gradients and AdamW
state. Parameters are DTensors afterwards; :func:`full_parameters` gathers them one at a time
(a collective), which is how a sharded trainer publishes a HF directory without ever holding
two full copies of the model.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.checkpoint import checkpoint

from lecritique.weights.broadcast import model_tensors

logger = logging.getLogger(__name__)


def mixed_precision_dtype(setting: str, device: torch.device) -> torch.dtype | None:
    """The compute dtype of ``mixed_precision`` (``auto``/``bf16``/``off``) on ``device``; None: full precision.

    ``auto`` is bf16 on CUDA devices that support it and off elsewhere (CPU training stays float32,
    where bf16 matmuls are slower and the tests compare against float32 references).
    """
    if setting == "off":
        return None
    if setting == "bf16":
        return torch.bfloat16
    if setting == "auto":
        if device.type == "cuda" and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return None
    raise ValueError(f"mixed_precision must be 'auto', 'bf16' or 'off', got {setting!r}")


def decoder_layers(model: nn.Module) -> list[nn.Module]:
    """The repeated blocks of a HF model (its ``_no_split_modules`` classes), in order."""
    names = set(getattr(model, "_no_split_modules", None) or ())
    layers = [module for module in model.modules() if type(module).__name__ in names]
    if not layers:
        raise ValueError(
            f"{type(model).__name__} names no decoder-layer classes (_no_split_modules); cannot wrap it per layer"
        )
    return layers


def apply_activation_checkpointing(model: nn.Module) -> int:
    """Recompute every decoder layer's activations in the backward pass; returns the layer count.

    The layer's ``forward`` is replaced by a non-reentrant ``torch.utils.checkpoint`` call on
    the original, so parameter names do not change (HF's own switch only acts in train mode, and
    the trainers run the model in eval mode).
    """
    layers = decoder_layers(model)
    for layer in layers:
        layer.forward = _checkpointed(layer.forward)
    return len(layers)


def _checkpointed(forward: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        # A KV cache passed to the layer would be appended to twice (forward, then recompute);
        # training never reads it, so the checkpointed layer does not write to it.
        for name in ("past_key_values", "past_key_value"):
            if name in kwargs:
                kwargs[name] = None
        return checkpoint(forward, *args, use_reentrant=False, **kwargs)

    return run


def broadcast_parameters(model: nn.Module, source_rank: int = 0) -> None:
    """Copy the source rank's parameters and buffers to every rank (before sharding).

    ``fully_shard`` keeps each rank's own slice of its local tensor, so ranks must agree first
    (a critic's randomly initialised head differs per rank otherwise). DDP does this itself.
    """
    with torch.no_grad():
        for tensor in [*model.parameters(), *model.buffers()]:
            dist.broadcast(tensor.data, src=source_rank)


def shard_model(model: nn.Module, device: torch.device, compute_dtype: torch.dtype | None) -> nn.Module:
    """``fully_shard`` every decoder layer, then the root (embeddings, final norm, head)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    policy = (
        MixedPrecisionPolicy(param_dtype=compute_dtype, reduce_dtype=torch.float32)
        if compute_dtype is not None
        else MixedPrecisionPolicy()
    )
    layers = decoder_layers(model)
    for layer in layers:
        fully_shard(layer, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    logger.info(
        "fully_shard over %d ranks: %d layers, compute dtype %s",
        dist.get_world_size(),
        len(layers),
        compute_dtype,
    )
    return model


def clip_grad_norm(parameters: list[nn.Parameter], max_norm: float) -> torch.Tensor:
    """Global gradient norm (over every rank's shards for DTensors), then clip to ``max_norm``.

    Returns the pre-clip norm as a plain tensor, identical on every rank.
    """
    from torch.distributed.tensor import DTensor

    grads = [p.grad for p in parameters if p.grad is not None]
    total = torch.nn.utils.get_total_norm(grads)
    if isinstance(total, DTensor):
        total = total.full_tensor()  # the partial norms of the shards, reduced across ranks
    torch.nn.utils.clip_grads_with_norm_(parameters, max_norm, total)
    return total


def named_state(model: nn.Module) -> list[tuple[str, torch.Tensor]]:
    """Parameters (tied ones once, under their first name) and persistent buffers, in a fixed order."""
    return model_tensors(model)


def cast_spec(tensor: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    """A meta tensor of ``tensor``'s global shape in the dtype it is published in (floating point cast to ``dtype``)."""
    target = dtype if dtype is not None and tensor.is_floating_point() else tensor.dtype
    return torch.empty(tuple(tensor.shape), dtype=target, device="meta")


def full_parameters(
    model: nn.Module, dtype: torch.dtype | None = None, names: set[str] | None = None
) -> Iterator[tuple[str, torch.Tensor]]:
    """Each full tensor of the model on the CPU, one at a time (every rank must iterate in step).

    A sharded parameter is all-gathered (``full_tensor``, a collective) and moved to the CPU;
    the caller should drop it before asking for the next, so at most one full tensor exists
    beside the shards. ``dtype`` casts the floating-point tensors (integer buffers keep theirs). Unsharded models yield their tensors without communication. ``names``
    restricts it to those tensors (every rank must pass the same set).
    """
    from torch.distributed.tensor import DTensor

    for name, tensor in named_state(model):
        if names is not None and name not in names:
            continue
        with torch.no_grad():
            full = tensor.full_tensor() if isinstance(tensor, DTensor) else tensor.detach()
            if dtype is not None and full.is_floating_point():
                full = full.to(dtype)
            yield name, full.cpu()
