"""Offline critic training for value pretraining: epochs over cached rollouts, a held-out split by
task, stopping at a held-out explained-variance plateau, resumable from a checkpoint.

Each update is the value trainer's: :meth:`CriticTrainer.train_step` on a batch of the spec's
critic batch size, with :func:`~lecritique.advantages.targets.critic_targets` (Monte-Carlo
returns; for ``lambda_target < 1`` GAE lambda-returns over the values the critic predicts for the
batch just before the update, as the evaluator's stored values are in the live run). Explained
variance is measured against the returns on policy tokens, for the training and held-out sets.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lecritique.advantages import explained_variance
from lecritique.advantages.targets import critic_targets
from lecritique.training.checkpoint import TrainerCheckpoints
from lecritique.training.critic_trainer import CriticTrainer
from lecritique.trajectory import Trajectory


@dataclass
class TrainingState:
    """Where training stands; saved with every checkpoint."""

    fingerprint: str
    """The training data and settings it was trained on (a rerun on other data starts afresh)."""
    epoch: int = 0
    """Epochs finished."""
    history: list[dict[str, Any]] = field(default_factory=list)
    """Per epoch (0: before training): train and held-out EV, mean loss, updates so far."""
    best_ev: float = float("-inf")
    """Best held-out EV so far (the saved critic's)."""
    best_epoch: int = 0
    """The epoch of ``best_ev`` (0: the critic before training)."""
    plateau_ev: float = float("-inf")
    """Held-out EV at the last gain of ``min_delta`` (the plateau is measured from it)."""
    stale_epochs: int = 0
    """Epochs since the held-out EV last rose by ``min_delta``."""
    stopped: str | None = None
    """``plateau`` or ``max_epochs`` once training has stopped (None: it goes on)."""


@dataclass(frozen=True)
class Schedule:
    """How long training goes on and on what batches."""

    batch_size: int
    """Trajectories per update."""
    max_epochs: int
    """Epochs at most."""
    patience: int
    """Epochs without a held-out gain of ``min_delta`` before stopping."""
    min_delta: float
    """Held-out EV gain that counts as progress."""
    lambda_target: float
    """The value trainer's target lambda (1: Monte-Carlo returns)."""
    seed: int
    """Seed of the epoch orders and the split."""


def split_by_task(
    trajectories: Sequence[Trajectory], fraction: float, seed: int
) -> tuple[list[Trajectory], list[Trajectory]]:
    """(train, held out): a seeded share of the tasks is held out with all their groups, so no
    prompt is in both sets (a critic could otherwise score a held-out group by its prompt alone)."""
    tasks = sorted({t.task_id for t in trajectories})
    if len(tasks) < 2:
        raise ValueError(
            f"tasks_per_policy: {len(tasks)} distinct task(s) played; a held-out split needs at least 2"
        )
    count = min(len(tasks) - 1, max(1, round(fraction * len(tasks))))
    order = np.random.default_rng(seed).permutation(len(tasks))
    held = {tasks[i] for i in order[:count]}
    return [t for t in trajectories if t.task_id not in held], [t for t in trajectories if t.task_id in held]


def returns_ev(trainer: CriticTrainer, trajectories: Sequence[Trajectory]) -> float:
    """Explained variance of the critic's V(h_t) against the returns, over every policy token."""
    values = trainer.predict(trajectories)
    predicted = np.concatenate([v[t.policy_mask] for v, t in zip(values, trajectories, strict=True)])
    returns = np.concatenate(
        [np.full(int(t.policy_mask.sum()), t.reward, dtype=np.float64) for t in trajectories]
    )
    return float(explained_variance(predicted, returns))


def update_critic(trainer: CriticTrainer, batch: list[Trajectory], lambda_target: float) -> dict[str, float]:
    """One value-trainer update on ``batch``: :meth:`CriticTrainer.train_step` on its targets."""
    if lambda_target < 1.0:  # GAE targets read the values the critic gave the batch
        batch = [dataclasses.replace(t, values=v) for t, v in zip(batch, trainer.predict(batch), strict=True)]
    return trainer.train_step(batch, critic_targets(batch, lambda_target))


def train_epoch(
    trainer: CriticTrainer,
    train: Sequence[Trajectory],
    schedule: Schedule,
    epoch: int,
    on_update: Callable[[], None],
) -> float:
    """One pass in a seeded order (epoch ``epoch``, counted from 1); returns the mean loss."""
    order = np.random.default_rng([schedule.seed, epoch]).permutation(len(train))
    losses = []
    for start in range(0, len(order), schedule.batch_size):
        batch = [train[i] for i in order[start : start + schedule.batch_size]]
        losses.append(update_critic(trainer, batch, schedule.lambda_target)["loss"])
        on_update()
    return float(np.mean(losses))


def record_epoch(state: TrainingState, row: dict[str, Any], schedule: Schedule) -> bool:
    """Append an epoch's row, update the plateau count; True when the held-out EV is the best yet
    (the critic to keep). Only a gain of ``min_delta`` over the last such gain resets the count."""
    state.history.append(row)
    held_out = row["held_out_ev"]
    if not np.isfinite(held_out):
        state.stale_epochs += int(row["epoch"] > 0)
        return False
    if held_out >= state.plateau_ev + schedule.min_delta or not np.isfinite(state.plateau_ev):
        state.plateau_ev, state.stale_epochs = held_out, 0
    elif row["epoch"] > 0:
        state.stale_epochs += 1
    best = bool(held_out > state.best_ev)
    if best:
        state.best_ev, state.best_epoch = held_out, int(row["epoch"])
    return best


def save_critic(trainer: CriticTrainer, target: Path) -> None:
    """The trainer's weights (``save_pretrained``) in ``target``, replaced as a whole."""
    partial, old = target.with_name(target.name + ".partial"), target.with_name(target.name + ".old")
    shutil.rmtree(partial, ignore_errors=True)
    trainer.save(partial)
    if target.exists():
        shutil.rmtree(old, ignore_errors=True)
        target.rename(old)
    partial.rename(target)
    shutil.rmtree(old, ignore_errors=True)


def save_checkpoint(trainer: CriticTrainer, checkpoint: Path, state: TrainingState) -> None:
    """Weights, AdamW state, step count and ``state`` through the trainers' one checkpoint
    mechanism (:class:`~lecritique.training.checkpoint.TrainerCheckpoints`; a save cut short
    leaves the previous checkpoint whole)."""
    TrainerCheckpoints(checkpoint, keep=1).save(trainer, extra=dataclasses.asdict(state))


def load_checkpoint(
    checkpoint: Path, make: Callable[[], CriticTrainer], fingerprint: str
) -> tuple[CriticTrainer, TrainingState] | None:
    """The trainer and state of ``checkpoint``'s newest complete save; None when there is none.
    A checkpoint of other data is refused: its epochs would not continue."""
    checkpoints = TrainerCheckpoints(checkpoint, keep=1)
    latest = checkpoints.latest()
    if latest is None:
        return None
    meta, path = latest
    state = TrainingState(**meta.extra)
    if state.fingerprint != fingerprint:
        raise ValueError(
            f"--out: {checkpoint} was trained on other rollouts or settings; use a new output directory"
        )
    trainer = make()
    checkpoints.load(trainer, path)
    return trainer, state


def epoch_row(
    epoch: int,
    trainer: CriticTrainer,
    train: Sequence[Trajectory],
    held_out: Sequence[Trajectory],
    loss: float | None,
) -> dict[str, Any]:
    """An epoch's row of the history (``loss``: the epoch's mean; None before training)."""
    return {
        "epoch": epoch,
        "updates": trainer.steps,
        "loss": loss,
        "train_ev": returns_ev(trainer, train),
        "held_out_ev": returns_ev(trainer, held_out),
    }
