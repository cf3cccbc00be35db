"""The policy trainer's process loop, for ``torchrun`` (any number of ranks) or plain ``python``.

Rank 0 obtains each batch (from gRPC in the policy-trainer service; from a batch file on the
command line) and broadcasts it; every rank then runs the same ``train_step``; rank 0 alone
saves or publishes weights (under FSDP2 every rank takes part: parameters are gathered one at a
time). An empty batch from rank 0 ends the loop on every rank.

    torchrun --nproc_per_node=2 -m lecritique.training.policy_worker \\
        --model-dir runs/policy/v0 --batches batches.bin --metrics-out metrics.json --weights-root weights/ \\
        --checkpoint-dir ckpt/ [--resume]
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import struct
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
import torch.distributed as dist
from rich.progress import Progress

from lecritique.training.checkpoint import TrainerCheckpoints
from lecritique.training.config import PolicyTrainerConfig
from lecritique.training.distributed import (
    DistributedContext,
    Idle,
    current_context,
    follow_batches,
    init_distributed_from_env,
)
from lecritique.training.policy_trainer import PolicyTrainer
from lecritique.trajectory import Trajectory
from lecritique.weights import WeightStore

logger = logging.getLogger(__name__)

_BATCH_FILE_MAGIC = b"LCTB1\n"


def write_batch_file(path: str | Path, batches: Sequence[Sequence[Trajectory]]) -> None:
    """Store batches of trajectories: ``magic, [u32 count, [u64 size, trajectory bytes]...]...``."""
    parts = [_BATCH_FILE_MAGIC]
    for batch in batches:
        parts.append(struct.pack("<I", len(batch)))
        for trajectory in batch:
            data = trajectory.to_bytes()
            parts.append(struct.pack("<Q", len(data)))
            parts.append(data)
    Path(path).write_bytes(b"".join(parts))


def read_batch_file(path: str | Path) -> list[list[Trajectory]]:
    """Inverse of :func:`write_batch_file`."""
    data = memoryview(Path(path).read_bytes())
    if bytes(data[: len(_BATCH_FILE_MAGIC)]) != _BATCH_FILE_MAGIC:
        raise ValueError(f"{path} is not a trajectory batch file (bad magic)")
    offset = len(_BATCH_FILE_MAGIC)
    batches: list[list[Trajectory]] = []
    while offset < len(data):
        (count,) = struct.unpack_from("<I", data, offset)
        offset += 4
        batch = []
        for _ in range(count):
            (size,) = struct.unpack_from("<Q", data, offset)
            offset += 8
            if offset + size > len(data):
                raise ValueError(f"{path} is truncated inside batch {len(batches)}")
            batch.append(Trajectory.from_bytes(data[offset : offset + size]))
            offset += size
        batches.append(batch)
    return batches


def run_policy_worker(
    trainer: PolicyTrainer,
    next_batch: Callable[[], list[Trajectory] | Idle | None],
    on_step: Callable[[int, dict[str, float]], None] | None = None,
    after_step: Callable[[int, dict[str, float]], None] | None = None,
) -> list[dict[str, float]]:
    """Train until rank 0's ``next_batch`` returns None (or an empty batch); :data:`IDLE`: nothing yet.

    ``next_batch`` is only called on rank 0 (:func:`follow_batches`). After each update
    ``after_step(step, metrics)`` runs on *every* rank (the place for collectives: publishing or
    checkpointing a sharded model; it may add entries to ``metrics`` on rank 0), then
    ``on_step(step, metrics)`` on rank 0 alone. Returns every step's metrics.
    """
    context = current_context()
    history: list[dict[str, float]] = []

    def train(trajectories: list[Trajectory]) -> None:
        metrics = trainer.train_step(trajectories)
        if after_step is not None:
            after_step(trainer.steps, metrics)
        history.append(metrics)
        if context.is_main and on_step is not None:
            on_step(trainer.steps, metrics)

    follow_batches(next_batch, train)
    return history


def _train_from_file(args: argparse.Namespace, context: DistributedContext) -> None:
    config = (
        PolicyTrainerConfig.model_validate_json(Path(args.config).read_text())
        if args.config
        else PolicyTrainerConfig()
    )
    trainer = PolicyTrainer(args.model_dir, config)
    store = WeightStore(args.weights_root) if args.weights_root else None
    checkpoints = (
        TrainerCheckpoints(args.checkpoint_dir, every=args.checkpoint_every) if args.checkpoint_dir else None
    )
    if args.resume and checkpoints is not None and (found := checkpoints.latest()) is not None:
        checkpoints.load(trainer, found[1])
    # A resumed run continues with the batch after the last one it trained on.
    pending = read_batch_file(args.batches)[trainer.steps :] if context.is_main else []
    if args.max_steps is not None:
        pending = pending[: max(0, args.max_steps - trainer.steps)]
    with Progress(disable=not context.is_main) as progress:
        task = progress.add_task("policy steps", total=len(pending))

        def next_batch() -> list[Trajectory] | None:
            return pending.pop(0) if pending else None

        def after_step(step: int, metrics: dict[str, float]) -> None:
            if store is not None:
                version = trainer.publish(store)  # a collective under FSDP2
                if version is not None:
                    metrics["policy_version"] = float(version)
            if checkpoints is not None:
                checkpoints.save_if_due(trainer)

        def on_step(step: int, metrics: dict[str, float]) -> None:
            progress.advance(task)
            tokens_per_second = metrics["tokens"] / metrics["step_seconds"]
            logger.info("step %d: loss %.6f, %.0f tokens/s", step, metrics["loss"], tokens_per_second)

        history = run_policy_worker(trainer, next_batch, on_step, after_step)
    saved = trainer.save(args.save_dir) if args.save_dir else None  # a collective under FSDP2
    if context.is_main and args.metrics_out:
        result = {
            "world_size": context.world_size,
            "first_step": trainer.steps - len(history) + 1,
            "steps": history,
        }
        Path(args.metrics_out).write_text(json.dumps({**result, "saved": str(saved) if saved else None}))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model-dir", required=True, help="HF directory of the policy to train")
    parser.add_argument("--batches", required=True, help="batch file written by write_batch_file")
    parser.add_argument("--config", help="PolicyTrainerConfig as a JSON file (defaults otherwise)")
    parser.add_argument("--metrics-out", help="write every step's metrics here as JSON (rank 0)")
    parser.add_argument("--save-dir", help="save the final policy here as a HF directory (rank 0)")
    parser.add_argument(
        "--weights-root", help="publish the policy after every step to this weight store (rank 0)"
    )
    parser.add_argument("--seed", type=int, default=0, help="torch seed (the update itself is deterministic)")
    parser.add_argument("--checkpoint-dir", help="write DCP checkpoints of the training state here")
    parser.add_argument("--checkpoint-every", type=int, default=1, help="checkpoint every this many steps")
    parser.add_argument(
        "--resume", action="store_true", help="start from the newest checkpoint in --checkpoint-dir"
    )
    parser.add_argument(
        "--max-steps", type=int, help="stop after this many optimiser steps in all (resumed ones count)"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")

    context = init_distributed_from_env()
    torch.manual_seed(args.seed)
    _train_from_file(args, context)
    # The trainer (and its DDP wrapper) must be freed while the process group is alive: DDP's
    # destructor can hang after destroy_process_group on gloo.
    gc.collect()
    if context.enabled:
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
