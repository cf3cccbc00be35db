"""Run by test_torchrun_training under torchrun (or plain python): a few data-parallel critic steps.

Usage: python critic_worker_script.py POLICY_DIR BATCH_FILE METRICS_OUT [ddp|fsdp2]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from lecritique.training.config import CriticTrainerConfig, OptimizerConfig
from lecritique.training.critic_trainer import CriticTrainer
from lecritique.training.distributed import broadcast_trajectories, init_distributed_from_env
from lecritique.training.policy_worker import read_batch_file


def main() -> None:
    policy_dir, batch_file, metrics_out = sys.argv[1:4]
    parallelism = sys.argv[4] if len(sys.argv) > 4 else "ddp"
    context = init_distributed_from_env()
    # Each rank draws a different random head on purpose: identical starting weights must come
    # from DDP (or the FSDP2 engine) broadcasting rank 0's parameters.
    torch.manual_seed(1000 + context.rank)
    critic = CriticTrainer.from_policy(
        policy_dir, CriticTrainerConfig(optimizer=OptimizerConfig(lr=1e-2), parallelism=parallelism)
    )
    batches = read_batch_file(batch_file) if context.is_main else None
    history = []
    for step in range(3):
        trajectories = broadcast_trajectories(batches[step] if batches is not None else None)
        history.append(critic.train_step(trajectories))
    predictions = critic.predict(trajectories)
    if context.is_main:
        Path(metrics_out).write_text(
            json.dumps({"steps": history, "predictions": [p.tolist() for p in predictions]})
        )
    del critic
    if context.enabled:
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
