"""Publishing a trainer's weights through its configured transport (every trainer rank calls it).

``shared_volume``: a HF directory per version in the weight store (:meth:`HFTrainer.publish`).
``broadcast``: rank 0 sends the tensors that changed since the last version to the serving
replicas (:mod:`lecritique.weights.broadcast`); under FSDP2 every rank takes part in gathering
them, one tensor at a time. Which tensors changed is read from their in-place version counters
(an optimiser step bumps them; frozen parameters and skipped updates leave them), agreed over
the trainer's ranks. Versions are still written to the weight store every ``persist_every``
versions, and whenever a broadcast could not be made, so a restarted replica finds them there;
every version is announced in Redis either way.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import torch
import torch.distributed as dist

from lecritique.models.dtypes import torch_dtype
from lecritique.training import fsdp
from lecritique.training.engine import HFTrainer
from lecritique.weights import WeightStore
from lecritique.weights.broadcast import BroadcastPublisher, tensor_spec, version_counters
from lecritique.weights.config import BroadcastTransport, SharedVolumeTransport

logger = logging.getLogger(__name__)

POD_IP_ENV = "POD_IP"
"""Where a Kubernetes pod learns its own address (the launcher sets it from the downward API)."""


def broadcast_host() -> str:
    """The address replicas reach this trainer at: the pod's IP in Kubernetes, loopback locally."""
    return os.environ.get(POD_IP_ENV) or "127.0.0.1"


def publish_dtype(setting: str) -> torch.dtype | None:
    """``TrainerProcessesConfig.publish_dtype`` as a torch dtype (None: ``trained``, the trainer's own)."""
    return None if setting == "trained" else torch_dtype(setting)  # type: ignore[arg-type]


class WeightSync:
    """Publishes one role's versions; ``publish`` is a collective of the trainer's ranks."""

    def __init__(
        self,
        trainer: HFTrainer,
        store: WeightStore,
        role: str,
        transport: BroadcastTransport | SharedVolumeTransport | None,
        receivers: int,
        keep_last: int | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        self.trainer = trainer
        self.dtype = dtype
        """Floating-point tensors are published and broadcast in this dtype (None: the trainer's)."""
        self.store = store
        self.role = role
        self.keep_last = keep_last
        self.transport = transport if isinstance(transport, BroadcastTransport) else None
        self.publisher: BroadcastPublisher | None = None
        self.published = 0
        self._sent: dict[str, tuple[int, int]] = {}
        self._version = -1
        if self.transport is not None and trainer.context.is_main:
            backend = self.transport.backend
            if backend == "auto":
                backend = "nccl" if trainer.engine.device.type == "cuda" else "gloo"
            self.publisher = BroadcastPublisher(
                store.role_dir(role),
                receivers,
                host=broadcast_host(),
                port=self.transport.port,
                backend=backend,
                timeout_seconds=self.transport.timeout_seconds,
                join_timeout_seconds=self.transport.join_timeout_seconds,
            )
            logger.info(
                "%s weights broadcast to %d replicas from %s:%d",
                role,
                receivers,
                self.publisher.host,
                self.publisher.port,
            )

    def publish(self) -> int | None:
        """Publish the trainer's current weights as the next version; rank 0 returns it, others None."""
        if self.transport is None:
            return self.trainer.publish(self.store, self.role, keep_last=self.keep_last, dtype=self.dtype)
        return self._broadcast()

    def _agree(self, values: list[int]) -> list[int]:
        """Element-wise maximum over the trainer's ranks."""
        if not self.trainer.context.enabled:
            return values
        tensor = torch.tensor(values, dtype=torch.int64, device=self.trainer.engine.device)
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
        return [int(x) for x in tensor.cpu()]

    def _next_version(self) -> int:
        latest = self.store.latest(self.role)
        self._version = max(self._version, latest[0] if latest is not None else -1) + 1
        return self._version

    def _broadcast(self) -> int | None:
        assert self.transport is not None
        main = self.trainer.context.is_main
        named = fsdp.named_state(self.trainer.model)
        counters = version_counters(named)
        changed = [int(counters[name] != self._sent.get(name)) for name, _ in named]
        joined = 0
        if self.publisher is not None:
            joined = int(
                self.publisher.ensure_group(
                    [tensor_spec(name, fsdp.cast_spec(tensor, self.dtype)) for name, tensor in named]
                )
            )
            if joined and self.publisher.fresh:
                changed = [1] * len(changed)  # a new generation starts from every tensor
        joined, *changed = self._agree([joined, *changed])
        version = self._next_version() if main else -1
        failed = 0
        if joined:
            failed = self._send(version, named, changed)
        failed = self._agree([failed])[0]
        if joined and not failed:
            self._sent = counters
        persist = not joined or failed or self.published % self.transport.persist_every == 0
        self.published += 1
        if persist:
            self.trainer.publish(
                self.store,
                self.role,
                keep_last=self.keep_last,
                version=version if main else None,
                dtype=self.dtype,
            )
        elif main:
            self.store.announce(self.role, version)
        return version if main else None

    def _send(self, version: int, named: list[tuple[str, Any]], changed: list[int]) -> int:
        """Gather the changed tensors (every rank) and send them (rank 0); 1 if the send failed."""
        names = {name for (name, _), flag in zip(named, changed, strict=True) if flag}
        stream = fsdp.full_parameters(self.trainer.model, self.dtype, names=names)
        if self.publisher is None:
            for _ in stream:  # take part in the gathers
                pass
            return 0
        try:
            self.publisher.send(version, [bool(flag) for flag in changed], stream)
        except Exception:
            logger.exception(
                "broadcast of %s version %d failed; writing it to the weight store", self.role, version
            )
            for _ in stream:  # the other ranks still gather the rest
                pass
            return 1
        return 0

    def close(self) -> None:
        if self.publisher is not None:
            self.publisher.close()
