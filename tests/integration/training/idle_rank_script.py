"""Run by test_idle_ranks under torchrun: rank 0 has no work for longer than the group's timeout.

Usage: python idle_rank_script.py OUT_DIR heartbeat|silent

The process group's collectives time out after 2 s. Rank 0 finds its first batch only after 4 s:
with ``heartbeat`` it answers IDLE every 0.5 s meanwhile (what the trainer services do); with
``silent`` it blocks, as a service that waits for work without a heartbeat would.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from lecritique.training.distributed import (
    IDLE,
    Idle,
    all_reduce_sum,
    follow_batches,
    init_distributed_from_env,
)
from lecritique.trajectory import Trajectory
from tests.unit.training.training_helpers import make_trajectory

WAIT_SECONDS = 4.0


def main() -> None:
    out_dir, mode = Path(sys.argv[1]), sys.argv[2]
    context = init_distributed_from_env(timeout_seconds=2.0)
    rng = np.random.default_rng(0)
    batches = [[make_trajectory(rng, index, prompt_len=2, num_tokens=3) for index in range(3)]]
    started = time.monotonic()
    idle_messages = 0

    def next_batch() -> list[Trajectory] | Idle | None:
        nonlocal idle_messages
        if time.monotonic() - started < WAIT_SECONDS:
            if mode == "silent":
                time.sleep(WAIT_SECONDS)
            else:
                time.sleep(0.5)
                idle_messages += 1
                return IDLE
        return batches.pop(0) if batches else None

    trained: list[list[str]] = []

    def train(batch: list[Trajectory]) -> None:
        # A collective on every rank, as a training step is.
        total = all_reduce_sum(torch.tensor([float(len(batch))]))
        trained.append([t.trajectory_id for t in batch] + [str(int(total[0]))])

    follow_batches(next_batch, train)
    (out_dir / f"rank{context.rank}.json").write_text(
        json.dumps({"trained": trained, "idle_messages": idle_messages})
    )
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
