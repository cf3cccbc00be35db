"""study.png: smoothed per-step curves per variant (raw series faint), training reward and held-out
success against wall time (arms that step at different paces, compared at equal time), EV /
ceiling per variant with its interval, and EV / ceiling against achieved critic updates per step."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from lecritique.study.summary import curve, curve_against_minutes

TITLES = {
    "reward_mean": "training reward",
    "eval_success": "held-out greedy success",
    "value_explained_variance": "critic ev_var (in-run, training batches)",
    "tether_rho": "TETHER rho",
}
SMOOTHED = ("reward_mean", "value_explained_variance", "tether_rho")
"""Per-step series drawn as a moving average (as report.png does), the raw series faint."""
WINDOW = 10


def smooth(values: np.ndarray, window: int = WINDOW) -> np.ndarray:
    """Trailing moving average (the first points average what there is), as report.png."""
    if values.size < window or window <= 1:
        return values
    padded = np.concatenate([np.full(window - 1, values[0]), values])
    return np.convolve(padded, np.ones(window) / window, mode="valid")


def _curves(axis: Any, key: str, runs: dict[str, dict[str, Any]], colors: dict[str, str]) -> None:
    for name, by_seed in runs.items():
        steps, mean, std = curve({int(s): v for s, v in by_seed.items()}, key)
        if steps.size == 0:
            continue
        color = colors.get(name)
        if key in SMOOTHED:
            axis.plot(steps, mean, color=color, alpha=0.25, linewidth=0.8)
            axis.plot(steps, smooth(mean), color=color, linewidth=1.8, label=name)
            axis.fill_between(steps, smooth(mean - std), smooth(mean + std), color=color, alpha=0.12)
        else:
            axis.plot(steps, mean, color=color, linewidth=1.6, marker="o", markersize=3, label=name)
            axis.fill_between(steps, mean - std, mean + std, color=color, alpha=0.15)
    smoothed = f" (moving average {WINDOW}, raw faint)" if key in SMOOTHED else ""
    axis.set_title(f"{TITLES[key]}{smoothed}", fontsize=9)
    axis.set_xlabel("policy step")
    axis.grid(alpha=0.3)
    if axis.lines:
        axis.legend(fontsize=7)


def _against_time(axis: Any, key: str, runs: dict[str, dict[str, Any]], colors: dict[str, str]) -> None:
    window = WINDOW if key in SMOOTHED else 1
    for name, by_seed in runs.items():
        minutes, mean, std = curve_against_minutes(
            {int(s): v for s, v in by_seed.items()}, key, window=window
        )
        if minutes.size == 0:
            continue
        axis.plot(minutes, mean, color=colors.get(name), linewidth=1.6, label=name)
        axis.fill_between(minutes, mean - std, mean + std, color=colors.get(name), alpha=0.12)
    smoothed = f" (moving average {WINDOW} steps)" if window > 1 else ""
    axis.set_title(f"{TITLES[key]} against wall time{smoothed}", fontsize=9)
    axis.set_xlabel("wall minutes (the run's own clock, warm-up included)")
    axis.grid(alpha=0.3)
    if axis.lines:
        axis.legend(fontsize=7)
    else:
        axis.text(0.5, 0.5, "no wall time recorded", ha="center", va="center", fontsize=8)


def _fractions(axis: Any, fractions: dict[str, dict[str, float]], colors: dict[str, str]) -> None:
    names = [n for n, cell in fractions.items() if math.isfinite(cell["mean"])]
    if not names:
        axis.text(
            0.5,
            0.5,
            "no EV / ceiling (no probe, or every ceiling too small)",
            ha="center",
            va="center",
            fontsize=8,
        )
    else:
        means = [fractions[n]["mean"] for n in names]
        errors = [fractions[n]["half"] if math.isfinite(fractions[n]["half"]) else 0.0 for n in names]
        axis.bar(names, means, yerr=errors, capsize=4, color=[colors.get(n, "gray") for n in names])
        axis.axhline(1.0, color="black", linestyle=":", linewidth=1)
    axis.set_title("ev_mse / ceiling, held-out states, all positions (95% interval)", fontsize=9)
    axis.grid(alpha=0.3, axis="y")


def _against_updates(
    axis: Any, fractions: dict[str, dict[str, float]], updates: dict[str, float], contexts: dict[str, str]
) -> None:
    markers = {"vf": ("o", "tab:blue"), "pvf": ("s", "tab:red")}
    drawn = False
    for name, cell in fractions.items():
        x = updates.get(name, float("nan"))
        if not (math.isfinite(x) and math.isfinite(cell["mean"])):
            continue
        marker, color = markers.get(contexts.get(name, ""), ("^", "gray"))
        axis.errorbar(
            [x],
            [cell["mean"]],
            yerr=[cell["half"] if math.isfinite(cell["half"]) else 0.0],
            fmt=marker,
            color=color,
            capsize=3,
        )
        axis.annotate(name, (x, cell["mean"]), fontsize=7, xytext=(3, 3), textcoords="offset points")
        drawn = True
    if not drawn:
        axis.text(0.5, 0.5, _why_empty(fractions, updates), ha="center", va="center", fontsize=8)
    axis.set_title("ev_mse / ceiling against achieved critic updates per step (o VF, s PVF)", fontsize=9)
    axis.set_xlabel("critic updates per policy step (achieved)")
    axis.grid(alpha=0.3)


def _why_empty(fractions: dict[str, dict[str, float]], updates: dict[str, float]) -> str:
    """Why the updates panel has no point: the one of its two figures that no critic variant has."""
    if not any(math.isfinite(x) for x in updates.values()):
        return "critic_updates_done not recorded"
    if not any(math.isfinite(cell["mean"]) for cell in fractions.values()):
        return "no ev_mse / ceiling: no ceiling probe,\nor none with a ceiling clear of 0"
    return "no critic variant has both figures"


def write_png(
    title: str,
    variants: list[str],
    runs: dict[str, dict[str, Any]],
    fractions: dict[str, dict[str, float]],
    updates: dict[str, float],
    contexts: dict[str, str],
    png: Path,
) -> None:
    """The eight panels of the module docstring; ``runs[variant][seed]`` are run summaries."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(2, 4, figsize=(21, 7.5), squeeze=False)
    colors = {name: f"C{i}" for i, name in enumerate(variants)}  # one colour per variant everywhere
    for axis, key in zip((axes[0, 0], axes[0, 1], axes[1, 0], axes[1, 1]), TITLES, strict=True):
        _curves(axis, key, runs, colors)
    _against_time(axes[0, 2], "reward_mean", runs, colors)
    _against_time(axes[0, 3], "eval_success", runs, colors)
    _fractions(axes[1, 2], fractions, colors)
    _against_updates(axes[1, 3], fractions, updates, contexts)
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(png, dpi=90)
    plt.close(figure)
