"""``critic pretrain``: collect rollouts of several policies, train the spec's critic offline, save it.

Output directory (a rerun with the same ``--out`` continues: rollouts come from the cache, training
from the checkpoint, with its optimizer state and epoch count):

- ``critic/``: the critic at its best held-out EV, a saved HF directory that a later run names as
  ``critic.model_path`` (loaded with its head by the value trainer, measured by ``critic-eval``);
- ``checkpoint/``: the latest epoch's weights, AdamW state and training state;
- ``rollouts/``: every policy's trajectories with their critic contexts;
- ``ev.png``, ``summary.json``, ``summary.md``.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from rich.progress import Progress

from lecritique.config.experiment import ExperimentSpec
from lecritique.critics.kinds import starting_critic
from lecritique.critics.specs import DiscriminativeCriticSpec
from lecritique.pretrain.collect import PolicyRollouts, collect
from lecritique.pretrain.config import PretrainConfig, pretrained_critic
from lecritique.pretrain.report import plot_ev, write_summary
from lecritique.pretrain.train import (
    Schedule,
    TrainingState,
    epoch_row,
    load_checkpoint,
    record_epoch,
    save_checkpoint,
    save_critic,
    split_by_task,
    train_epoch,
)
from lecritique.training.critic_trainer import CriticTrainer
from lecritique.trajectory import Trajectory

logger = logging.getLogger(__name__)

CRITIC_DIR = "critic"
"""The pretrained critic inside ``--out``: name it as ``critic.model_path``."""
CHECKPOINT_DIR = "checkpoint"


@dataclass(frozen=True)
class PretrainResult:
    critic_dir: Path
    state: TrainingState
    summary: dict[str, Any]


def _policies(spec: ExperimentSpec, config: PretrainConfig) -> list[str]:
    own = [str(Path(spec.policy.path).resolve())] if config.include_spec_policy and spec.policy.path else []
    if own and not (Path(own[0]) / "config.json").is_file():
        raise ValueError(f"policy.path: {spec.policy.path!r} is not a saved policy (no config.json in it)")
    policies = own + [p for p in config.policies if p not in own]
    if not policies:
        raise ValueError("policies: nothing to play; name a policy or keep include_spec_policy: true")
    return policies


def _fingerprint(
    train: list[Trajectory], held_out: list[Trajectory], schedule: Schedule, critic: DiscriminativeCriticSpec
) -> str:
    """Training data and settings a checkpoint belongs to (not the stopping rule: it may change)."""
    digest = hashlib.sha256()
    for trajectory in [*train, *held_out]:
        digest.update(trajectory.to_bytes())
    settings = {
        "batch": schedule.batch_size,
        "lambda": schedule.lambda_target,
        "seed": schedule.seed,
        "split": len(held_out),
    }
    # head_init joined the critic's settings later: at its default a checkpoint written before keeps its key.
    dumped = critic.model_dump(mode="json", exclude={"head_init"} if critic.head_init == "random" else None)
    digest.update(json.dumps({**settings, "critic": dumped}, sort_keys=True).encode())
    return digest.hexdigest()[:16]


def _fresh_trainer(critic: DiscriminativeCriticSpec, policy_dir: str, seed: int) -> CriticTrainer:
    """The critic a run of the spec would start from (:func:`~lecritique.critics.kinds.starting_critic`:
    its ``model_path``, its own shape and ``init``, else the policy's backbone), the head seeded."""
    torch.manual_seed(seed)
    return starting_critic(critic, Path(policy_dir), seed)


def _train(
    critic: DiscriminativeCriticSpec,
    policy_dir: str,
    train: list[Trajectory],
    held_out: list[Trajectory],
    schedule: Schedule,
    out: Path,
    progress: Progress,
) -> TrainingState:
    fingerprint = _fingerprint(train, held_out, schedule, critic)
    loaded = load_checkpoint(
        out / CHECKPOINT_DIR, lambda: _fresh_trainer(critic, policy_dir, schedule.seed), fingerprint
    )
    if loaded is None:
        trainer, state = _fresh_trainer(critic, policy_dir, schedule.seed), TrainingState(fingerprint)
        if record_epoch(state, epoch_row(0, trainer, train, held_out, None), schedule):
            save_critic(trainer, out / CRITIC_DIR)
        save_checkpoint(trainer, out / CHECKPOINT_DIR, state)
    else:
        trainer, state = loaded
        state.stopped = None  # the stopping rule is the rerun's: a larger max_epochs or patience goes on
        logger.info("resuming at epoch %d (%d updates)", state.epoch, trainer.steps)
    per_epoch = -(-len(train) // schedule.batch_size)
    bar = progress.add_task(
        "training",
        total=schedule.max_epochs * per_epoch,
        completed=min(state.epoch, schedule.max_epochs) * per_epoch,
    )
    while state.epoch < schedule.max_epochs and state.stale_epochs < schedule.patience:
        loss = train_epoch(trainer, train, schedule, state.epoch + 1, lambda: progress.advance(bar))
        state.epoch += 1
        row = epoch_row(state.epoch, trainer, train, held_out, loss)
        if record_epoch(state, row, schedule):
            save_critic(trainer, out / CRITIC_DIR)
        save_checkpoint(trainer, out / CHECKPOINT_DIR, state)
        progress.update(bar, description=f"training (held-out EV {row['held_out_ev']:.3f})")
        plot_ev(state.history, out / "ev.png")
    state.stopped = "plateau" if state.stale_epochs >= schedule.patience else "max_epochs"
    return state


def pretrain(
    spec: ExperimentSpec, config: PretrainConfig, out: Path, *, show_progress: bool = True
) -> PretrainResult:
    """Collect, train, write the outputs of the module docstring into ``out``."""
    critic = pretrained_critic(spec)
    if spec.policy.path is None:
        raise ValueError(
            "policy.path: resolve the spec's tiny policy first (lecritique.cli.tiny_policy.with_tiny_policy_built)"
        )
    out.mkdir(parents=True, exist_ok=True)
    seed = spec.seed if config.seed is None else config.seed
    policies = _policies(spec, config)
    schedule = Schedule(
        config.batch_size or spec.critic_batch_size,
        config.max_epochs,
        config.patience,
        config.min_delta,
        spec.estimator.critic_target_lambda(),
        seed,
    )
    with Progress(disable=not show_progress) as progress:
        collected = collect(spec, critic, policies, config.tasks_per_policy, seed, out / "rollouts", progress)
        everything = [t for rollouts in collected for t in rollouts.trajectories]
        train, held_out = split_by_task(everything, config.held_out_fraction, seed)
        if len({t.reward for t in held_out}) < 2:
            raise ValueError(
                "tasks_per_policy: every held-out episode has the same return, so explained variance is undefined; "
                "play more tasks (or policies whose rewards vary)"
            )
        state = _train(critic, spec.policy.path, train, held_out, schedule, out, progress)
    plot_ev(state.history, out / "ev.png")
    summary = _summary(spec, critic, collected, train, held_out, state, out)
    write_summary(out, summary)
    return PretrainResult(out / CRITIC_DIR, state, summary)


def _summary(
    spec: ExperimentSpec,
    critic: DiscriminativeCriticSpec,
    collected: list[PolicyRollouts],
    train: list[Trajectory],
    held_out: list[Trajectory],
    state: TrainingState,
    out: Path,
) -> dict[str, Any]:
    return {
        "spec": spec.name,
        "context": critic.context,
        "policies": [
            {"path": r.policy, "trajectories": len(r.trajectories), "mean_reward": r.mean_reward}
            for r in collected
        ],
        "train_trajectories": len(train),
        "held_out_trajectories": len(held_out),
        "held_out_tasks": len({t.task_id for t in held_out}),
        "history": state.history,
        "epochs": state.epoch,
        "stopped": state.stopped,
        "best_epoch": state.best_epoch,
        "best_held_out_ev": state.best_ev,
        "initial_held_out_ev": state.history[0]["held_out_ev"],
        "critic_dir": str((out / CRITIC_DIR).resolve()),
    }
