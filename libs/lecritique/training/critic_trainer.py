"""The discriminative critic's trainer: token-level value regression / classification.

The critic is the policy backbone plus a scalar head (:mod:`lecritique.models.critic`). It
reads ``[critic context][prompt][trajectory tokens]`` and predicts V(h_t), the value of the
state before trajectory token t, for every token. Trained tokens: the policy tokens only
(``policy_mask``), the states at which the policy acts and whose values feed its advantages;
environment-observation tokens of multi-turn episodes are inputs but not targets.

Targets default to Monte-Carlo returns (the trajectory's reward on every policy token, Le
Critique B.4); explicit per-token targets (e.g. ``GAEEstimator.value_targets``) may be passed.
Loss ``bce`` (binary rewards; the head outputs a logit and the value is its sigmoid, Table 2's
choice) or ``mse`` (the head outputs the value), normalised over the batch's trained tokens.

>>> critic = CriticTrainer.from_policy("runs/policy/v0", CriticTrainerConfig())
>>> metrics = critic.train_step(trajectories)      # loss, explained variance (pre-update)
>>> values = critic.predict(trajectories)           # per-token V(h_t), for the value evaluator
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from transformers import PreTrainedModel

from lecritique.advantages import explained_variance
from lecritique.advantages.losses import value_loss
from lecritique.models.critic import (
    CriticShapeError,
    critic_from_policy,
    critic_or_backbone,
    is_saved_critic,
    load_critic,
    same_tokenizer,
    shaped_critic,
)
from lecritique.models.dtypes import torch_dtype
from lecritique.training.collate import (
    CriticBatch,
    collate_critic,
    critic_length,
    padding_counts,
)
from lecritique.training.config import CriticTrainerConfig
from lecritique.training.distributed import all_reduce_sum, current_context, shard_indices
from lecritique.training.engine import HFTrainer, ParallelSettings
from lecritique.training.packing import remap
from lecritique.training.validation import describe_row, validate_critic_trajectories
from lecritique.trajectory import Trajectory

logger = logging.getLogger(__name__)

Targets = Sequence[np.ndarray] | np.ndarray | torch.Tensor | None

TRAIN_BUDGET = "critic.micro_batch_tokens"
PREDICT_BUDGET = "critic.predict_batch_tokens"


class CriticTrainer(HFTrainer):
    """Trains and queries a critic model; data-parallel like the policy trainer."""

    role = "critic"

    def __init__(
        self,
        model: PreTrainedModel,
        config: CriticTrainerConfig | None = None,
        tokenizer_source: str | Path | None = None,
        *,
        fresh_head: bool = False,
    ) -> None:
        self.config = config or CriticTrainerConfig()
        if getattr(model.config, "num_labels", None) != 1:
            raise ValueError(
                f"critic model must have one label (a scalar head), got {model.config.num_labels}"
            )
        nn.Module.to(model, torch_dtype(self.config.dtype))  # in place
        source = Path(tokenizer_source) if tokenizer_source is not None else None
        # ``head_init: mean_return`` applies to a head this trainer created, never to a saved one.
        self._head_pending = fresh_head and self.config.head_init == "mean_return"
        if self._head_pending:
            _set_head(model, 0.0)
        self._start(
            model,
            self.config.optimizer,
            self.config.device,
            source,
            ParallelSettings.of(self.config),
            pack_rows=self.config.packing,
        )

    @classmethod
    def from_policy(cls, policy_dir: str | Path, config: CriticTrainerConfig | None = None) -> CriticTrainer:
        """Backbone copied from the policy, head freshly initialised (Le Critique B.3)."""
        config = config or CriticTrainerConfig()
        model = critic_from_policy(policy_dir, dtype=torch_dtype(config.dtype))
        return cls(model, config, tokenizer_source=policy_dir, fresh_head=True)

    @classmethod
    def load(cls, critic_dir: str | Path, config: CriticTrainerConfig | None = None) -> CriticTrainer:
        """Resume from a critic saved with :meth:`save`."""
        config = config or CriticTrainerConfig()
        return cls(
            load_critic(critic_dir, dtype=torch_dtype(config.dtype)), config, tokenizer_source=critic_dir
        )

    @classmethod
    def from_model_path(
        cls, path: str | Path, policy_dir: str | Path, config: CriticTrainerConfig
    ) -> CriticTrainer:
        """``critic.model_path``: a saved critic, or any model's backbone with a fresh head; its
        tokenizer must be the policy's (the critic reads the policy's token ids)."""
        differs = same_tokenizer(path, policy_dir)
        if differs is not None:
            raise CriticShapeError(f"critic.model_path: {path} cannot read the policy's tokens: {differs}")
        return cls(
            critic_or_backbone(path, torch_dtype(config.dtype)),
            config,
            tokenizer_source=path,
            fresh_head=not is_saved_critic(path),
        )

    @classmethod
    def shaped(
        cls,
        policy_dir: str | Path,
        config: CriticTrainerConfig,
        *,
        layers: int | None,
        hidden: int | None,
        init: str,
        seed: int,
    ) -> CriticTrainer:
        """A critic of its own shape (``critic.tiny``), started from the policy or fresh (``critic.init``)."""
        model = shaped_critic(
            policy_dir, layers=layers, hidden=hidden, init=init, seed=seed, dtype=torch_dtype(config.dtype)
        )
        return cls(model, config, tokenizer_source=policy_dir, fresh_head=True)

    def _values_from_outputs(self, outputs: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(outputs) if self.config.loss == "bce" else outputs

    def _state_outputs(self, module: nn.Module, batch: CriticBatch) -> torch.Tensor:
        """Head output at V(h_t)'s position for every trajectory token: [B, T]."""
        logits: torch.Tensor = module(**batch.model_inputs(self.packed_attention, self.mask_dtype())).logits
        return batch.state_outputs(logits[..., 0]).float()

    def _micro_batches(
        self, trajectories: Sequence[Trajectory], targets: Any, shard: Sequence[int]
    ) -> list[CriticBatch]:
        lengths = [critic_length(trajectories[i]) for i in shard]
        names = [describe_row(i, trajectories[i]) for i in shard]
        return [
            collate_critic(trajectories, targets, layout=remap(layout, shard)).to(self.engine.device)
            for layout in self.layouts(lengths, self.config.micro_batch_tokens, TRAIN_BUDGET, names)
        ]

    def train_step(self, trajectories: Sequence[Trajectory], targets: Targets = None) -> dict[str, float]:
        """One AdamW step on the batch's policy tokens.

        Metrics: ``loss``, ``explained_variance`` and ``value_mean`` of the *pre-update*
        predictions against the targets (the returns by default), ``grad_norm``, ``tokens``.
        """
        started = time.perf_counter()
        validate_critic_trajectories(trajectories, self.vocab_size)
        targets = _as_rows(targets, len(trajectories))
        self._start_pending_head(trajectories, targets)
        lengths = [critic_length(t) for t in trajectories]
        names = [describe_row(i, t) for i, t in enumerate(trajectories)]
        self.check_budget(lengths, self.config.micro_batch_tokens, TRAIN_BUDGET, names)
        shard = shard_indices(lengths, self.context.world_size)[self.context.rank]
        micro_batches = self._micro_batches(trajectories, targets, shard)
        global_trained = sum(t.num_policy_tokens for t in trajectories)
        if global_trained == 0:
            raise ValueError("the batch has no policy tokens to train the critic on")
        device = self.engine.device
        loss_sum = torch.zeros((), dtype=torch.float64, device=device)
        predictions: list[np.ndarray] = []
        returns: list[np.ndarray] = []

        def compute_loss(module: nn.Module, batch: CriticBatch) -> torch.Tensor:
            nonlocal loss_sum
            outputs = self._state_outputs(module, batch)
            trained = batch.num_target_tokens
            if trained == 0:
                # Keep the graph (DDP expects every rank to backward) but contribute nothing.
                loss = outputs.sum() * 0.0
            else:
                # value_loss averages over this micro-batch's tokens; re-weight to the global count.
                loss = value_loss(self.config.loss, outputs, batch.targets, batch.target_mask) * (
                    trained / global_trained
                )
            loss_sum = loss_sum + loss.detach().to(torch.float64)
            selected = batch.target_mask
            predictions.append(self._values_from_outputs(outputs.detach())[selected].cpu().numpy())
            returns.append(batch.targets[selected].cpu().numpy())
            return loss

        grad_norm = self.engine.step(micro_batches, compute_loss)
        summed = all_reduce_sum(
            torch.cat([loss_sum.reshape(1), padding_counts(micro_batches).to(device)])
        ).cpu()
        loss = float(summed[0])
        values, targets_flat = _gather_pairs(np.concatenate(predictions), np.concatenate(returns))
        return {
            "loss": loss,
            "explained_variance": explained_variance(values, targets_flat),
            "value_mean": float(values.mean()),
            "target_mean": float(targets_flat.mean()),
            "grad_norm": grad_norm,
            "tokens": float(sum(lengths)),
            "trained_tokens": float(global_trained),
            "padding_fraction": 1.0 - float(summed[1]) / float(summed[2]),
            "step": float(self.engine.steps),
            "step_seconds": time.perf_counter() - started,
        }

    def predict(self, trajectories: Sequence[Trajectory]) -> list[np.ndarray]:
        """V(h_t) for every trajectory token (float32 [T_i] each; sigmoid of the head for bce).

        Local to this process (no collective calls), so any single rank may serve predictions;
        under FSDP2 every forward gathers parameters, so every rank must call it with the same batch.
        """
        validate_critic_trajectories(trajectories, self.vocab_size)
        results: list[np.ndarray] = [np.zeros(0, dtype=np.float32)] * len(trajectories)
        lengths = [critic_length(t) for t in trajectories]
        names = [describe_row(i, t) for i, t in enumerate(trajectories)]
        layouts = self.layouts(lengths, self.config.predict_batch_tokens, PREDICT_BUDGET, names)
        # FSDP2 reuses its all-gather buffers in training, and inference-mode tensors cannot be
        # saved for backward later: a sharded model predicts under no_grad instead.
        no_graph = torch.no_grad() if self.engine.sharded else torch.inference_mode()
        with no_graph, self._predict_autocast(), self.engine.attention():
            for layout in layouts:
                batch = collate_critic(trajectories, layout=layout).to(self.engine.device)
                outputs = self._state_outputs(self.engine.model, batch)
                values = self._values_from_outputs(outputs).cpu().numpy()
                for number, index in enumerate(layout.rows):
                    results[index] = values[number, : trajectories[index].token_ids.shape[0]].astype(
                        np.float32
                    )
        return results

    def _start_pending_head(self, trajectories: Sequence[Trajectory], targets: Any) -> None:
        """``head_init: mean_return``: start a fresh head at the first batch's mean return, once."""
        if self._head_pending:
            # A resumed checkpoint has made updates already: its head is trained, not fresh.
            if self.engine.steps == 0:
                self._start_head_at(_mean_target(trajectories, targets))
            self._head_pending = False

    def _start_head_at(self, mean_return: float) -> None:
        """``head_init: mean_return``: the head's bias at the batch's mean return (its logit for bce)."""
        if self.config.loss == "bce":
            clipped = min(max(mean_return, HEAD_INIT_CLIP), 1.0 - HEAD_INIT_CLIP)
            bias = float(np.log(clipped / (1.0 - clipped)))
        else:
            bias = mean_return
        _set_head(self.model, bias)
        logger.info(
            "critic head started at the first batch's mean return %.4f (bias %.4f)", mean_return, bias
        )

    def _predict_autocast(self) -> contextlib.AbstractContextManager[Any]:
        """bf16 on CUDA for the forward-only path unless mixed precision is ``off``; the training autocast elsewhere."""
        device = self.engine.device
        if (
            device.type == "cuda"
            and self.config.mixed_precision != "off"
            and not self.engine.sharded
            and torch.cuda.is_bf16_supported()
        ):
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return self.engine.autocast()


