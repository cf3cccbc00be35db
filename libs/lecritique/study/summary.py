"""Per-run figures, their mean and spread across seeds, and paired differences to a reference.

Definitions (stated in study.md too):
- final reward: mean training reward of the last ``window`` steps of a run (the study's
  ``final_fraction`` of its steps, by default the last 25%), then mean and sample std (ddof 1)
  across seeds (Le Critique Fig. 7);
- final held-out success: the last ``eval_success`` of a run after step 0 (step 0's row evaluates
  the initial policy);
- ev_mse / ceiling: the ceiling probe's, held-out states at every position (set per run from the
  probe, :func:`lecritique.study.ceiling_table.with_ceiling_figures`);
- ev_var, second half: mean in-run critic explained variance (1 - Var(R - V) / Var(R) on the
  training batches, the metrics' ``value_explained_variance``) over the steps after half the run;
  not the ceiling probe's MSE-based ``ev_mse``;
- critic updates per step (figure ``updates_per_step``, the achieved count, not the setting
  ``critic.updates_per_step``): the mean of the metrics field ``critic_updates_done`` (updates the
  critic made between the versions that scored consecutive steps; ``critic_updates_per_step`` in
  metrics written before it was renamed) where the run recorded it;
- fresh trajectories per update: trajectories a policy step produces (tasks x group size) over
  the critic updates per step;
- policy steps per minute: steps between the first and last row over the wall time between them
  (the critic warm-up before the first step is excluded);
- paired difference of a declared comparison (a, b): per seed, a minus b; the mean over seeds
  with a 95% CI from Student's t on the per-seed differences (n - 1 degrees of freedom, exact
  quantiles), its two-sided p-value, and beside it a percentile bootstrap over seeds (from 5 seeds
  on; 5 seeds have only 126 distinct resamples, so it is never the headline). With one seed there
  is no interval (NaN). A seed whose figure is n/a in either variant is left out and counted
  (``n_na``). The p-values of every test the study declares (each comparison on each compared
  figure) are Holm-corrected together (family-wise error 0.05).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

SERIES = ("reward_mean", "eval_success", "value_explained_variance", "tether_rho", "seconds")
"""Per-step metrics kept per run (study.json) and drawn per variant (study.png); ``seconds`` (the
run's wall time at each step) draws the others against wall time."""
FIGURES = (
    "final_reward",
    "final_eval_success",
    "ev_var_second_half",
    "rho_first",
    "rho_final",
    "critic_updates",
    "updates_per_step",
    "trajectories_per_update",
    "steps_per_minute",
)
"""Per-run figures aggregated across seeds."""
COMPARED = ("final_reward", "final_eval_success", "ev_var_second_half")
"""Figures a declared comparison tests unless the study names its ``metrics``."""
COMPARABLE = (*COMPARED, "ev_mse_over_ceiling")
"""Figures a study may name in ``metrics``."""


BOOTSTRAP_MIN_SEEDS = 5
"""Below this many seeds a bootstrap over seeds has too few distinct resamples to mean anything (n/a)."""


def t_quantile(q: float, df: int) -> float:
    """Student t quantile ``q`` (0.5 < q < 1) with ``df`` degrees of freedom, exact to 1e-10: the
    root of the two-sided p-value :func:`t_test_p` = 2 (1 - q), by bisection."""
    if not 0.5 < q < 1 or df < 1:
        raise ValueError(f"t_quantile needs 0.5 < q < 1 and df >= 1, got q={q}, df={df}")
    target = 2.0 * (1.0 - q)
    low, high = 0.0, 1.0
    while t_test_p(high, df) > target:
        low, high = high, 2.0 * high
    while high - low > 1e-12 * max(1.0, high):
        middle = (low + high) / 2
        low, high = (middle, high) if t_test_p(middle, df) > target else (low, middle)
    return (low + high) / 2


def t975(df: int) -> float:
    """The 0.975 quantile of Student's t (the half-width factor of a 95% interval)."""
    return t_quantile(0.975, df)


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


UPDATES_DONE_BEFORE_RENAME = "critic_updates_per_step"
"""The metrics key of ``critic_updates_done`` in runs recorded before it was renamed (the name was
also the setting's)."""


def series(rows: Sequence[Mapping[str, Any]], key: str) -> tuple[list[int], list[float]]:
    """(steps, values) of ``key`` where it is a finite number."""
    pairs = [(int(row["step"]), float(row[key])) for row in rows if _finite(row.get(key))]
    return [s for s, _ in pairs], [v for _, v in pairs]


def run_figures(
    rows: Sequence[Mapping[str, Any]], window: int, trajectories_per_step: float = float("nan")
) -> dict[str, float]:
    """The figures of one run (NaN where the run has no such metric)."""
    nan = float("nan")
    _, reward = series(rows, "reward_mean")
    # After training: the row of step 0 evaluates the initial policy.
    success = [v for s, v in zip(*series(rows, "eval_success"), strict=True) if s >= 1]
    ev_steps, ev = series(rows, "value_explained_variance")
    _, rho = series(rows, "tether_rho")
    half = rows[-1]["step"] / 2 if rows else 0
    ev_late = [v for s, v in zip(ev_steps, ev, strict=True) if s > half]
    # The critic version the last step used counts its published updates (warm-up included): its
    # training budget, which a slower critic (a longer privileged input) spends more slowly.
    versions = [version for version in series(rows, "value_version")[1] if version >= 0]
    done = series(rows, "critic_updates_done")[1] or series(rows, UPDATES_DONE_BEFORE_RENAME)[1]
    updates_done = float(np.mean(done)) if done else nan
    # Policy steps only: the row of step 0 (the initial held-out evaluation) precedes the warm-up.
    timed = [row for row in rows if row["step"] >= 1 and _finite(row.get("seconds"))]
    minutes = (timed[-1]["seconds"] - timed[0]["seconds"]) / 60 if len(timed) > 1 else 0.0
    return {
        "final_reward": float(np.mean(reward[-window:])) if reward else nan,
        "final_eval_success": success[-1] if success else nan,
        "ev_var_second_half": float(np.mean(ev_late)) if ev_late else nan,
        "rho_first": rho[0] if rho else nan,
        "rho_final": rho[-1] if rho else nan,
        "critic_updates": float(versions[-1]) if versions else nan,
        "updates_per_step": updates_done,
        "trajectories_per_update": trajectories_per_step / updates_done if updates_done > 0 else nan,
        "steps_per_minute": (timed[-1]["step"] - timed[0]["step"]) / minutes if minutes > 0 else nan,
    }


def run_summary(
    rows: Sequence[Mapping[str, Any]], window: int, trajectories_per_step: float = float("nan")
) -> dict[str, Any]:
    """A run's figures and its per-step series (study.json)."""
    return {
        "steps": int(rows[-1]["step"]) if rows else 0,
        "figures": run_figures(rows, window, trajectories_per_step),
        "series": {key: dict(zip(("step", "value"), series(rows, key), strict=True)) for key in SERIES},
    }


def mean_std(values: Sequence[float]) -> dict[str, float]:
    """Mean and sample std (ddof 1; 0 for a single value) of the finite values, their count and
    how many values were n/a."""
    finite = np.array([v for v in values if math.isfinite(v)], dtype=float)
    missing = len(values) - int(finite.size)
    if finite.size == 0:
        return {"mean": float("nan"), "std": float("nan"), "n": 0, "n_na": missing}
    std = float(finite.std(ddof=1)) if finite.size > 1 else 0.0
    return {"mean": float(finite.mean()), "std": std, "n": int(finite.size), "n_na": missing}


def paired_difference(diffs: Sequence[float], *, samples: int, seed: int = 0) -> dict[str, float]:
    """Mean of per-seed differences, its t interval and a percentile-bootstrap interval (95%)."""
    d = np.array([x for x in diffs if math.isfinite(x)], dtype=float)
    nan = float("nan")
    cell = {
        "mean": nan,
        "t_low": nan,
        "t_high": nan,
        "p": nan,
        "boot_low": nan,
        "boot_high": nan,
        "n": int(d.size),
        "n_na": len(diffs) - int(d.size),
    }
    if d.size == 0:
        return cell
    cell["mean"] = mean = float(d.mean())
    if d.size < 2:
        return cell
    se = float(d.std(ddof=1) / math.sqrt(d.size))
    half = t975(d.size - 1) * se
    # Every seed the same difference: a p of 0 if it is not zero (any test would say so), else 1.
    p = t_test_p(mean / se, d.size - 1) if se > 0 else (0.0 if mean != 0 else 1.0)
    cell.update(t_low=mean - half, t_high=mean + half, p=p)
    if d.size >= BOOTSTRAP_MIN_SEEDS:
        rng = np.random.default_rng(seed)
        boots = d[rng.integers(0, d.size, size=(samples, d.size))].mean(axis=1)
        low, high = np.percentile(boots, [2.5, 97.5])
        cell.update(boot_low=float(low), boot_high=float(high))
    return cell


def t_test_p(t: float, df: int) -> float:
    """Two-sided p-value of Student's t with ``df`` degrees of freedom: I_{df/(df+t^2)}(df/2, 1/2)."""
    if math.isinf(t):
        return 0.0
    return regularized_beta(df / (df + t * t), df / 2, 0.5)


def regularized_beta(x: float, a: float, b: float) -> float:
    """I_x(a, b) by its continued fraction (Lentz's method; Numerical Recipes 6.4)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    if x > (a + 1) / (a + b + 2):
        return 1.0 - regularized_beta(1.0 - x, b, a)
    front = (
        math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
        / a
    )
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 300):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= c * d
        if abs(c * d - 1.0) < 1e-14:
            break
    return front * result


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (NaN stays NaN and does not count in the family)."""
    finite = sorted((p, i) for i, p in enumerate(p_values) if math.isfinite(p))
    adjusted = [float("nan")] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(finite):
        running = max(running, min(1.0, (len(finite) - rank) * p))
        adjusted[i] = running
    return adjusted


def aggregate(
    runs: Mapping[str, Mapping[int, Mapping[str, Any]]],
    comparisons: Sequence[tuple[str, str]],
    *,
    bootstrap_samples: int,
    figures: Sequence[str] = COMPARED,
) -> dict[str, Any]:
    """Per variant: each figure's mean/std across seeds; per declared comparison (a, b): the paired
    differences a - b of every compared figure, with p-values Holm-adjusted over all of them.

    ``runs[variant][seed]`` is a :func:`run_summary`. ``differences["a vs b"][figure]``;
    ``holm_tests``: how many tests had a p-value (the Holm family).
    """
    nan = float("nan")
    variants = {}
    for name, by_seed in runs.items():
        variants[name] = {
            fig: mean_std([s["figures"].get(fig, nan) for s in by_seed.values()])
            for fig in (*FIGURES, *(f for f in figures if f not in FIGURES))
        }
    differences: dict[str, dict[str, dict[str, float]]] = {}
    for a, b in comparisons:
        first, second = runs.get(a, {}), runs.get(b, {})
        common = sorted(set(first) & set(second))
        differences[f"{a} vs {b}"] = {
            fig: paired_difference(
                [first[s]["figures"].get(fig, nan) - second[s]["figures"].get(fig, nan) for s in common],
                samples=bootstrap_samples,
            )
            for fig in figures
        }
    cells = [cell for by_figure in differences.values() for cell in by_figure.values()]
    for cell, adjusted in zip(cells, holm([c["p"] for c in cells]), strict=True):
        cell["p_holm"] = adjusted
    return {
        "variants": variants,
        "differences": differences,
        "comparisons": [list(pair) for pair in comparisons],
        "figures": list(figures),
        "holm_tests": sum(1 for c in cells if math.isfinite(c["p"])),
    }


def curve_against_minutes(
    by_seed: Mapping[int, Mapping[str, Any]], key: str, points: int = 60, window: int = 1
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Wall minutes, mean and std across seeds of one per-step series against the run's wall time.

    Each seed's series (a trailing moving average of ``window`` steps first) is read at its steps'
    wall times and interpolated onto one grid of ``points`` minutes, from the latest first point to
    the earliest last one of the seeds (where every seed has data): arms that step at different
    paces are compared at equal wall time, not at equal steps."""
    tracks = []
    for summary in by_seed.values():
        by_step = dict(zip(summary["series"][key]["step"], summary["series"][key]["value"], strict=True))
        timed = summary["series"].get("seconds", {"step": [], "value": []})
        clock = dict(zip(timed["step"], timed["value"], strict=True))
        steps = [step for step in sorted(by_step) if step in clock]
        if len(steps) < 2:
            continue
        raw = np.array([by_step[step] for step in steps], dtype=float)
        if window > 1 and raw.size >= window:
            raw = np.convolve(
                np.concatenate([np.full(window - 1, raw[0]), raw]), np.ones(window) / window, "valid"
            )
        tracks.append((np.array([clock[step] for step in steps], dtype=float) / 60.0, raw))
    if not tracks:
        return np.array([]), np.array([]), np.array([])
    start, end = max(t[0][0] for t in tracks), min(t[0][-1] for t in tracks)
    if not end > start:
        return np.array([]), np.array([]), np.array([])
    grid = np.linspace(start, end, points)
    stacked = np.array([np.interp(grid, minutes, track) for minutes, track in tracks])
    std = stacked.std(axis=0, ddof=1) if len(tracks) > 1 else np.zeros(points)
    return grid, stacked.mean(axis=0), std


def curve(by_seed: Mapping[int, Mapping[str, Any]], key: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Steps, mean and std across seeds of one per-step series (steps every seed has)."""
    tables = [
        dict(zip(s["series"][key]["step"], s["series"][key]["value"], strict=True)) for s in by_seed.values()
    ]
    steps = sorted(set.intersection(*(set(t) for t in tables))) if tables else []
    values = np.array([[t[step] for step in steps] for t in tables], dtype=float).reshape(
        len(tables), len(steps)
    )
    if not steps:
        return np.array([]), np.array([]), np.array([])
    return (
        np.array(steps),
        values.mean(axis=0),
        values.std(axis=0, ddof=1) if len(tables) > 1 else np.zeros(len(steps)),
    )
