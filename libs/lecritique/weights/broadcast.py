"""Weights broadcast from a trainer's rank 0 to serving replicas over a torch.distributed group.

As in verl and prime-rl, the trainer and the inference workers form their own process group
(independent of the trainer's torchrun group): rank 0 is the trainer, ranks 1..R the replicas.
The group is built directly on a TCP store the trainer hosts (``ProcessGroupGloo`` /
``ProcessGroupNCCL``), so no process needs a default group for it. Its address sits in
``{weights root}/{role}/BROADCAST`` on the shared volume, which every replica already reads.

One generation of the group::

    trainer                                    replica (each)
    write BROADCAST {host, port, generation}   read BROADCAST, connect to the store
    wait until R replicas registered           rank = add("g{n}/ranks", 1)
    set "g{n}/manifest" (names, dtypes, shapes) check the manifest against its own tensors
    build the group (rank 0)                   build the group (its rank)

One version: a header ``[version, command, changed]`` (int64), a mask of the manifest's tensors
that changed since the last version this group received (uint8), then each changed tensor in
manifest order, which the replica copies into its model as it arrives (holding its serving lock
for the whole version, so no request sees a half-updated model). A new generation starts with
every tensor. When a broadcast fails (a replica died), the trainer drops the group and forms a
new generation at its next publish; replicas whose receive failed rejoin it.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import TCPStore
from torch.distributed.distributed_c10d import PrefixStore

logger = logging.getLogger(__name__)

ENDPOINT_FILE = "BROADCAST"
_WEIGHTS, _STOP = 1, 2
_RECEIVER_TIMEOUT = datetime.timedelta(days=7)  # a replica waits for the next version as long as it takes


@dataclass(frozen=True)
class Endpoint:
    """Where a role's broadcast group meets."""

    host: str
    """Address of the trainer's rendezvous store."""
    port: int
    """Port of the store."""
    generation: int
    """Current generation of the group (a new one after every failure)."""
    receivers: int
    """Replicas the group waits for."""
    backend: str
    """``gloo`` or ``nccl``."""


@dataclass(frozen=True)
class TensorSpec:
    """One tensor of the manifest."""

    name: str
    dtype: str
    shape: tuple[int, ...]


def tensor_spec(name: str, tensor: torch.Tensor) -> TensorSpec:
    return TensorSpec(name, str(tensor.dtype).removeprefix("torch."), tuple(int(s) for s in tensor.shape))


def write_endpoint(role_dir: Path, endpoint: Endpoint) -> None:
    """Atomically replace the role's endpoint file."""
    role_dir.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=".tmp-broadcast-", dir=role_dir)
    with os.fdopen(fd, "w") as handle:
        json.dump(asdict(endpoint), handle)
    os.chmod(name, 0o644)
    os.replace(name, role_dir / ENDPOINT_FILE)


def read_endpoint(role_dir: Path) -> Endpoint | None:
    try:
        return Endpoint(**json.loads((role_dir / ENDPOINT_FILE).read_text()))
    except FileNotFoundError:
        return None


def _new_group(store: Any, rank: int, size: int, backend: str, timeout: datetime.timedelta) -> Any:
    if backend == "nccl":
        options = dist.ProcessGroupNCCL.Options()
        options._timeout = timeout
        return dist.ProcessGroupNCCL(store, rank, size, options)
    return dist.ProcessGroupGloo(store, rank, size, timeout)


def _broadcast(group: Any, tensor: torch.Tensor) -> None:
    options = dist.BroadcastOptions()
    options.rootRank = 0
    group.broadcast([tensor], options).wait()