HEAD_INIT_CLIP = 1e-3
"""``head_init: mean_return`` with ``bce`` clips the mean return to [clip, 1 - clip] before its logit
(a batch of all-0 or all-1 returns would otherwise start the head at an infinite bias)."""


def _set_head(model: nn.Module, bias: float) -> None:
    """Zero the scalar head's weights and set its bias (``head_init: mean_return``)."""
    head = getattr(model, "score", None)
    if not isinstance(head, nn.Linear) or head.bias is None:
        raise ValueError(
            "critic.head_init: 'mean_return' needs a linear head with a bias (the model's `score`); "
            f"{type(model).__name__} has {type(head).__name__}"
        )
    with torch.no_grad():
        head.weight.zero_()
        head.bias.fill_(bias)


def _mean_target(trajectories: Sequence[Trajectory], targets: Any) -> float:
    """The batch's mean target over its trained (policy) tokens, as the loss weighs them."""
    total, count = 0.0, 0
    for index, trajectory in enumerate(trajectories):
        mask = trajectory.policy_mask
        row = np.full(mask.shape[0], trajectory.reward) if targets is None else np.asarray(targets[index])
        total += float(np.asarray(row, dtype=np.float64)[mask].sum())
        count += int(mask.sum())
    return total / max(count, 1)


def _as_rows(targets: Targets, batch_size: int) -> Any:
    if targets is None:
        return None
    if isinstance(targets, torch.Tensor):
        targets = targets.detach().cpu().numpy()
    if len(targets) != batch_size:
        raise ValueError(f"targets has {len(targets)} rows for {batch_size} trajectories")
    return targets


def _gather_pairs(values: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every rank's (prediction, target) pairs, concatenated in rank order."""
    context = current_context()
    if not context.enabled:
        return values, targets
    gathered: list[Any] = [None] * context.world_size
    torch.distributed.all_gather_object(gathered, (values, targets))
    return (
        np.concatenate([pair[0] for pair in gathered]),
        np.concatenate([pair[1] for pair in gathered]),
    )
