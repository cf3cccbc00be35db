"""Content-hash train/eval splits and seed derivation shared by every environment.

A task belongs to the eval split when a deterministic hash of its canonical content (the puzzle,
the question, the solution grid, ...) falls below ``eval_fraction``. Seeds never decide the split:
generators such as reasoning-gym's seed item ``i`` with ``Random(seed + i)``, so different seeds
produce the same puzzles, and small puzzle spaces (4x4 Sudoku) repeat content across any seeds.
Sampling draws candidates deterministically from a seed and keeps only those of the wanted split.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TypeVar

from lecritique.envs.base import Split

T = TypeVar("T")

_HASH_SCALE = float(2**64)


def content_digest(*parts: object) -> str:
    """Hex SHA-256 of the parts joined with NUL bytes (stable across processes and platforms)."""
    hasher = hashlib.sha256()
    for part in parts:
        hasher.update(str(part).encode("utf-8", "surrogatepass"))
        hasher.update(b"\0")
    return hasher.hexdigest()


def derive_seed(*parts: object) -> int:
    """A 63-bit seed derived from the parts (for per-item generators and RNGs)."""
    return int(content_digest("seed", *parts)[:16], 16) >> 1


def split_of(namespace: str, content: str, eval_fraction: float) -> Split:
    """The split that ``content`` belongs to; the same content always lands in the same split."""
    position = int(content_digest("split", namespace, content)[:16], 16) / _HASH_SCALE
    return "eval" if position < eval_fraction else "train"


def task_id(namespace: str, content: str) -> str:
    """A stable id derived from the task's content (not from the seed that produced it)."""
    return f"{namespace}-{content_digest('task', namespace, content)[:16]}"


def sample_split(
    candidate: Callable[[int], tuple[str, T] | None],
    n: int,
    split: Split,
    namespace: str,
    eval_fraction: float,
    max_attempts: int | None = None,
) -> list[T]:
    """The first ``n`` candidates (index 0, 1, 2, ...) whose split key lands in ``split``.

    ``candidate(i)`` returns ``(split_key, item)`` or ``None`` for an index it rejects. Raises
    ``RuntimeError`` naming the split when too few candidates of that split exist (e.g. a task
    space smaller than ``n / eval_fraction``).
    """
    if split not in ("train", "eval"):
        raise ValueError(f"split must be 'train' or 'eval', got {split!r}")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    share = eval_fraction if split == "eval" else 1.0 - eval_fraction
    limit = max_attempts if max_attempts is not None else 1000 + int(50 * n / max(share, 1e-6))
    items: list[T] = []
    index = 0
    while len(items) < n:
        if index >= limit:
            raise RuntimeError(
                f"{namespace}: found only {len(items)} of {n} {split} tasks in {limit} candidates; "
                f"the task space may be too small for this eval_fraction ({eval_fraction})"
            )
        drawn = candidate(index)
        index += 1
        if drawn is None:
            continue
        key, item = drawn
        if split_of(namespace, key, eval_fraction) == split:
            items.append(item)
    return items
