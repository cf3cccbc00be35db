"""Checkpoints of a trainer's whole training state with ``torch.distributed.checkpoint`` (DCP).

The one resume mechanism of every trainer, unsharded (one process: DCP without a process group)
or sharded (DDP ranks, FSDP2 shards): published weights carry no training state; a restarted
trainer is built from its newest published version and :func:`resume` restores the rest.

One checkpoint per saved step::

    {root}/step-00000012/
        .metadata, __0_0.distcp, ...   DCP: model and AdamW state, each rank writing its shards
        rng/rank-0.pt, ...             each rank's random generators (torch, CUDA, numpy, python)
        meta.json                      step, world size, parallelism, the caller's extra record
    {root}/.staging-step-00000013/     a checkpoint being written (renamed when complete)

What is saved is everything an optimiser step depends on: float32 parameters, AdamW moments and
per-parameter step counts, the engine's step counter and every rank's RNG state. The training
step itself is deterministic given those (no dropout, deterministic micro-batching), so resuming
with the same world size continues bit for bit where the kernels are deterministic. DCP stores
tensors by fully qualified name with their global shapes, so a checkpoint written by N ranks
(DDP or FSDP2) loads into M ranks or a single process; RNG states are then not restored (ranks
do not correspond), which the log says.

A checkpoint directory appears only by ``rename`` of a complete staging directory after every
rank has written, so a crash mid-save leaves the previous checkpoint as the newest.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import shutil
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import (
    get_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from torch.distributed.checkpoint.state_dict_loader import load as dcp_load
from torch.distributed.checkpoint.state_dict_saver import save as dcp_save

from lecritique.training.engine import HFTrainer
from lecritique.weights.store import fsync_tree

logger = logging.getLogger(__name__)

_STEP_DIR = re.compile(r"^step-(\d{8,})$")
_STAGING_DIR = re.compile(r"^\.staging-step-(\d{8,})$")
_META = "meta.json"


@dataclass(frozen=True)
class CheckpointMeta:
    """What ``meta.json`` records about one checkpoint."""

    step: int
    """Optimiser steps the trainer had taken."""
    world_size: int
    """Ranks that wrote it."""
    parallelism: str
    """``ddp`` or ``fsdp2`` (informational: either loads into either)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """The caller's record (e.g. the policy trainer's step response)."""


def _distributed() -> bool:
    return dist.is_available() and dist.is_initialized()


