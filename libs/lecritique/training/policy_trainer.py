"""The policy trainer: one token-normalised policy-gradient step per batch of trajectories.

>>> trainer = PolicyTrainer("runs/policy/v0", PolicyTrainerConfig())
>>> metrics = trainer.train_step(trajectories)   # one AdamW step on the whole batch
>>> trainer.save("runs/policy/v1")               # HF directory (rank 0 only)

Under ``torchrun`` (process group initialised, e.g. by
:func:`lecritique.training.distributed.init_distributed_from_env`), every rank calls
``train_step`` with the same full batch; each rank trains on its token-balanced shard, DDP
averages the gradients, and the result equals a single-process step on the whole batch.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from transformers import AutoModelForCausalLM

from lecritique.models.dtypes import torch_dtype
from lecritique.training.collate import (
    PolicyBatch,
    collate_policy,
    padding_counts,
    policy_length,
    row_columns,
    token_logprobs,
)
from lecritique.training.config import PolicyTrainerConfig
from lecritique.training.distillation import Distiller, collate_gates, lvopd_gates
from lecritique.training.distributed import all_reduce_sum, shard_indices
from lecritique.training.engine import HFTrainer, ParallelSettings
from lecritique.training.packing import remap
from lecritique.training.policy_loss import LossStatistics, policy_loss
from lecritique.training.validation import describe_row, validate_policy_trajectories
from lecritique.trajectory import Trajectory

logger = logging.getLogger(__name__)

BUDGET_NAME = "policy_trainer.micro_batch_tokens"


class PolicyTrainer(HFTrainer):
    """A HF causal LM trained with :mod:`lecritique.training.policy_loss`."""

    role = "policy"

    def __init__(
        self, model_dir: str | Path, config: PolicyTrainerConfig | None = None, budget_name: str = BUDGET_NAME
    ) -> None:
        self.config = config or PolicyTrainerConfig()
        self.budget_name = budget_name
        """How errors name ``micro_batch_tokens`` (the spec field it comes from)."""
        self.model_dir = Path(model_dir)
        if not (self.model_dir / "config.json").is_file():
            raise ValueError(f"policy model directory {self.model_dir} has no config.json")
        model = AutoModelForCausalLM.from_pretrained(
            str(self.model_dir), dtype=torch_dtype(self.config.dtype)
        )
        self._start(
            model,
            self.config.optimizer,
            self.config.device,
            self.model_dir,
            ParallelSettings.of(self.config),
            pack_rows=self.config.packing,
        )
        distillation = self.config.distillation
        self.distiller = (
            Distiller(distillation, self.engine.device, self.vocab_size) if distillation else None
        )
        logger.info(
            "policy trainer: %s on %s, rank %d of %d, loss %s",
            self.model_dir,
            self.engine.device,
            self.context.rank,
            self.context.world_size,
            self.config.loss.kind,
        )

    def _micro_batches(
        self, trajectories: Sequence[Trajectory]
    ) -> list[tuple[PolicyBatch, torch.Tensor | None]]:
        """This rank's micro-batches, each with its distillation gate ([B, L - 1]; None without LVOPD)."""
        lengths = [policy_length(t) for t in trajectories]
        names = [describe_row(i, t) for i, t in enumerate(trajectories)]
        self.check_budget(lengths, self.config.micro_batch_tokens, self.budget_name, names)
        shard = shard_indices(lengths, self.context.world_size)[self.context.rank]
        layouts = self.layouts(
            [lengths[i] for i in shard],
            self.config.micro_batch_tokens,
            self.budget_name,
            [names[i] for i in shard],
        )
        # Gates need whole groups (the LVRL anchor is the group's success rate): computed before sharding.
        gates = lvopd_gates(trajectories, self.distiller.config) if self.distiller is not None else None
        batches = []
        for local in layouts:
            layout = remap(local, shard)
            gate = None if gates is None else collate_gates(trajectories, gates, layout)
            batches.append((collate_policy(trajectories, layout=layout), gate))
        return batches

    def logprobs(self, module: nn.Module, batch: PolicyBatch) -> torch.Tensor:
        """Next-token log-probabilities [B, L - 1] of ``batch.target_ids`` under ``module``."""
        logits = module(**batch.model_inputs(self.packed_attention, self.mask_dtype())).logits
        return token_logprobs(logits, batch.target_ids, batch.temperatures)

    def token_logprobs(self, trajectories: Sequence[Trajectory]) -> list[np.ndarray]:
        """log pi(token_t | prefix) of every trajectory token under the current weights (float32 [T_i] each).

        Forward only, laid out as training is (packed or padded, ``micro_batch_tokens`` per
        forward), at each row's recorded temperature. Local to this process unless sharded
        (under FSDP2 every rank must call it with the same batch).
        """
        validate_policy_trajectories(trajectories, self.vocab_size)
        lengths = [policy_length(t) for t in trajectories]
        names = [describe_row(i, t) for i, t in enumerate(trajectories)]
        results: list[np.ndarray] = [np.zeros(0, dtype=np.float32)] * len(trajectories)
        no_graph = torch.no_grad() if self.engine.sharded else torch.inference_mode()
        with no_graph, self.engine.autocast(), self.engine.attention():
            for layout in self.layouts(lengths, self.config.micro_batch_tokens, self.budget_name, names):
                batch = collate_policy(trajectories, layout=layout).to(self.engine.device)
                values = self.logprobs(self.engine.model, batch).float().cpu().numpy()
                for row in layout.rows:
                    line, columns = row_columns(layout, row, trajectories[row])
                    results[row] = values[line, columns].astype(np.float32)
        return results

    def train_step(self, trajectories: Sequence[Trajectory]) -> dict[str, float]:
        """One optimiser step on the whole batch; metrics are global (identical on every rank but ``step_seconds``).

        Every trajectory needs ``advantages``; ``logprobs`` are the rollout engine's.
        """
        started = time.perf_counter()
        validate_policy_trajectories(trajectories, self.vocab_size)
        global_policy_tokens = sum(t.num_policy_tokens for t in trajectories)
        global_tokens = sum(policy_length(t) for t in trajectories)
        micro_batches = [
            (batch.to(self.engine.device), gate) for batch, gate in self._micro_batches(trajectories)
        ]
        device = self.engine.device
        totals = LossStatistics.zeros(device)
        loss_sum = torch.zeros((), dtype=torch.float64, device=device)
        distill_sums = torch.zeros(2, dtype=torch.float64, device=device)

        def compute_loss(module: nn.Module, micro: tuple[PolicyBatch, torch.Tensor | None]) -> torch.Tensor:
            nonlocal totals, loss_sum, distill_sums
            batch, gate = micro
            inputs = batch.model_inputs(self.packed_attention, self.mask_dtype())
            logits = module(**inputs).logits
            logprobs = token_logprobs(logits, batch.target_ids, batch.temperatures)
            loss, statistics = policy_loss(
                logprobs,
                batch.old_logprobs,
                batch.advantages,
                batch.loss_mask,
                self.config.loss,
                num_tokens=global_policy_tokens,
            )
            totals = totals + statistics
            if self.distiller is not None and gate is not None:
                distill, sums = self.distiller.loss(logits, inputs, gate, global_policy_tokens)
                distill_sums = distill_sums + sums
                loss = self.distiller.config.pg_coef * loss + distill
            loss_sum = loss_sum + loss.detach().to(torch.float64)
            return loss

        grad_norm = self.engine.step(micro_batches, compute_loss)
        padding = padding_counts([batch for batch, _ in micro_batches]).to(device)
        summed = all_reduce_sum(
            torch.cat([loss_sum.reshape(1), distill_sums, totals.as_tensor(), padding])
        ).cpu()
        metrics: dict[str, Any] = {
            "loss": float(summed[0]),
            **LossStatistics.from_tensor(summed[3:-2]).as_metrics(),
            "grad_norm": grad_norm,
            "tokens": float(global_tokens),
            "padding_fraction": 1.0 - float(summed[-2]) / float(summed[-1]),
            "step": float(self.engine.steps),
            "lr": float(self.engine.optimizer.param_groups[0]["lr"]),
            "step_seconds": time.perf_counter() - started,
        }
        if self.distiller is not None:
            gated = float(summed[1])
            metrics["distill_gated_fraction"] = gated / max(global_policy_tokens, 1)
            metrics["distill_kl"] = float(summed[2]) / gated if gated else 0.0
        return metrics
