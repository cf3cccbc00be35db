"""What the policy and critic trainers share: the optimiser, data parallelism, one step.

Data parallelism is DDP rather than FSDP2: the models this project trains on CPU (and the 4B
policies of the paper on H200s) fit on one device, DDP is well supported with gloo on CPU, and
publishing HF directories every step needs the full weights on rank 0 anyway, which DDP keeps
without a gather. The wrapping lives only in :class:`TrainingEngine`, so ``fully_shard`` can
replace it when a model stops fitting on one device.

Gradient scale: each micro-batch loss is already normalised by the *global* token count, so the
gradient of the full-batch loss is the *sum* of the ranks' gradients. DDP averages, so the
engine multiplies every loss by the world size before ``backward``: 1 and N processes then
apply the same gradient.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import ClassVar, TypeVar

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from transformers import PreTrainedModel

from lecritique.training.config import OptimizerConfig
from lecritique.training.distributed import DistributedContext, current_context, default_device
from lecritique.weights import WeightStore

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


TRAINER_STATE = "trainer_state.pt"
"""File next to published weights holding the AdamW state and the step count."""


def read_tokenizer_files(source_dir: Path) -> dict[str, bytes]:
    """The tokenizer files of a HF directory, read into memory."""
    return {name: (source_dir / name).read_bytes() for name in _TOKENIZER_FILES if (source_dir / name).is_file()}


class TrainingEngine:
    """A model, its AdamW optimiser and (when distributed) its DDP wrapper."""

    def __init__(
        self,
        model: PreTrainedModel,
        optimizer: OptimizerConfig,
        context: DistributedContext,
        device: torch.device,
    ) -> None:
        nn.Module.to(model, device)  # in place; PreTrainedModel.to's decorator hides its signature
        # Trained in eval mode: no dropout (HF token-classification heads default to 0.1), so the
        # network that is trained is the deterministic one that sampled the rollout logprobs and
        # serves the values. Gradients flow the same in either mode.
        model.train(False)
        self.model: PreTrainedModel = model
        self.context = context
        self.device = device
        self.grad_clip = optimizer.grad_clip
        if context.enabled:
            # DDP broadcasts rank 0's parameters, so every rank starts from identical weights.
            device_ids = [device.index] if device.type == "cuda" else None
            self.forward_module: nn.Module = DistributedDataParallel(self.model, device_ids=device_ids)
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

    def step(self, micro_batches: Sequence[Micro], compute_loss: Callable[[nn.Module, Micro], torch.Tensor]) -> float:
        """Accumulate gradients over ``micro_batches``, clip, take one optimiser step.

        ``compute_loss(module, micro_batch)`` returns that micro-batch's share of the global
        loss (normalised by the global token count). Returns the pre-clip gradient norm.
        """
        if not micro_batches:
            raise ValueError("a training step needs at least one micro-batch on every rank")
        self.optimizer.zero_grad(set_to_none=True)
        for index, micro_batch in enumerate(micro_batches):
            with self._sync_context(index == len(micro_batches) - 1):
                loss = compute_loss(self.forward_module, micro_batch)
                scaled: torch.Tensor = loss * self.context.world_size
                scaled.backward()  # type: ignore[no-untyped-call]
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)
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

    def _start(
        self, model: PreTrainedModel, optimizer: OptimizerConfig, device: str | None, tokenizer_source: Path | None
    ) -> None:
        self.context = current_context()
        self.tokenizer_source = tokenizer_source
        # Read once: the source may be a published version that the weight store prunes later.
        self._tokenizer_files = read_tokenizer_files(tokenizer_source) if tokenizer_source is not None else {}
        self.vocab_size = int(model.config.vocab_size)
        chosen = torch.device(device) if device else default_device(self.context)
        self.engine = TrainingEngine(model, optimizer, self.context, chosen)

    @property
    def model(self) -> PreTrainedModel:
        """The unwrapped model (identical on every rank)."""
        return self.engine.model

    @property
    def steps(self) -> int:
        """Optimiser steps taken."""
        return self.engine.steps

    def save(self, directory: str | Path) -> Path | None:
        """Write a HF directory (``save_pretrained`` + tokenizer files) and the optimiser state
        (:data:`TRAINER_STATE`); rank 0 only, else None."""
        if not self.context.is_main:
            return None
        target = Path(directory)
        target.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(target)
        for name, data in self._tokenizer_files.items():
            (target / name).write_bytes(data)
        torch.save({"optimizer": self.engine.optimizer.state_dict(), "steps": self.engine.steps}, target / TRAINER_STATE)
        return target

    def resume(self, directory: str | Path) -> bool:
        """Continue from the optimiser state saved with ``directory``'s weights (a restarted trainer
        then takes exactly the steps it would have taken); False when there is none (a base model)."""
        path = Path(directory) / TRAINER_STATE
        if not path.is_file():
            return False
        state = torch.load(path, map_location=self.engine.device, weights_only=True)
        self.engine.optimizer.load_state_dict(state["optimizer"])
        self.engine.steps = int(state["steps"])
        return True

    def publish(self, store: WeightStore, role: str | None = None, keep_last: int | None = None) -> int | None:
        """Publish the current weights as the next version of ``role`` (default: the trainer's).

        Rank 0 writes and returns the new version; other ranks return None. No collective call,
        so it may be called on rank 0 alone (e.g. from ``run_policy_worker``'s ``on_step``).
        """
        if not self.context.is_main:
            return None
        return store.publish(role or self.role, self.save, keep_last=keep_last)
