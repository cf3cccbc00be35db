"""torch.distributed plumbing for data-parallel trainers (torchrun, gloo on CPU, NCCL on GPU).

Convention: every rank is handed the *same* full batch (rank 0 receives it, e.g. over gRPC, and
:func:`broadcast_trajectories` copies it to the others); each rank then trains on its own shard
(:func:`shard_indices`). Because every rank sees the full batch, the global token count that
eq. 1 divides by is known everywhere without communication.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.distributed as dist

from lecritique.trajectory import Trajectory

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DistributedContext:
    """Where this process stands in the data-parallel group."""

    rank: int
    """This process's rank (0 when not distributed)."""
    world_size: int
    """Number of data-parallel processes (1 when not distributed)."""
    local_rank: int
    """Rank on this node; selects the GPU."""

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def current_context() -> DistributedContext:
    """The initialised process group's ranks, or a single process."""
    if dist.is_available() and dist.is_initialized():
        return DistributedContext(
            rank=dist.get_rank(),
            world_size=dist.get_world_size(),
            local_rank=int(os.environ.get("LOCAL_RANK", "0")),
        )
    return DistributedContext(rank=0, world_size=1, local_rank=0)


def init_distributed_from_env() -> DistributedContext:
    """Initialise the default process group when launched by torchrun (``WORLD_SIZE`` > 1).

    NCCL when CUDA is available, gloo otherwise. A plain ``python`` launch stays single-process.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size > 1 and not dist.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        if backend == "nccl":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group(backend=backend)
        logger.info("initialised %s process group: rank %d of %d", backend, dist.get_rank(), world_size)
    return current_context()


def default_device(context: DistributedContext) -> torch.device:
    """This rank's GPU when CUDA is available, else the CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda", context.local_rank)
    return torch.device("cpu")


def shard_indices(lengths: Sequence[int], world_size: int) -> list[list[int]]:
    """Split a batch across ranks balancing tokens: longest first, each to the least-loaded rank.

    Deterministic (ties go to the lower rank), so every rank computes the same assignment.
    """
    if len(lengths) < world_size:
        raise ValueError(f"a batch of {len(lengths)} trajectories cannot be split across {world_size} ranks")
    shards: list[list[int]] = [[] for _ in range(world_size)]
    loads = [0] * world_size
    for index in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        rank = min(range(world_size), key=lambda r: (loads[r], r))
        shards[rank].append(index)
        loads[rank] += lengths[index]
    return [sorted(shard) for shard in shards]


def broadcast_trajectories(trajectories: list[Trajectory] | None, source_rank: int = 0) -> list[Trajectory]:
    """Give every rank the source rank's batch (others pass None). An empty list is a valid message.

    Serialised with the compact trajectory codec, so the object broadcast pickles only bytes.
    """
    context = current_context()
    if not context.enabled:
        if trajectories is None:
            raise ValueError("broadcast_trajectories needs the trajectories when not distributed")
        return list(trajectories)
    if context.rank == source_rank:
        if trajectories is None:
            raise ValueError(f"rank {source_rank} is the source and must pass the trajectories, got None")
        payload: list[object] = [[trajectory.to_bytes() for trajectory in trajectories]]
    else:
        payload = [None]
    dist.broadcast_object_list(payload, src=source_rank)
    encoded = payload[0]
    assert isinstance(encoded, list)
    if context.rank == source_rank:
        return list(trajectories or [])
    return [Trajectory.from_bytes(item) for item in encoded]


def free_local_port() -> int:
    """A TCP port free on the loopback interface now (for torchrun's rendezvous)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def launch_command(processes: int, program: Sequence[str]) -> list[str]:
    """Command line running ``python PROGRAM`` in ``processes`` local data-parallel processes.

    One process: plain ``python`` (no process group). Several: ``torch.distributed.run`` on one
    node, rendezvous on a free loopback port. ``program`` is what follows ``python``
    (``["-m", "module", ...]`` or ``["script.py", ...]``).
    """
    if processes < 1:
        raise ValueError(f"processes must be >= 1, got {processes}")
    if processes == 1:
        return [sys.executable, *program]
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={processes}",
        "--master_addr=127.0.0.1",
        f"--master_port={free_local_port()}",
        *program,
    ]


def all_reduce_sum(values: torch.Tensor) -> torch.Tensor:
    """Sum a tensor over ranks (identity when not distributed); returns a new tensor."""
    total = values.clone()
    if current_context().enabled:
        dist.all_reduce(total, op=dist.ReduceOp.SUM)
    return total
