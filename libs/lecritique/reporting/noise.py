"""What a run, or a few runs per arm, can say: the noise behind ``lecritique compare``'s numbers.

- ``window_standard_error``: the standard error of the mean of a run's last rewards (the final
  window). Consecutive steps' rewards are correlated (the same policy, changing slowly), so the
  plain s/sqrt(n) is too small; the estimate inflates it by the AR(1) factor
  sqrt((1 + r1) / (1 - r1)), r1 the lag-1 autocorrelation of the window's rewards (taken as 0
  when negative, capped at 0.9: ten points estimate r1 roughly, and the cap keeps one lucky run
  from an unbounded interval). It is the noise of one run's steps, a lower bound on the noise
  between seeds, which also moves the starting point and the whole trajectory;
- ``binomial_standard_error``: of a held-out success rate over ``tasks`` tasks, sqrt(p(1-p)/n);
- ``paired_arms``: runs of two arms paired by seed (where every run records one and both arms
  hold the same seeds), else in the order given; the per-pair differences' mean with a 95%
  interval from Student's t (exact quantiles, ``lecritique.study.summary``) and its p-value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lecritique.study.summary import paired_difference

MAX_LAG1 = 0.9
"""The largest lag-1 autocorrelation the standard error is inflated for (see the module docstring)."""


def lag1_autocorrelation(values: Sequence[float] | np.ndarray) -> float:
    """The lag-1 sample autocorrelation (NaN with fewer than 3 values or no variance)."""
    array = np.asarray(values, dtype=np.float64)
    if array.size < 3:
        return float("nan")
    centred = array - array.mean()
    denominator = float(np.dot(centred, centred))
    if denominator == 0.0:
        return float("nan")
    return float(np.dot(centred[1:], centred[:-1]) / denominator)


def window_standard_error(values: Sequence[float]) -> float:
    """The autocorrelation-inflated standard error of the mean of ``values`` (NaN below 2 values)."""
    array = np.asarray(values, dtype=np.float64)
    if array.size < 2:
        return float("nan")
    plain = float(array.std(ddof=1) / math.sqrt(array.size))
    r1 = lag1_autocorrelation(array)
    r1 = 0.0 if not math.isfinite(r1) else min(max(r1, 0.0), MAX_LAG1)
    return plain * math.sqrt((1.0 + r1) / (1.0 - r1))


def binomial_standard_error(success: float, tasks: int | None) -> float:
    """The standard error of a success rate measured on ``tasks`` tasks (NaN when unknown)."""
    if tasks is None or tasks < 1 or not math.isfinite(success):
        return float("nan")
    return math.sqrt(max(success * (1.0 - success), 0.0) / tasks)


@dataclass(frozen=True)
class Pairing:
    """How two arms' runs were paired."""

    pairs: list[tuple[int, int]]
    """(index in arm A, index in arm B) of every pair."""
    by_seed: bool
    """True when paired by the seed the runs' specs record; False: in the order given."""
    why_not_by_seed: str
    """Why the order given was used (empty when paired by seed)."""


def pair_runs(seeds_a: Sequence[int | None], seeds_b: Sequence[int | None]) -> Pairing:
    """Pair the runs of two arms of equal size: by seed when every run records one, each arm's
    seeds are distinct and both arms hold the same seeds; else in the order given."""
    if len(seeds_a) != len(seeds_b):
        raise ValueError(
            f"the arms have {len(seeds_a)} and {len(seeds_b)} runs: a paired comparison needs as many runs in each"
        )
    order = [(index, index) for index in range(len(seeds_a))]
    if any(seed is None for seed in (*seeds_a, *seeds_b)):
        return Pairing(order, False, "a run records no seed (no spec.json)")
    if len(set(seeds_a)) < len(seeds_a) or len(set(seeds_b)) < len(seeds_b):
        return Pairing(order, False, "an arm holds two runs of the same seed")
    if set(seeds_a) != set(seeds_b):
        return Pairing(order, False, f"the arms' seeds differ ({sorted(seeds_a)} vs {sorted(seeds_b)})")  # type: ignore[type-var]
    position = {seed: index for index, seed in enumerate(seeds_b)}
    return Pairing([(index, position[seed]) for index, seed in enumerate(seeds_a)], True, "")


def paired_difference_cell(
    values_a: Sequence[float], values_b: Sequence[float], pairing: Pairing
) -> dict[str, float]:
    """Mean of A - B over the pairs, its 95% t interval (n - 1 df) and p; pairs with an n/a are left out."""
    diffs = [values_a[a] - values_b[b] for a, b in pairing.pairs]
    return paired_difference(diffs, samples=2000)
