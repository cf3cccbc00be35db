"""Per-run figures, their mean and spread across seeds, and paired differences to a reference.

Definitions (stated in study.md too):
- final reward: mean training reward of the last ``window`` steps of a run, then mean and
  sample std (ddof 1) across seeds (Le Critique Fig. 7);
- final held-out success: the last ``eval_success`` of a run;
- EV, second half: mean critic explained variance over the steps after half the run;
- policy steps per minute: steps between the first and last row over the wall time between them
  (the critic warm-up before the first step is excluded);
- paired difference: per seed, variant minus reference; the mean over seeds with a 95% CI from
  Student's t on the per-seed differences (n - 1 degrees of freedom) and a percentile bootstrap
  over seeds (from 5 seeds on: with fewer, resamples are too few to mean anything). With one
  seed there is no interval (NaN).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

SERIES = ("reward_mean", "eval_success", "value_explained_variance", "tether_rho")
"""Per-step metrics kept per run (study.json) and drawn per variant (study.png)."""
FIGURES = (
    "final_reward", "final_eval_success", "ev_second_half", "rho_first", "rho_final", "critic_updates", "steps_per_minute",
)
"""Per-run figures aggregated across seeds."""
COMPARED = ("final_reward", "final_eval_success", "ev_second_half")
"""Figures compared with the reference variant."""


BOOTSTRAP_MIN_SEEDS = 5
"""Below this many seeds a bootstrap over seeds has too few distinct resamples to mean anything (n/a)."""
T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131)
"""Student t 0.975 quantiles for 1..15 degrees of freedom (beyond: 2.0, within 0.14 of the truth)."""


def t975(df: int) -> float:
    return T975[df - 1] if df <= len(T975) else 2.0


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def series(rows: Sequence[Mapping[str, Any]], key: str) -> tuple[list[int], list[float]]:
    """(steps, values) of ``key`` where it is a finite number."""
    pairs = [(int(row["step"]), float(row[key])) for row in rows if _finite(row.get(key))]
    return [s for s, _ in pairs], [v for _, v in pairs]


def run_figures(rows: Sequence[Mapping[str, Any]], window: int) -> dict[str, float]:
    """The figures of one run (NaN where the run has no such metric)."""
    nan = float("nan")
    _, reward = series(rows, "reward_mean")
    _, success = series(rows, "eval_success")
    ev_steps, ev = series(rows, "value_explained_variance")
    _, rho = series(rows, "tether_rho")
    half = rows[-1]["step"] / 2 if rows else 0
    ev_late = [v for s, v in zip(ev_steps, ev, strict=True) if s > half]
    # The critic version the last step used counts its published updates (warm-up included): its
    # training budget, which a slower critic (a longer privileged input) spends more slowly.
    versions = [version for version in series(rows, "value_version")[1] if version >= 0]
    timed = [row for row in rows if _finite(row.get("seconds"))]
    minutes = (timed[-1]["seconds"] - timed[0]["seconds"]) / 60 if len(timed) > 1 else 0.0
    return {
        "final_reward": float(np.mean(reward[-window:])) if reward else nan,
        "final_eval_success": success[-1] if success else nan,
        "ev_second_half": float(np.mean(ev_late)) if ev_late else nan,
        "rho_first": rho[0] if rho else nan,
        "rho_final": rho[-1] if rho else nan,
        "critic_updates": float(versions[-1]) if versions else nan,
        "steps_per_minute": (timed[-1]["step"] - timed[0]["step"]) / minutes if minutes > 0 else nan,
    }


def run_summary(rows: Sequence[Mapping[str, Any]], window: int) -> dict[str, Any]:
    """A run's figures and its per-step series (study.json)."""
    return {
        "steps": int(rows[-1]["step"]) if rows else 0,
        "figures": run_figures(rows, window),
        "series": {key: dict(zip(("step", "value"), series(rows, key), strict=True)) for key in SERIES},
    }


def mean_std(values: Sequence[float]) -> dict[str, float]:
    """Mean and sample std (ddof 1; 0 for a single value) of the finite values, and their count."""
    finite = np.array([v for v in values if math.isfinite(v)], dtype=float)
    if finite.size == 0:
        return {"mean": float("nan"), "std": float("nan"), "n": 0}
    std = float(finite.std(ddof=1)) if finite.size > 1 else 0.0
    return {"mean": float(finite.mean()), "std": std, "n": int(finite.size)}


def paired_difference(diffs: Sequence[float], *, samples: int, seed: int = 0) -> dict[str, float]:
    """Mean of per-seed differences, its t interval and a percentile-bootstrap interval (95%)."""
    d = np.array([x for x in diffs if math.isfinite(x)], dtype=float)
    nan = float("nan")
    if d.size == 0:
        return {"mean": nan, "t_low": nan, "t_high": nan, "boot_low": nan, "boot_high": nan, "n": 0}
    mean = float(d.mean())
    if d.size < 2:
        return {"mean": mean, "t_low": nan, "t_high": nan, "boot_low": nan, "boot_high": nan, "n": 1}
    half = float(t975(d.size - 1) * d.std(ddof=1) / math.sqrt(d.size))
    if d.size < BOOTSTRAP_MIN_SEEDS:
        return {"mean": mean, "t_low": mean - half, "t_high": mean + half, "boot_low": nan, "boot_high": nan, "n": int(d.size)}
    rng = np.random.default_rng(seed)
    boots = d[rng.integers(0, d.size, size=(samples, d.size))].mean(axis=1)
    low, high = np.percentile(boots, [2.5, 97.5])
    return {"mean": mean, "t_low": mean - half, "t_high": mean + half, "boot_low": float(low), "boot_high": float(high), "n": int(d.size)}


def aggregate(
    runs: Mapping[str, Mapping[int, Mapping[str, Any]]], reference: str, *, bootstrap_samples: int
) -> dict[str, Any]:
    """Per variant: each figure's mean/std across seeds; per non-reference variant: paired differences.

    ``runs[variant][seed]`` is a :func:`run_summary`.
    """
    variants = {}
    for name, by_seed in runs.items():
        variants[name] = {fig: mean_std([s["figures"][fig] for s in by_seed.values()]) for fig in FIGURES}
    differences: dict[str, dict[str, dict[str, float]]] = {}
    ref = runs.get(reference, {})
    for name, by_seed in runs.items():
        if name == reference:
            continue
        common = sorted(set(by_seed) & set(ref))
        differences[name] = {
            fig: paired_difference(
                [by_seed[s]["figures"][fig] - ref[s]["figures"][fig] for s in common], samples=bootstrap_samples
            )
            for fig in COMPARED
        }
    return {"variants": variants, "differences": differences}


def curve(by_seed: Mapping[int, Mapping[str, Any]], key: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Steps, mean and std across seeds of one per-step series (steps every seed has)."""
    tables = [dict(zip(s["series"][key]["step"], s["series"][key]["value"], strict=True)) for s in by_seed.values()]
    steps = sorted(set.intersection(*(set(t) for t in tables))) if tables else []
    values = np.array([[t[step] for step in steps] for t in tables], dtype=float).reshape(len(tables), len(steps))
    if not steps:
        return np.array([]), np.array([]), np.array([])
    return np.array(steps), values.mean(axis=0), values.std(axis=0, ddof=1) if len(tables) > 1 else np.zeros(len(steps))