class BroadcastPublisher:
    """The trainer's end (its rank 0): hosts the store, forms generations, sends versions."""

    def __init__(
        self,
        role_dir: str | Path,
        receivers: int,
        *,
        host: str,
        port: int = 0,
        backend: str = "gloo",
        timeout_seconds: float = 600.0,
        join_timeout_seconds: float = 300.0,
        device: torch.device | None = None,
    ) -> None:
        if receivers < 1:
            raise ValueError(f"a broadcast needs at least one receiver, got {receivers}")
        self.role_dir = Path(role_dir)
        self.receivers = receivers
        self.host = host
        self.backend = backend
        self.timeout = datetime.timedelta(seconds=timeout_seconds)
        self.join_timeout = join_timeout_seconds
        self.device = device or (
            torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")
        )
        self.store = TCPStore(host, port, None, True, self.timeout, wait_for_workers=False)
        self.port = int(self.store.port)
        self.generation = 0
        self.group: Any = None
        self.fresh = False
        """True until the first version of the current generation is sent: that one sends every tensor."""

    def ensure_group(self, manifest: Sequence[TensorSpec]) -> bool:
        """Form a new generation if there is none; False when the replicas did not all join in time."""
        if self.group is not None:
            return True
        self.generation += 1
        prefix = f"g{self.generation}/"
        write_endpoint(
            self.role_dir, Endpoint(self.host, self.port, self.generation, self.receivers, self.backend)
        )
        deadline = time.monotonic() + self.join_timeout
        while self.store.add(prefix + "ranks", 0) < self.receivers:
            if time.monotonic() > deadline:
                logger.warning(
                    "broadcast generation %d: only %d of %d replicas joined",
                    self.generation,
                    self.store.add(prefix + "ranks", 0),
                    self.receivers,
                )
                return False
            time.sleep(0.05)
        self.store.set(prefix + "manifest", json.dumps([asdict(spec) for spec in manifest]))
        group_store = PrefixStore(prefix + "group", self.store)
        self.group = _new_group(group_store, 0, self.receivers + 1, self.backend, self.timeout)
        self.fresh = True
        logger.info(
            "broadcast generation %d formed with %d replicas (%s)",
            self.generation,
            self.receivers,
            self.backend,
        )
        return True

    def send(self, version: int, mask: Sequence[bool], tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Send one version: the header, the mask, then the changed tensors (in manifest order)."""
        group = self.group
        try:
            header = torch.tensor([version, _WEIGHTS, sum(mask)], dtype=torch.int64, device=self.device)
            _broadcast(group, header)
            _broadcast(group, torch.tensor([int(m) for m in mask], dtype=torch.uint8, device=self.device))
            for _name, tensor in tensors:
                _broadcast(group, tensor.to(self.device).contiguous())
        except Exception:
            self.group = None  # broken: the next publish forms a new generation
            raise
        self.fresh = False

    def close(self) -> None:
        """Tell the replicas to stop listening (best effort), then drop the group."""
        if self.group is not None:
            with contextlib.suppress(Exception):
                _broadcast(self.group, torch.tensor([0, _STOP, 0], dtype=torch.int64, device=self.device))
        self.group = None


NamedTensors = Callable[[], dict[str, torch.Tensor]]
"""The receiver's current tensors by name (looked up at every version: a server may swap its model)."""


class BroadcastReceiver:
    """A replica's end: joins each generation, copies every received version into its model.

    ``tensors()`` gives the tensors to update in place; ``lock()`` is held for a whole version;
    ``on_version(version)`` runs (under the lock) once a version is complete.
    """

    def __init__(
        self,
        role_dir: str | Path,
        tensors: NamedTensors,
        lock: Callable[[], contextlib.AbstractContextManager[Any]],
        on_version: Callable[[int], None],
        poll_seconds: float = 0.2,
    ) -> None:
        self.role_dir = Path(role_dir)
        self.tensors = tensors
        self.lock = lock
        self.on_version = on_version
        self.poll_seconds = poll_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="weights-receiver", daemon=True)
        self.received: list[int] = []
        """Versions received, in order (for metrics and tests)."""
        self.tensors_received = 0
        """Tensors received in all (only changed ones travel)."""
        self.in_group = False
        """Whether it is a member of a live generation (a server stops waiting for broadcasts otherwise)."""

    def start(self) -> BroadcastReceiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        joined = 0
        while not self._stop.is_set():
            endpoint = read_endpoint(self.role_dir)
            if endpoint is None or endpoint.generation <= joined:
                self._stop.wait(self.poll_seconds)
                continue
            joined = endpoint.generation
            try:
                if self._serve_generation(endpoint):
                    return
            except Exception as error:  # the trainer dropped this generation or went away
                logger.warning(
                    "broadcast generation %d ended: %s; waiting for the next", endpoint.generation, error
                )

    def _join(self, endpoint: Endpoint) -> tuple[Any, int, list[TensorSpec]] | None:
        prefix = f"g{endpoint.generation}/"
        store = TCPStore(endpoint.host, endpoint.port, None, False, datetime.timedelta(seconds=60))
        rank = int(store.add(prefix + "ranks", 1))
        if rank > endpoint.receivers:
            logger.warning(
                "broadcast generation %d is full (%d replicas); waiting for the next",
                endpoint.generation,
                endpoint.receivers,
            )
            return None
        store.wait([prefix + "manifest"], datetime.timedelta(seconds=600))
        manifest = [
            TensorSpec(d["name"], d["dtype"], tuple(d["shape"]))
            for d in json.loads(store.get(prefix + "manifest"))
        ]
        check_manifest(manifest, self.tensors())
        group = _new_group(
            PrefixStore(prefix + "group", store),
            rank,
            endpoint.receivers + 1,
            endpoint.backend,
            _RECEIVER_TIMEOUT,
        )
        logger.info(
            "joined broadcast generation %d as rank %d of %d",
            endpoint.generation,
            rank,
            endpoint.receivers + 1,
        )
        return group, rank, manifest

    def _serve_generation(self, endpoint: Endpoint) -> bool:
        """Receive versions until the trainer stops (True) or the generation breaks (raises)."""
        joined = self._join(endpoint)
        if joined is None:
            return False
        group, _rank, manifest = joined
        self.in_group = True
        try:
            return self._receive_versions(group, manifest, endpoint)
        finally:
            self.in_group = False

    def _receive_versions(self, group: Any, manifest: list[TensorSpec], endpoint: Endpoint) -> bool:
        device = (
            torch.device("cuda", torch.cuda.current_device())
            if endpoint.backend == "nccl"
            else torch.device("cpu")
        )
        while not self._stop.is_set():
            header = torch.zeros(3, dtype=torch.int64, device=device)
            _broadcast(group, header)
            version, command, _changed = (int(x) for x in header.cpu())
            if command == _STOP:
                return True
            mask = torch.zeros(len(manifest), dtype=torch.uint8, device=device)
            _broadcast(group, mask)
            with self.lock():
                self._receive_version(group, manifest, mask.cpu().tolist(), device)
                self.on_version(version)
            self.received.append(version)
        return True

    def _receive_version(
        self, group: Any, manifest: list[TensorSpec], mask: list[int], device: torch.device
    ) -> None:
        targets = self.tensors()
        for spec, changed in zip(manifest, mask, strict=True):
            if not changed:
                continue
            buffer = torch.empty(spec.shape, dtype=getattr(torch, spec.dtype), device=device)
            _broadcast(group, buffer)
            with torch.no_grad():
                targets[spec.name].copy_(buffer)
            self.tensors_received += 1


