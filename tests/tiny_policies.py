"""The suite's trained tiny policies: built once per machine, one build of each at a time.

Each comes from the product's own cache (``lecritique.tinybuild``, keyed by the build's config and
the code that shapes it), as ``lecritique run`` gets its policy: a warm machine builds nothing, and
a fresh one builds each policy once. An exclusive lock on a file in the cache (one per config)
makes the second of two pytest-xdist workers that need a policy at the same time wait for the
first one's build and take it from the cache, instead of training the same model beside it (which
doubled the minutes and slowed every other test on two cores). Before, the few-step policies were
built into a temporary directory by every test process, on every run.
"""

from __future__ import annotations

import fcntl
import hashlib
from functools import cache
from pathlib import Path

from lecritique.tinybuild import TinyBuildConfig, build_tiny_model
from lecritique.tinybuild.build import default_cache_dir


def built(config: TinyBuildConfig) -> Path:
    """The cached tiny model of ``config``; built first if missing, while other processes that need
    the same config wait (one lock per config: a build of another one does not hold them up)."""
    root = default_cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    key = hashlib.sha256(config.model_dump_json().encode()).hexdigest()[:16]
    with open(root / f".suite-build-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return build_tiny_model(config, show_progress=False).path


PIPELINE = TinyBuildConfig(
    task="sudoku-mini",
    batch_size=32,
    max_steps=320,
    eval_every=10_000,
    eval_tasks=16,
    validation_tasks=16,
    # Never the time guard: a build cut short by a loaded machine is a weaker policy (the chaos
    # test's reward rise depends on it) and is not cached, so every test process would rebuild.
    max_minutes=60,
)
"""320 warm-start steps of 32 demonstrations (~1.5 min on 2 cores): sampled at temperature 1 it
solves ~75% of one-cell and ~40% of two-cell puzzles (128 train tasks each), so RL has both signal
and room; the chaos test asserts its reward rises. (80 steps of 128, the same examples, solved ~2%
of one-cell puzzles and did not learn within a test.)"""

QUICK_SUDOKU = TinyBuildConfig(
    task="sudoku-mini",
    max_steps=60,
    batch_size=32,
    eval_every=60,
    eval_tasks=8,
    validation_tasks=8,
    train_pool=256,
    max_minutes=60,  # the same model however loaded the machine is (the 6-minute guard would cut it short)
)
"""A few SFT steps (seconds): for tests of the platform, not of RL."""

QUICK_ARITHMETIC = QUICK_SUDOKU.model_copy(update={"task": "arithmetic"})
"""A few SFT steps on arithmetic: for the dataset platform tests, not for RL."""


@cache
def pipeline_policy() -> Path:
    """The tiny sudoku policy of the pipeline, chaos and RL tests (:data:`PIPELINE`)."""
    return built(PIPELINE)


@cache
def quick_policy() -> Path:
    """A barely trained sudoku-mini policy (:data:`QUICK_SUDOKU`)."""
    return built(QUICK_SUDOKU)


@cache
def quick_arithmetic_policy() -> Path:
    """A barely trained arithmetic policy (:data:`QUICK_ARITHMETIC`)."""
    return built(QUICK_ARITHMETIC)