@contextmanager
def _single_process_quietly() -> Iterator[None]:
    """DCP warns that it assumes a single process when there is no process group; that is intended."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is disabled", category=UserWarning)
        yield


def _barrier() -> None:
    if _distributed():
        dist.barrier()


def _rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": np.random.get_state(),
        "python": random.getstate(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


class TrainerCheckpoints:
    """Save and restore a trainer's state under ``root``; both are collectives (every rank calls them)."""

    def __init__(self, root: str | Path, keep: int = 2, every: int = 1) -> None:
        if keep < 1 or every < 1:
            raise ValueError(f"keep and every must be >= 1, got {keep} and {every}")
        self.root = Path(root)
        self.keep = keep
        self.every = every
        """Steps between checkpoints (:meth:`save_if_due`)."""

    def steps(self) -> list[int]:
        """Steps of the complete checkpoints, ascending."""
        if not self.root.is_dir():
            return []
        found = []
        for entry in self.root.iterdir():
            match = _STEP_DIR.match(entry.name)
            if match and (entry / _META).is_file():
                found.append(int(match[1]))
        return sorted(found)

    def path(self, step: int) -> Path:
        return self.root / f"step-{step:08d}"

    def latest(self) -> tuple[CheckpointMeta, Path] | None:
        """The newest complete checkpoint and its directory, or None."""
        steps = self.steps()
        if not steps:
            return None
        path = self.path(steps[-1])
        return read_meta(path), path

    def save(self, trainer: HFTrainer, extra: dict[str, Any] | None = None) -> Path:
        """Write the trainer's state at its current step (``extra`` from rank 0 goes into meta.json)."""
        context = trainer.context
        step = trainer.steps
        final = self.path(step)
        staging = self.root / f".staging-{final.name}"
        if context.is_main:
            shutil.rmtree(staging, ignore_errors=True)
            staging.mkdir(parents=True)
        _barrier()
        model_state, optimizer_state = get_state_dict(trainer.engine.model, trainer.engine.optimizer)
        with _single_process_quietly():
            dcp_save(
                {"model": model_state, "optimizer": optimizer_state},
                checkpoint_id=staging,
                no_dist=not _distributed(),
            )
        (staging / "rng").mkdir(exist_ok=True)
        torch.save(_rng_state(), staging / "rng" / f"rank-{context.rank}.pt")
        _barrier()
        if context.is_main:
            meta = CheckpointMeta(
                step, context.world_size, trainer.engine.parallel.parallelism, dict(extra or {})
            )
            (staging / _META).write_text(json.dumps(meta.__dict__))
            fsync_tree(staging)
            if final.exists():  # the same step saved again (a retried step): replace it whole
                shutil.rmtree(final)
            os.rename(staging, final)
            self._prune()
            logger.info("checkpoint of step %d written to %s by %d ranks", step, final, context.world_size)
        _barrier()
        return final

    def save_if_due(self, trainer: HFTrainer, extra: dict[str, Any] | None = None) -> Path | None:
        """:meth:`save` when the trainer's step is a multiple of ``every`` (a collective then)."""
        return self.save(trainer, extra) if trainer.steps % self.every == 0 else None

    def load(self, trainer: HFTrainer, path: str | Path, *, weights: bool = True) -> CheckpointMeta:
        """Restore the optimiser state, step counter and (``weights``) parameters saved in ``path``.

        ``weights=False`` keeps the trainer's current parameters (e.g. a newer published version)
        and takes only the AdamW state and step counter.
        """
        source = Path(path)
        meta = read_meta(source)
        model, optimizer = trainer.engine.model, trainer.engine.optimizer
        # Templates with the trainer's own (possibly sharded) layout; DCP reshards into them.
        model_state, optimizer_state = get_state_dict(model, optimizer)
        state: dict[str, Any] = {"optimizer": optimizer_state}
        if weights:
            state["model"] = model_state
        with _single_process_quietly():
            dcp_load(state, checkpoint_id=source, no_dist=not _distributed())
        if weights:
            set_model_state_dict(model, model_state)
        set_optimizer_state_dict(model, optimizer, optimizer_state)
        trainer.engine.steps = meta.step
        rng_file = source / "rng" / f"rank-{trainer.context.rank}.pt"
        if meta.world_size == trainer.context.world_size and rng_file.is_file():
            _set_rng_state(torch.load(rng_file, weights_only=False))
        else:
            logger.info(
                "checkpoint written by %d ranks, loaded by %d: random generator states not restored",
                meta.world_size,
                trainer.context.world_size,
            )
        _barrier()
        return meta

    def _prune(self) -> None:
        steps = self.steps()
        for step in steps[: -self.keep]:
            shutil.rmtree(self.path(step), ignore_errors=True)
        newest = steps[-1] if steps else -1
        for entry in self.root.iterdir():
            match = _STAGING_DIR.match(entry.name)
            if match and int(match[1]) < newest:  # a save of an older step that never finished
                shutil.rmtree(entry, ignore_errors=True)


def read_meta(path: str | Path) -> CheckpointMeta:
    data = json.loads((Path(path) / _META).read_text())
    return CheckpointMeta(**data)


@dataclass(frozen=True)
class ResumeOutcome:
    """What :func:`resume` restored."""

    mode: str
    """``none`` (no checkpoint), ``exact`` (weights, AdamW state, step, RNG) or ``optimizer`` (AdamW state only)."""
    step: int
    """The trainer's step counter afterwards."""
    record: dict[str, Any] | None
    """The caller's record saved with a checkpoint newer than ``applied_step`` (to be adopted), else None."""


def resume(trainer: HFTrainer, checkpoints: TrainerCheckpoints, applied_step: int) -> ResumeOutcome:
    """Restore a restarted trainer, given the last step its caller knows was applied (a collective).

    The trainer was built from the newest published weights, which are those of ``applied_step``.
    A checkpoint of that step (or of a newer one, written just before the caller recorded it)
    restores everything; an older checkpoint (``checkpoint_every`` > 1) restores only the AdamW
    state, whose moments are then that many steps stale. The step counter always ends at the
    applied step, so later checkpoints are named after the caller's steps.
    """
    found = checkpoints.latest()
    if found is None:
        trainer.engine.steps = applied_step
        return ResumeOutcome("none", applied_step, None)
    meta, path = found
    if meta.step >= applied_step:
        checkpoints.load(trainer, path)
        record = meta.extra.get("record") if meta.step > applied_step else None
        logger.info("resumed the whole training state of step %d from %s", meta.step, path)
        return ResumeOutcome("exact", meta.step, record)
    checkpoints.load(trainer, path, weights=False)
    trainer.engine.steps = applied_step
    logger.warning(
        "newest checkpoint is of step %d but step %d was applied: weights from the published version, "
        "AdamW moments %d steps stale",
        meta.step,
        applied_step,
        applied_step - meta.step,
    )
    return ResumeOutcome("optimizer", applied_step, None)