def model_tensors(model: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    """A model's parameters (tied ones once, under their first name) and persistent buffers, in order.

    The names and order both ends of a broadcast agree on (and what a HF checkpoint holds).
    """
    named: list[tuple[str, torch.Tensor]] = list(model.named_parameters())
    seen = {name for name, _ in named}
    persistent = model.state_dict(keep_vars=True)
    named += [
        (name, buffer) for name, buffer in model.named_buffers() if name in persistent and name not in seen
    ]
    return named


def check_manifest(manifest: Sequence[TensorSpec], tensors: dict[str, torch.Tensor]) -> None:
    """Every manifest tensor must exist on the replica with the same shape (dtypes may differ)."""
    problems = [
        f"{spec.name}: {'missing' if spec.name not in tensors else f'shape {tuple(tensors[spec.name].shape)} != {spec.shape}'}"
        for spec in manifest
        if spec.name not in tensors or tuple(tensors[spec.name].shape) != spec.shape
    ]
    if problems:
        raise ValueError(
            "the trainer's tensors do not match this replica's model: " + "; ".join(problems[:5])
        )


def version_counters(named: Iterable[tuple[str, torch.Tensor]]) -> dict[str, tuple[int, int]]:
    """(storage address, in-place version counter) of each tensor: it changes whenever the tensor is written.

    An optimiser step writes its parameters in place (the counter moves); a frozen parameter's
    stays put. A DTensor's own counter moves with its in-place updates (its local shard's does not).
    """
    from torch.distributed.tensor import DTensor

    counters = {}
    for name, tensor in named:
        local = tensor.to_local() if isinstance(tensor, DTensor) else tensor
        counters[name] = (int(local.untyped_storage().data_ptr()), int(tensor._version))
    return counters
