"""What a tiny build is: the named tasks and every setting that determines a tiny model."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from lecritique.models.tiny_arch import TinyArchitecture


class TinyTask(BaseModel):
    """A named task for tiny models: an environment configuration and warm-start defaults."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    environment: str
    """Environment name for ``get_environment``."""
    environment_config: dict[str, Any] = Field(default_factory=dict)
    """Keyword settings of the environment."""
    stop_at_success: float = Field(gt=0.0, le=1.0)
    """Validation success (sampled at temperature 1) at which the warm start stops."""
    max_steps: int = Field(ge=1)
    """Most optimizer steps of the warm start."""


TINY_TASKS: dict[str, TinyTask] = {
    # ~30-40% success leaves RL both signal and room (the demo must lift it by >= 15 points).
    "sudoku-mini": TinyTask(
        environment="sudoku",
        environment_config={"size": 4, "empty_cells": [3, 4]},
        stop_at_success=0.35,
        max_steps=3000,
    ),
    # Single-turn integer arithmetic ("37+45-12="); a tiny model learns it slowly, so this build
    # usually ends at its step budget (~3 min on 2 cores) well below the threshold.
    "arithmetic": TinyTask(
        environment="arithmetic",
        environment_config={},
        stop_at_success=0.35,
        max_steps=1500,
    ),
}


class TinyBuildConfig(BaseModel):
    """Everything that determines a tiny model (plus two guards that do not)."""

    model_config = ConfigDict(extra="forbid")
    task: str
    """Name in ``TINY_TASKS``."""
    seed: int = 0
    """Seed of the initialisation, the task samples, the demonstrations and the evaluations."""
    architecture: TinyArchitecture = Field(default_factory=TinyArchitecture)
    """Model shape."""
    batch_size: int = Field(default=32, ge=1)
    """Demonstration episodes per optimizer step (small batches learn more per example here:
    at equal examples seen, batch 32 reached 2% validation success where batch 128 had 0%)."""
    learning_rate: float = Field(default=1e-3, gt=0)
    """Peak AdamW learning rate (>= 3e-4 is fine for SFT; RL on these models wants ~1e-4)."""
    warmup_steps: int = Field(default=20, ge=0)
    """Linear learning-rate warm-up."""
    grad_clip: float = Field(default=1.0, gt=0)
    """Gradient-norm clip."""
    max_steps: int | None = Field(default=None, ge=1)
    """Step budget; None uses the task's."""
    stop_at_success: float | None = Field(default=None, gt=0.0, le=1.0)
    """Early-stop threshold on validation success; None uses the task's."""
    train_pool: int = Field(default=2048, ge=1)
    """Training tasks whose demonstrations are sampled (fresh random orders every time)."""
    validation_tasks: int = Field(default=128, ge=1)
    """Train-split tasks (another seed) whose success decides early stopping."""
    eval_every: int = Field(default=100, ge=1)
    """Steps between validation runs."""
    eval_tasks: int = Field(default=256, ge=1)
    """Held-out eval-split tasks of the final report."""
    max_minutes: float | None = Field(default=None, gt=0)
    """Wall-clock limit on training (not part of the cache key). None, the default: no limit, the
    build ends at its step budget or success threshold however loaded the machine is (a
    sudoku-mini build takes ~3-5 min on 2 idle cores, longer beside other work), so a model is the
    same build wherever it is made. A build cut by a limit is refused (``TinyBuildCut``): never
    cached, never handed out as the model."""

    def tiny_task(self) -> TinyTask:
        if self.task not in TINY_TASKS:
            raise ValueError(f"unknown tiny task {self.task!r}; known: {', '.join(sorted(TINY_TASKS))}")
        return TINY_TASKS[self.task]

    def resolved(self) -> TinyBuildConfig:
        """This config with the task's defaults filled in."""
        task = self.tiny_task()
        return self.model_copy(
            update={
                "max_steps": self.max_steps if self.max_steps is not None else task.max_steps,
                "stop_at_success": self.stop_at_success
                if self.stop_at_success is not None
                else task.stop_at_success,
            }
        )


@dataclass(frozen=True)
class TinyBuild:
    """Where a build lives and how it measured."""

    path: Path
    report: dict[str, Any]
    cached: bool
    """True when the model came from the cache without training."""
