"""Throughput of every advantage estimator on 1M and 4M tokens (B = 1024).

Prints tokens/s per estimator and the 4M/1M time ratio (linear cost growth means ~4; the
target is <= 4.4). Both sizes are measured in the same run, best of several repeats, each
starting from a cold last-level cache: in training every batch is fresh data, and a 1M-token
batch (~10 MB of arrays) would otherwise stay cached between repeats while a 4M-token one
(~40 MB) cannot, which measures the cache rather than the estimator.

    make bench-advantages        # or: python bench/advantages.py [--repeats N]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from rich.console import Console
from rich.table import Table

from lecritique.advantages import AdvantageBatch, estimator_names, get_estimator

BATCH = 1024
GROUP = 8


def make_batch(tokens: int, rng: np.random.Generator) -> AdvantageBatch:
    length = tokens // BATCH
    lengths = rng.integers(length // 2, length + 1, BATCH)
    mask = np.arange(length)[None, :] < lengths[:, None]
    step_ids = np.minimum(np.arange(length)[None, :] // 64, 15).repeat(BATCH, axis=0)
    return AdvantageBatch(
        rewards=rng.integers(0, 2, BATCH).astype(np.float32),
        group_ids=np.repeat(np.arange(BATCH // GROUP), GROUP),
        mask=mask,
        values=rng.random((BATCH, length), dtype=np.float32),
        step_ids=step_ids,
    )


# Several times the last-level cache of the machines this runs on (32 MiB L3 here).
_EVICTION_BUFFER = np.zeros(128 << 20, dtype=np.uint8)


def evict_caches() -> None:
    """Stream a buffer four times the L3 size through the caches, so the batch is no longer cached."""
    np.add(_EVICTION_BUFFER, 1, out=_EVICTION_BUFFER)


def best_time(name: str, batch: AdvantageBatch, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        estimator = get_estimator(name)
        evict_caches()
        start = time.perf_counter()
        estimator.compute(batch)
        estimator.update(batch)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    small, large = make_batch(1 << 20, rng), make_batch(1 << 22, rng)
    table = Table(
        title=f"advantage estimators, B={BATCH} (compute + update, cold cache, best of {args.repeats})"
    )
    for column in ("estimator", "1M tokens/s", "4M tokens/s", "4M/1M time ratio", "linear (<= 4.4)"):
        table.add_column(column, justify="right")
    for name in estimator_names():
        t_small, t_large = best_time(name, small, args.repeats), best_time(name, large, args.repeats)
        ratio = t_large / t_small
        table.add_row(
            name,
            f"{small.mask.size / t_small:,.0f}",
            f"{large.mask.size / t_large:,.0f}",
            f"{ratio:.2f}",
            "yes" if ratio <= 4.4 else "NO",
        )
    Console().print(table)


if __name__ == "__main__":
    main()
