"""What the policy and critic trainers share: the optimiser, data parallelism, one step.

Data parallelism under ``torchrun`` is ``ddp`` (a full replica per rank; DDP averages the
gradients) or ``fsdp2`` (``fully_shard`` per decoder layer, :mod:`lecritique.training.fsdp`:
parameters, gradients and AdamW state sharded across ranks). In a single process without a
process group the model is trained as is, whatever the setting.

Gradient scale: each micro-batch loss is already normalised by the *global* token count, so the
gradient of the full-batch loss is the *sum* of the ranks' gradients. DDP and FSDP2 both average
over ranks, so the engine multiplies every loss by the world size before ``backward``: 1 and N
processes then apply the same gradient.

Micro-batches: under DDP a rank accumulates its micro-batches without communication (``no_sync``)
and ranks may run different numbers of them. Under FSDP2 every forward and backward is a
collective (all-gather, reduce-scatter), so ranks agree on the largest count and the ones with
fewer run zero-weighted forward/backward passes to stay in step.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from transformers import PreTrainedModel

from lecritique.training import fsdp, kernels, packing
from lecritique.training.collate import split_by_token_budget
from lecritique.training.config import OptimizerConfig
from lecritique.training.distributed import DistributedContext, current_context, default_device
from lecritique.weights import WeightStore
from lecritique.weights.safetensors_stream import layout_of, write_safetensors_stream

logger = logging.getLogger(__name__)

Micro = TypeVar("Micro")

# Files that make up a tokenizer saved next to HF weights; copied verbatim on save.
_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "tokenizer.model",
    "vocab.json",
    "merges.txt",
    "added_tokens.json",
    "chat_template.jinja",
)


def read_tokenizer_files(source_dir: Path) -> dict[str, bytes]:
    """The tokenizer files of a HF directory, read into memory."""
    return {
        name: (source_dir / name).read_bytes() for name in _TOKENIZER_FILES if (source_dir / name).is_file()
    }


@dataclass(frozen=True)
class ParallelSettings:
    """How a trainer's model is spread over ranks and at what precision it computes."""

    parallelism: Literal["ddp", "fsdp2"] = "ddp"
    """``ddp`` or ``fsdp2`` (see the module docstring)."""
    mixed_precision: Literal["auto", "bf16", "off"] = "auto"
    """Compute dtype: ``bf16`` (float32 master weights and gradient reduction), ``auto`` (bf16 on GPUs)."""
    activation_checkpointing: bool = False
    """Recompute each decoder layer's activations in the backward pass."""
    attention_backend: str = "auto"
    """SDPA kernels (:func:`lecritique.training.kernels.sdpa_backends`)."""
    deterministic: bool = False
    """Deterministic kernels (:func:`lecritique.training.kernels.apply_determinism`)."""

    @classmethod
    def of(cls, config: Any) -> ParallelSettings:
        """The settings of a trainer config (fields of the same names; defaults where absent)."""
        names = (
            "parallelism",
            "mixed_precision",
            "activation_checkpointing",
            "attention_backend",
            "deterministic",
        )
        return cls(**{name: getattr(config, name) for name in names if hasattr(config, name)})


