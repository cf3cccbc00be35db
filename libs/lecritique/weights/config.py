"""How a trainer's new weights reach the servers (no torch here: part of the experiment spec)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class SharedVolumeTransport(BaseModel):
    """Every version is a HF directory in the weight store; servers load it from there."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["shared_volume"] = "shared_volume"
    """Discriminator."""


class BroadcastTransport(BaseModel):
    """The trainer's rank 0 broadcasts changed tensors to every server over a torch.distributed group.

    The group (rank 0: the trainer; ranks 1..R: rollout or value-evaluator replicas) is formed
    through a TCP store the trainer hosts; its address is written next to the role's versions in
    the weight store. Servers update their weights in place. Versions are also written to the
    weight store every ``persist_every`` versions (and whenever a broadcast fails), for restarts.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["broadcast"] = "broadcast"
    """Discriminator."""
    port: int = Field(default=29600, ge=0, le=65535)
    """Port of the trainer's rendezvous store (0: any free port, for local runs)."""
    backend: Literal["auto", "gloo", "nccl"] = "auto"
    """Collective backend: NCCL between GPUs, gloo over TCP; ``auto``: NCCL when the trainer has CUDA."""
    persist_every: int = Field(default=10, ge=1)
    """Also write every this many versions to the weight store (restarts load the newest written one)."""
    join_timeout_seconds: float = Field(default=300.0, gt=0)
    """How long a publish waits for every replica to join the group before writing to the store instead."""
    timeout_seconds: float = Field(default=600.0, gt=0)
    """Timeout of one broadcast on the trainer's side; a replica that does not take part breaks the group."""


WeightTransportConfig = Annotated[SharedVolumeTransport | BroadcastTransport, Field(discriminator="kind")]
"""``shared_volume`` (default) or ``broadcast``."""
