"""Several runs side by side: one markdown table and one figure (``lecritique compare``).

A critic's numbers mean little without a baseline beside them (issue 41): a TETHER run and a
MEAN run of the same seed and tasks, compared here, say whether the critic helped, per policy
step and per second of wall time (a critic costs time).

Definitions (stated in the table's notes too):
- final reward: mean training reward over the last 25% of a run's policy steps (at least one);
- held-out success, first / last: the first and the last ``eval_success`` of the run (the first is
  step 0, the initial policy, in runs that evaluate it);
- critic EV, final: mean of ``value_explained_variance`` over the same last 25% of steps;
- rho, last: the last ``tether_rho``;
- wall time: ``seconds`` of the last row (experiment wall time, critic warm-up included);
- ± after the final reward: the standard error of that mean over the window's steps,
  autocorrelation-inflated (:mod:`lecritique.reporting.noise`); after the last held-out success:
  its binomial standard error over the spec's ``orchestrator.eval_tasks``.

One run per arm describes runs, not settings: the table says so and ranks nothing. Several runs
per arm (``compare A1 A2 --vs B1 B2``, or ``LABEL=DIR`` arguments) add the paired differences
A - B with 95% intervals (:func:`lecritique.reporting.noise.paired_arms`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lecritique.reporting.noise import (
    binomial_standard_error,
    window_standard_error,
)
from lecritique.reporting.report import load_metrics
from lecritique.run_folder import RunFolder

FINAL_FRACTION = 0.25
"""The share of a run's last policy steps its final reward and EV are averaged over."""


@dataclass(frozen=True)
class RunColumn:
    """One run's row of the comparison."""

    label: str
    """How the table and the figure name the run (its folder, made unique)."""
    spec_name: str
    estimator: str
    critic: str
    steps: int
    final_window: int
    final_reward: float
    eval_first: float
    eval_first_step: int | None
    eval_last: float
    eval_last_step: int | None
    ev_final: float
    rho_last: float
    seconds: float
    rows: list[dict[str, Any]]
    final_reward_se: float = float("nan")
    """Standard error of ``final_reward`` (autocorrelation-inflated; the module docstring)."""
    eval_last_se: float = float("nan")
    """Binomial standard error of ``eval_last`` over the spec's held-out tasks."""
    seed: int | None = None
    """The seed the run's spec.json records (None without one)."""


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def series(rows: list[dict[str, Any]], key: str, x: str = "step") -> tuple[list[float], list[float]]:
    """(x, value) of ``key`` on rows where both are finite numbers; ``x`` is ``step`` or ``seconds``."""
    pairs = [
        (float(row[x]), float(row[key])) for row in rows if _finite(row.get(key)) and _finite(row.get(x))
    ]
    return [a for a, _ in pairs], [b for _, b in pairs]


def _spec(run_dir: Path) -> dict[str, Any]:
    """The run's ``spec.json`` ({} where it has none)."""
    return RunFolder(run_dir).recorded_spec() or {}


def _spec_fields(run_dir: Path) -> tuple[str, str, str]:
    """(spec name, estimator, critic) from the run's ``spec.json`` ('?' where it has none)."""
    spec = _spec(run_dir)
    if not spec:
        return "?", "?", "?"
    estimator = (spec.get("estimator") or {}).get("name", "?")
    critic = spec.get("critic")
    if not critic:
        described = "none"
    else:
        parts = [critic.get("kind"), critic.get("context")]
        described = " / ".join(str(part) for part in parts if part) or "yes"
    return str(spec.get("name", "?")), str(estimator), described


