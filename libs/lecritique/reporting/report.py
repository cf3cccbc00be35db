"""Turn a run directory's ``metrics.jsonl`` into a plot and a markdown summary a person can read."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

# Curves drawn when present: (metrics key, panel title).
PANELS = (
    ("reward_mean", "reward (training batches)"),
    ("eval_success", "greedy success (held-out tasks)"),
    ("value_explained_variance", "critic explained variance"),
    ("tether_rho", "TETHER rho"),
)
SPARSE = {"eval_success"}
"""Keys logged only on some steps: drawn as points, not smoothed."""


def load_metrics(run_dir: Path) -> list[dict[str, Any]]:
    """Rows of ``metrics.jsonl`` in step order; a torn last line (killed writer) is ignored."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: is {run_dir} a lecritique run directory?")
    rows = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return sorted(rows, key=lambda row: row["step"])


def _series(rows: list[dict[str, Any]], key: str) -> tuple[np.ndarray, np.ndarray]:
    steps, values = [], []
    for row in rows:
        value = row.get(key)
        if isinstance(value, int | float) and math.isfinite(value):
            steps.append(row["step"])
            values.append(float(value))
    return np.asarray(steps), np.asarray(values)


def _smooth(values: np.ndarray, window: int) -> np.ndarray:
    if values.size < window or window <= 1:
        return values
    kernel = np.ones(window) / window
    padded = np.concatenate([np.full(window - 1, values[0]), values])
    return np.convolve(padded, kernel, mode="valid")


@dataclass(frozen=True)
class Summary:
    steps: int
    reward_start: float
    reward_end: float
    explained_variance_end: float
    rho_end: float
    dropped_stale: int
    seconds: float
    window: int

    @property
    def reward_gain(self) -> float:
        return self.reward_end - self.reward_start


def summarize(rows: list[dict[str, Any]], window: int = 10) -> Summary:
    """Start/end reward as means over the first/last ``window`` steps (noise-robust)."""
    if not rows:
        raise ValueError("no metrics rows to summarise")
    _, reward = _series(rows, "reward_mean")
    _, ev = _series(rows, "value_explained_variance")
    _, rho = _series(rows, "tether_rho")
    w = max(1, min(window, reward.size // 2 or 1))
    return Summary(
        steps=len(rows),
        reward_start=float(reward[:w].mean()) if reward.size else float("nan"),
        reward_end=float(reward[-w:].mean()) if reward.size else float("nan"),
        explained_variance_end=float(ev[-w:].mean()) if ev.size else float("nan"),
        rho_end=float(rho[-1]) if rho.size else float("nan"),
        dropped_stale=int(sum(row.get("dropped_stale", 0) for row in rows)),
        seconds=float(rows[-1].get("seconds", float("nan"))),
        window=w,
    )


def write_report(run_dir: Path, title: str | None = None) -> tuple[Path, Path]:
    """Write ``report.png`` and ``report.md`` into ``run_dir``; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run_dir = Path(run_dir)
    rows = load_metrics(run_dir)
    summary = summarize(rows)
    panels = [(key, label) for key, label in PANELS if _series(rows, key)[0].size]
    figure, axes = plt.subplots(len(panels), 1, figsize=(8, 2.6 * len(panels)), sharex=True, squeeze=False)
    for axis, (key, label) in zip(axes[:, 0], panels, strict=True):
        steps, values = _series(rows, key)
        if key in SPARSE:
            axis.plot(steps, values, marker="o", linewidth=1.5, color="tab:green", label="every eval_every steps")
            axis.legend(loc="best", fontsize=8)
        else:
            axis.plot(steps, values, alpha=0.35, linewidth=1, label="per step")
            axis.plot(steps, _smooth(values, 10), linewidth=2, label="moving average (10)")
        axis.set_ylabel(label)
        axis.grid(alpha=0.3)
    axes[0, 0].legend(loc="best", fontsize=8)
    axes[-1, 0].set_xlabel("policy step")
    figure.suptitle(title or run_dir.name)
    figure.tight_layout()
    png = run_dir / "report.png"
    figure.savefig(png, dpi=110)
    plt.close(figure)

    def fmt(value: float) -> str:
        return "n/a" if not math.isfinite(value) else f"{value:.3f}"

    eval_steps, eval_success = _series(rows, "eval_success")
    eval_rows = (
        f"| held-out greedy success, step {int(eval_steps[0])} | {fmt(float(eval_success[0]))} |\n"
        f"| held-out greedy success, step {int(eval_steps[-1])} | {fmt(float(eval_success[-1]))} |\n"
        if eval_success.size
        else ""
    )
    md = run_dir / "report.md"
    md.write_text(
        f"# {title or run_dir.name}\n\n"
        f"![curves](report.png)\n\n"
        f"| metric | value |\n|---|---|\n"
        f"| policy steps | {summary.steps} |\n"
        f"| reward, first {summary.window} steps | {fmt(summary.reward_start)} |\n"
        f"| reward, last {summary.window} steps | {fmt(summary.reward_end)} |\n"
        f"| reward gain | {fmt(summary.reward_gain)} |\n"
        f"| critic explained variance, last {summary.window} steps | {fmt(summary.explained_variance_end)} |\n"
        f"| TETHER rho, final | {fmt(summary.rho_end)} |\n"
        + eval_rows
        + f"| rollouts dropped as stale | {summary.dropped_stale} |\n"
        f"| wall time of the experiment (s) | {fmt(summary.seconds)} |\n"
    )
    return png, md
