"""torch.distributed plumbing for data-parallel trainers (torchrun, gloo on CPU, NCCL on GPU).

Convention: every rank is handed the *same* full batch (rank 0 receives it, e.g. over gRPC, and
:func:`broadcast_trajectories` copies it to the others); each rank then trains on its own shard
(:func:`shard_indices`). Because every rank sees the full batch, the global token count that
eq. 1 divides by is known everywhere without communication.

A trainer *service* runs :func:`follow_batches`: rank 0 waits for work (a gRPC call, the replay
stream) while the other ranks wait inside a broadcast. A collective that waits longer than the
process group's timeout (30 minutes by default) aborts the group, and a service may well be idle
that long (an orchestrator restarting, a replay stream that has dried up), so rank 0 sends an
:data:`IDLE` message at least every :data:`HEARTBEAT_SECONDS`.
"""

from __future__ import annotations

import enum
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TypeVar

import torch
import torch.distributed as dist

from lecritique.trajectory import Trajectory

logger = logging.getLogger(__name__)

T = TypeVar("T")


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


def init_distributed_from_env(timeout_seconds: float | None = None) -> DistributedContext:
    """Initialise the default process group when launched by torchrun (``WORLD_SIZE`` > 1).

    NCCL when CUDA is available, gloo otherwise. A plain ``python`` launch stays single-process.
    ``timeout_seconds``: how long a collective may wait (None: torch's default, 30 minutes on gloo).
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size > 1 and not dist.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        if backend == "nccl":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        timeout = None if timeout_seconds is None else timedelta(seconds=timeout_seconds)
        dist.init_process_group(backend=backend, timeout=timeout)
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
    """Give every rank the source rank's batch (others pass None). An empty list is a valid message."""
    batch = broadcast_batch(trajectories, source_rank)
    assert not isinstance(batch, Idle), "the source sent a batch"
    return batch


class Idle(enum.Enum):
    """Rank 0 has no batch yet (see :func:`follow_batches`)."""

    IDLE = "idle"


IDLE = Idle.IDLE
"""Rank 0's message when it has no batch yet: every rank goes back to waiting."""

HEARTBEAT_SECONDS = 60.0
"""Longest rank 0 of a trainer service waits for work before it sends :data:`IDLE` (far below
the process group's timeout, far above what a broadcast of a few bytes costs)."""


def broadcast_batch(batch: list[Trajectory] | Idle | None, source_rank: int = 0) -> list[Trajectory] | Idle:
    """The source rank's batch, or :data:`IDLE`, on every rank (the others pass None).

    One object broadcast; trajectories travel in their compact codec, so only bytes are pickled.
    """
    context = current_context()
    source = context.rank == source_rank
    if batch is None and (source or not context.enabled):
        raise ValueError(f"rank {context.rank} is the source and must pass a batch or IDLE, got None")
    if not context.enabled:
        return batch if isinstance(batch, Idle) else list(batch or [])
    payload: list[object] = [None]
    if source:
        payload = [IDLE.value if batch is IDLE else [t.to_bytes() for t in batch or []]]
    dist.broadcast_object_list(payload, src=source_rank)
    if source:
        return batch if isinstance(batch, Idle) else list(batch or [])
    encoded = payload[0]
    if encoded == IDLE.value:
        return IDLE
    assert isinstance(encoded, list)
    return [Trajectory.from_bytes(item) for item in encoded]


def follow_batches(
    next_batch: Callable[[], list[Trajectory] | Idle | None], train: Callable[[list[Trajectory]], None]
) -> None:
    """Rank 0 obtains each batch with ``next_batch``, every rank then runs ``train`` on it.

    ``next_batch`` (rank 0 only) returns a batch, :data:`IDLE` (nothing yet: it should not block
    longer than :data:`HEARTBEAT_SECONDS`), or None / an empty batch, which ends the loop on every rank.
    """
    main = current_context().is_main
    while True:
        batch = next_batch() if main else None
        if main and batch is None:
            batch = []
        message = broadcast_batch(batch)
        if message is IDLE:
            continue
        if not message:
            return
        train(message)


def broadcast_object(value: T, source_rank: int = 0) -> T:
    """The source rank's picklable ``value`` on every rank (identity when not distributed)."""
    if not current_context().enabled:
        return value
    payload: list[object] = [value]
    dist.broadcast_object_list(payload, src=source_rank)
    return payload[0]  # type: ignore[return-value]


def leave_sigterm_to_rank_zero() -> None:
    """On the ranks other than 0 of a service: SIGTERM (torchrun forwards it to every rank) is
    logged and left to rank 0, which finishes the update under way and then ends every rank's
    :func:`follow_batches`, so no rank leaves a collective half done. (torchrun kills ranks that
    outlive its grace period.)"""
    rank = current_context().rank
    signal.signal(signal.SIGTERM, lambda signum, frame: logger.info("rank %d: stopping with rank 0", rank))


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