def run_column(run_dir: Path, label: str | None = None) -> RunColumn:
    """The comparison's figures of one run folder (``metrics.jsonl``, ``spec.json`` when present)."""
    run_dir = Path(run_dir)
    rows = load_metrics(run_dir)
    steps_rows = [row for row in rows if row.get("step", 0) >= 1]
    if not steps_rows:
        raise ValueError(f"{run_dir}/metrics.jsonl has no policy step yet: nothing to compare")
    steps = int(steps_rows[-1]["step"])
    window = max(1, math.ceil(len(steps_rows) * FINAL_FRACTION))
    late = steps_rows[-window:]
    reward = [float(row["reward_mean"]) for row in late if _finite(row.get("reward_mean"))]
    ev = [
        float(row["value_explained_variance"]) for row in late if _finite(row.get("value_explained_variance"))
    ]
    eval_steps, success = series(rows, "eval_success")
    _, rho = series(steps_rows, "tether_rho")
    timed = [row for row in rows if _finite(row.get("seconds"))]
    name, estimator, critic = _spec_fields(run_dir)
    spec = _spec(run_dir)
    seed = spec.get("seed") if isinstance(spec.get("seed"), int) else None
    eval_tasks = (spec.get("orchestrator") or {}).get("eval_tasks")
    nan = float("nan")
    return RunColumn(
        label=label or run_dir.name,
        spec_name=name,
        estimator=estimator,
        critic=critic,
        steps=steps,
        final_window=window,
        final_reward=float(np.mean(reward)) if reward else nan,
        eval_first=success[0] if success else nan,
        eval_first_step=int(eval_steps[0]) if success else None,
        eval_last=success[-1] if success else nan,
        eval_last_step=int(eval_steps[-1]) if success else None,
        ev_final=float(np.mean(ev)) if ev else nan,
        rho_last=rho[-1] if rho else nan,
        seconds=float(timed[-1]["seconds"]) if timed else nan,
        rows=rows,
        final_reward_se=window_standard_error(reward),
        eval_last_se=binomial_standard_error(success[-1], eval_tasks) if success else nan,
        seed=seed,
    )


def unique_labels(run_dirs: list[Path]) -> list[str]:
    """Each run's folder name, or more of its path where two runs share a name."""
    labels = [Path(d).name for d in run_dirs]
    depth = 1
    while len(set(labels)) < len(labels) and depth < 8:
        depth += 1
        labels = ["/".join(Path(d).resolve().parts[-depth:]) for d in run_dirs]
    return labels


def _fmt(value: float) -> str:
    return "n/a" if not math.isfinite(value) else f"{value:.3f}"


def _pm(value: float, se: float) -> str:
    return _fmt(value) + (f" ± {se:.3f}" if math.isfinite(value) and math.isfinite(se) else "")


def _at(value: float, step: int | None, se: float = float("nan")) -> str:
    return "n/a" if step is None else f"{_pm(value, se)} (step {step})"


def comparison_table(columns: list[RunColumn], arms: list[str] | None = None) -> str:
    """The markdown table, one row per run (with its arm when there are arms), and notes saying
    how each figure is computed."""
    arm_head, arm_rule = ("| arm ", "---|") if arms else ("", "")
    header = (
        f"{arm_head}| run | spec | seed | estimator | critic | steps | final reward ± s.e. (last 25% of steps) "
        "| held-out success, first | held-out success, last ± s.e. | critic EV (last 25%) | TETHER rho, last "
        f"| wall time (s) |\n|{arm_rule}---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = [
        ("" if arms is None else f"| {arms[index]} ")
        + f"| {c.label} | {c.spec_name} | {'?' if c.seed is None else c.seed} | {c.estimator} | {c.critic} "
        f"| {c.steps} | {_pm(c.final_reward, c.final_reward_se)} "
        f"| {_at(c.eval_first, c.eval_first_step)} | {_at(c.eval_last, c.eval_last_step, c.eval_last_se)} "
        f"| {_fmt(c.ev_final)} | {_fmt(c.rho_last)} | {_fmt(c.seconds)} |\n"
        for index, c in enumerate(columns)
    ]
    notes = (
        "\nFinal reward and critic EV: means over each run's last 25% of policy steps "
        f"({', '.join(f'{c.label}: {c.final_window}' for c in columns)} steps). ± after the final reward: "
        "the standard error of that mean from the run's step-to-step noise, s/√n × √((1 + r1)/(1 − r1)) with "
        "r1 the lag-1 autocorrelation of the window's rewards (0 when negative, at most 0.9): one run's noise, "
        "a lower bound on how much another seed would move it. ± after the last held-out success: its binomial "
        "standard error over the spec's `orchestrator.eval_tasks`. Held-out success: greedy, "
        "on the same eval-split tasks for the same seed; step 0 is the initial policy. Wall time: the "
        "experiment's, critic warm-up included. n/a: the run has no such metric (MEAN has no critic EV "
        "or rho; a run without `orchestrator.eval_every` has no held-out success).\n"
    )
    return header + "".join(lines) + notes