class TrainingEngine:
    """A model, its AdamW optimiser and (when distributed) its DDP wrapper or FSDP2 sharding."""

    def __init__(
        self,
        model: PreTrainedModel,
        optimizer: OptimizerConfig,
        context: DistributedContext,
        device: torch.device,
        parallel: ParallelSettings | None = None,
    ) -> None:
        parallel = parallel or ParallelSettings()
        nn.Module.to(model, device)  # in place; PreTrainedModel.to's decorator hides its signature
        # Trained in eval mode: no dropout (HF token-classification heads default to 0.1), so the
        # network that is trained is the deterministic one that sampled the rollout logprobs and
        # serves the values. Gradients flow the same in either mode.
        model.train(False)
        self.model: PreTrainedModel = model
        self.context = context
        self.device = device
        self.grad_clip = optimizer.grad_clip
        self.parallel = parallel
        self.compute_dtype = fsdp.mixed_precision_dtype(parallel.mixed_precision, device)
        if parallel.deterministic:
            kernels.apply_determinism()
        attention_dtype = self.compute_dtype or next(model.parameters()).dtype
        self.attention_backends = kernels.sdpa_backends(
            parallel.attention_backend, device.type, attention_dtype, parallel.deterministic
        )
        self.attention_line = kernels.log_attention(
            type(model).__name__, parallel.attention_backend, self.attention_backends, device, attention_dtype
        )
        if parallel.activation_checkpointing:
            fsdp.apply_activation_checkpointing(model)
        # FSDP2 whenever a process group exists (also world size 1 under torchrun); DDP only for >1 rank.
        self.sharded = parallel.parallelism == "fsdp2" and dist.is_available() and dist.is_initialized()
        if self.sharded:
            fsdp.broadcast_parameters(model)
            fsdp.shard_model(model, device, self.compute_dtype)
            self.forward_module: nn.Module = model
        elif context.enabled:
            # DDP broadcasts rank 0's parameters, so every rank starts from identical weights.
            device_ids = [device.index] if device.type == "cuda" else None
            self.forward_module = DistributedDataParallel(self.model, device_ids=device_ids)
        else:
            self.forward_module = self.model
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(),
            lr=optimizer.lr,
            betas=optimizer.betas,
            weight_decay=optimizer.weight_decay,
            eps=optimizer.eps,
        )
        self.steps = 0

    def _sync_context(self, is_last: bool) -> contextlib.AbstractContextManager[None]:
        if isinstance(self.forward_module, DistributedDataParallel) and not is_last:
            return self.forward_module.no_sync()
        return contextlib.nullcontext()

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        """bf16 autocast for unsharded models under mixed precision (FSDP2 casts parameters itself)."""
        if self.compute_dtype is None or self.sharded:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.compute_dtype)

    def attention(self) -> contextlib.AbstractContextManager[None]:
        """The chosen SDPA kernels, for a forward and its backward."""
        return kernels.attention_kernels(self.attention_backends)

    def _padding_loss(self, module: nn.Module) -> torch.Tensor:
        """A zero loss through a one-token forward: keeps an FSDP2 rank in step with busier ranks."""
        ids = torch.zeros((1, 1), dtype=torch.long, device=self.device)
        logits: torch.Tensor = module(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
        return logits.float().sum() * 0.0

    def _micro_batch_count(self, local: int) -> int:
        if not self.sharded or not self.context.enabled:
            return local
        count = torch.tensor([local], dtype=torch.long, device=self.device)
        dist.all_reduce(count, op=dist.ReduceOp.MAX)
        return int(count.item())

    def step(
        self, micro_batches: Sequence[Micro], compute_loss: Callable[[nn.Module, Micro], torch.Tensor]
    ) -> float:
        """Accumulate gradients over ``micro_batches``, clip, take one optimiser step.

        ``compute_loss(module, micro_batch)`` returns that micro-batch's share of the global
        loss (normalised by the global token count). Returns the pre-clip gradient norm.
        """
        if not micro_batches:
            raise ValueError("a training step needs at least one micro-batch on every rank")
        self.optimizer.zero_grad(set_to_none=True)
        count = self._micro_batch_count(len(micro_batches))
        for index in range(count):
            with self._sync_context(index == count - 1), self.autocast(), self.attention():
                if index < len(micro_batches):
                    loss = compute_loss(self.forward_module, micro_batches[index])
                else:
                    loss = self._padding_loss(self.forward_module)
                scaled: torch.Tensor = loss * self.context.world_size
                scaled.backward()  # type: ignore[no-untyped-call]
        grad_norm = fsdp.clip_grad_norm(list(self.model.parameters()), self.grad_clip)
        if not torch.isfinite(grad_norm):
            # Skip the update rather than writing NaNs into the weights; the caller sees the norm.
            logger.warning("non-finite gradient norm %s at step %d: update skipped", grad_norm, self.steps)
            self.optimizer.zero_grad(set_to_none=True)
        else:
            self.optimizer.step()
        self.steps += 1
        return float(grad_norm)


class HFTrainer:
    """What the policy and critic trainers share: the engine, saving and publishing.

    Subclasses call :meth:`_start` from ``__init__`` and set ``role``.
    """

    role: ClassVar[str]
    """Weight-store role written by :meth:`publish` (``policy``, ``critic``)."""
    engine: TrainingEngine
    context: DistributedContext
    tokenizer_source: Path | None
    packed_attention: packing.PackedAttention | None
    """How packed rows are kept apart; None: micro-batches are padded (packing off, or impossible)."""
    layout_line: str
    """How micro-batches are laid out, as logged at start (:func:`lecritique.training.packing.describe`)."""

    def _start(
        self,
        model: PreTrainedModel,
        optimizer: OptimizerConfig,
        device: str | None,
        tokenizer_source: Path | None,
        parallel: ParallelSettings | None = None,
        pack_rows: bool = False,
    ) -> None:
        chosen = torch.device(device) if device else default_device(current_context())
        if pack_rows:
            compute = fsdp.mixed_precision_dtype((parallel or ParallelSettings()).mixed_precision, chosen)
            packing.use_varlen_where_available(model, chosen, compute)
        implementation = packing.model_attention(model)
        attention = packing.packed_attention(implementation)
        self.packed_attention = attention if pack_rows else None
        self.layout_line = packing.describe(attention, pack_rows, implementation)
        logger.info("%s trainer: %s", self.role, self.layout_line)
        self.context = current_context()
        self.tokenizer_source = tokenizer_source
        # Read once: the source may be a published version that the weight store prunes later.
        self._tokenizer_files = read_tokenizer_files(tokenizer_source) if tokenizer_source is not None else {}
        self.vocab_size = int(model.config.vocab_size)
        # fully_shard swaps the model's class for a generated FSDP subclass; HF configs name the original.
        self._architecture = type(model).__name__
        self.engine = TrainingEngine(model, optimizer, self.context, chosen, parallel)

    def layouts(
        self, lengths: Sequence[int], budget: int, budget_name: str, names: Sequence[str]
    ) -> list[packing.Layout]:
        """Micro-batches of rows ``lengths`` within ``budget`` tokens: packed when :attr:`packed_attention`
        is set, else right-padded groups, longest rows first."""
        if self.packed_attention is not None:
            return packing.pack(lengths, budget, self.packed_attention, budget_name, names)
        return [packing.padded_layout(group, lengths) for group in split_by_token_budget(lengths, budget)]

    def check_budget(
        self, lengths: Sequence[int], budget: int, budget_name: str, names: Sequence[str]
    ) -> None:
        """With packing, refuse a row longer than ``budget`` (:func:`lecritique.training.packing.check_budget`).

        Called on the whole batch, which every rank holds: all ranks refuse alike, before any collective.
        """
        if self.packed_attention is not None:
            packing.check_budget(lengths, budget, budget_name, names)

    def mask_dtype(self) -> torch.dtype:
        """The dtype of an additive (eager) packed mask: the compute dtype."""
        return self.engine.compute_dtype or next(self.model.parameters()).dtype

    @property
    def model(self) -> PreTrainedModel:
        """The model without its DDP wrapper (identical on every rank); under FSDP2 its parameters are DTensor shards."""
        return self.engine.model

    @property
    def steps(self) -> int:
        """Optimiser steps taken."""
        return self.engine.steps

    def save(self, directory: str | Path | None, dtype: torch.dtype | None = None) -> Path | None:
        """Write a HF directory (safetensors + config + tokenizer files) on rank 0; None elsewhere.

        Unsharded: rank 0 alone runs ``save_pretrained`` (no collective). FSDP2: every rank must
        call it; parameters are gathered one at a time and streamed into the files, so rank 0
        never holds more than its shards plus one full tensor (other ranks may pass None).
        Weights only: the training state (AdamW, step, RNG) is checkpointed by
        :mod:`lecritique.training.checkpoint`, sharded or not. ``dtype``: floating-point tensors
        written in that dtype (streamed, as under FSDP2), e.g. the rollout engine's bf16.
        """
        if self.engine.sharded or dtype is not None:
            if not self.engine.sharded and not self.context.is_main:
                return None
            return self._save_sharded(
                Path(directory) if self.context.is_main and directory is not None else None, dtype
            )
        if not self.context.is_main or directory is None:
            return None
        target = Path(directory)
        target.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(target)
        self._write_tokenizer(target)
        return target

    def _write_tokenizer(self, target: Path) -> None:
        for name, data in self._tokenizer_files.items():
            (target / name).write_bytes(data)

    def _save_sharded(self, target: Path | None, dtype: torch.dtype | None = None) -> Path | None:
        named = fsdp.named_state(self.model)
        layout = [layout_of(name, fsdp.cast_spec(tensor, dtype)) for name, tensor in named]
        del named
        stream = fsdp.full_parameters(self.model, dtype)
        if target is None:
            for _ in stream:  # take part in every gather, keep nothing
                pass
            return None
        write_safetensors_stream(target, layout, stream)
        self.model.config.architectures = [self._architecture]
        self.model.config.save_pretrained(target)
        if self.model.can_generate() and self.model.generation_config is not None:
            self.model.generation_config.save_pretrained(target)
        self._write_tokenizer(target)
        return target

    def publish(
        self,
        store: WeightStore,
        role: str | None = None,
        keep_last: int | None = None,
        version: int | None = None,
        dtype: torch.dtype | None = None,
    ) -> int | None:
        """Publish the current weights as the next version of ``role`` (default: the trainer's).

        Rank 0 writes and returns the new version (``version``, or the next number); other ranks
        return None. Unsharded, no
        collective is involved and rank 0 may call it alone; under FSDP2 every rank must call it.
        """
        if not self.context.is_main:
            if self.engine.sharded:
                self._save_sharded(None, dtype)
            return None
        return store.publish(
            role or self.role, lambda target: self.save(target, dtype), version=version, keep_last=keep_last
        )