def _smooth(values: list[float], window: int = 10) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.size < window:
        return array
    padded = np.concatenate([np.full(window - 1, array[0]), array])
    return np.convolve(padded, np.ones(window) / window, mode="valid")


def comparison_figure(columns: list[RunColumn], png: Path) -> None:
    """Reward (moving average of 10 steps) and held-out success, against policy steps and against
    wall time, every run in each panel."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(2, 2, figsize=(11, 7), squeeze=False)
    for x, column_index, x_label in (("step", 0, "policy step"), ("seconds", 1, "wall time (s)")):
        reward_axis, eval_axis = axes[0, column_index], axes[1, column_index]
        for index, column in enumerate(columns):
            color = f"C{index % 10}"
            xs, reward = series(column.rows, "reward_mean", x)
            if reward:
                reward_axis.plot(xs, _smooth(reward), color=color, linewidth=1.8, label=column.label)
            xs, success = series(column.rows, "eval_success", x)
            if success:
                eval_axis.plot(xs, success, color=color, marker="o", linewidth=1.5, label=column.label)
        reward_axis.set_ylabel("training reward (moving average, 10 steps)")
        eval_axis.set_ylabel("held-out greedy success")
        eval_axis.set_ylim(-0.02, 1.02)
        for axis in (reward_axis, eval_axis):
            axis.set_xlabel(x_label)
            axis.grid(alpha=0.3)
            if axis.get_legend_handles_labels()[0]:
                axis.legend(loc="best", fontsize=8)
    figure.suptitle("runs compared: against policy steps (left) and wall time (right)")
    figure.tight_layout()
    figure.savefig(png, dpi=110)
    plt.close(figure)


def write_comparison(run_dirs: list[Path], out_dir: Path, arms: list[str] | None = None) -> tuple[Path, Path]:
    """Write ``compare.md`` and ``compare.png`` into ``out_dir``; returns their paths. ``arms``:
    each run's arm (two names, several runs each), for the paired differences; None: one run per arm."""
    if not run_dirs:
        raise ValueError("compare needs at least one run folder")
    columns = [run_column(d, label) for d, label in zip(run_dirs, unique_labels(run_dirs), strict=True)]
    if arms is None:
        verdict = single_runs_text(columns)
    else:
        from lecritique.reporting.arms import arms_text

        verdict = arms_text(columns, arms)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    png, md = out_dir / "compare.png", out_dir / "compare.md"
    comparison_figure(columns, png)
    md.write_text(
        "# Runs compared\n\n" + verdict + "\n\n![curves](compare.png)\n\n" + comparison_table(columns, arms)
    )
    return png, md


def single_runs_text(columns: list[RunColumn]) -> str:
    """What runs compared one per arm can say: nothing about which setting is better."""
    if len(columns) < 2:
        return "One run: its figures below, with the noise of its own steps."
    gap = ""
    if len(columns) == 2 and all(math.isfinite(c.final_reward) for c in columns):
        a, b = columns
        gap = (
            f" Here the final rewards differ by {abs(a.final_reward - b.final_reward):.3f}, against "
            f"step-to-step standard errors of {_fmt(a.final_reward_se)} ({a.label}) and "
            f"{_fmt(b.final_reward_se)} ({b.label}); a second seed of either would move it by more."
        )
    return (
        f"**One run per arm ({len(columns)} runs): these rows describe single runs, not which setting is "
        "better, and they are not ranked.** A seed changes the tasks' order, the samples and the "
        "starting point, which moves a run's final figures by more than its own steps' noise (the ± "
        f"below).{gap} To compare settings, run several seeds of each and give them as arms: "
        "`lecritique compare A1 A2 A3 --vs B1 B2 B3 --out DIR` (paired by seed; a 95% interval on each "
        "difference)."
    )
