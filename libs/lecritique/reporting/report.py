"""Turn a run directory's ``metrics.jsonl`` into a plot and a markdown summary a person can read."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lecritique.run_folder import RunFolder

# Curves drawn when present: (metrics key, panel title).
PANELS = (
    ("reward_mean", "reward (training batches)"),
    ("eval_success", "greedy success (held-out tasks)"),
    ("value_explained_variance", "critic explained variance"),
    ("tether_rho", "TETHER rho"),
)
SPARSE = {"eval_success"}
"""Keys logged only on some steps: drawn as points, not smoothed."""
BUCKET_PANELS = (
    ("tether_rho_bucket_", "TETHER rho per bucket"),
    ("value_ev_bucket_", "critic EV per bucket"),
)
"""Per-bucket families (``<prefix><m>``, TETHER with ``buckets > 1``): one curve per bucket."""


def load_metrics(run_dir: Path) -> list[dict[str, Any]]:
    """Rows of ``metrics.jsonl`` in step order (:meth:`RunFolder.metrics`: a torn line is skipped)."""
    return RunFolder(Path(run_dir)).metrics()


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
        # Policy steps: the row of step 0 (the initial policy's held-out evaluation) is none.
        steps=sum(1 for row in rows if row.get("step", 0) >= 1),
        reward_start=float(reward[:w].mean()) if reward.size else float("nan"),
        reward_end=float(reward[-w:].mean()) if reward.size else float("nan"),
        explained_variance_end=float(ev[-w:].mean()) if ev.size else float("nan"),
        rho_end=float(rho[-1]) if rho.size else float("nan"),
        dropped_stale=int(sum(row.get("dropped_stale", 0) for row in rows)),
        seconds=float(rows[-1].get("seconds", float("nan"))),
        window=w,
    )


def bucket_numbers(rows: list[dict[str, Any]], prefix: str) -> list[int]:
    """The bucket indices m of every ``<prefix><m>`` key in ``rows``, sorted."""
    suffixes = {key[len(prefix) :] for row in rows for key in row if key.startswith(prefix)}
    return sorted(int(suffix) for suffix in suffixes if suffix.isdigit())


BUCKET_MEANING = (
    "A bucket is a range of response positions (policy tokens since the response began): bucket m of M "
    "covers the m-th of M equal ranges of the response budget, so early and late tokens are measured apart."
)


def bucket_table(rows: list[dict[str, Any]], window: int) -> str:
    """Markdown: per response-position bucket, its final rho (TETHER with ``buckets > 1``, else the
    one rho every bucket uses) and its critic explained variance over the last ``window`` steps
    where it was defined; one line instead of a table with a single bucket; empty without buckets.

    The critic's EV is measured per bucket for every estimator that uses a critic
    (``value_ev_bucket_<m>``), while TETHER fits one rho per bucket only when it has ``buckets > 1``
    (``tether_rho_bucket_<m>``): with one rho, that rho is every bucket's."""
    rho_buckets = bucket_numbers(rows, "tether_rho_bucket_")
    buckets = sorted(set(rho_buckets) | set(bucket_numbers(rows, "value_ev_bucket_")))
    if not buckets:
        return ""
    _, single_rho = _series(rows, "tether_rho")
    shared = " (TETHER's one rho, for every bucket)" if not rho_buckets and single_rho.size else ""

    def rho_end(m: int) -> float:
        _, rho = _series(rows, f"tether_rho_bucket_{m}") if rho_buckets else _series(rows, "tether_rho")
        return float(rho[-1]) if rho.size else float("nan")

    def ev_end(m: int) -> float:
        _, ev = _series(rows, f"value_ev_bucket_{m}")
        return float(ev[-window:].mean()) if ev.size else float("nan")

    if len(buckets) == 1:
        m = buckets[0]
        return (
            f"\nOne response-position bucket (all positions): TETHER rho, final {_fmt(rho_end(m))}; "
            f"critic EV, last {window} steps {_fmt(ev_end(m))}.\n"
        )
    lines = [
        f"\nPer bucket. {BUCKET_MEANING}\n\n"
        f"| bucket | TETHER rho, final{shared} | critic EV, last {window} steps |\n|---|---|---|\n"
    ]
    lines += [f"| {m} | {_fmt(rho_end(m))} | {_fmt(ev_end(m))} |\n" for m in buckets]
    return "".join(lines)


def _fmt(value: float) -> str:
    return "n/a" if not math.isfinite(value) else f"{value:.3f}"


def _curves(rows: list[dict[str, Any]]) -> list[tuple[str, list[tuple[str, str]]]]:
    """(panel title, [(metrics key, legend label)]) of every panel with data."""
    panels = [(label, [(key, "")]) for key, label in PANELS if _series(rows, key)[0].size]
    for prefix, label in BUCKET_PANELS:
        buckets = bucket_numbers(rows, prefix)
        if buckets:
            panels.append((label, [(f"{prefix}{m}", f"bucket {m}") for m in buckets]))
    return panels


def _draw(axis: Any, rows: list[dict[str, Any]], key: str, legend: str) -> None:
    steps, values = _series(rows, key)
    if key in SPARSE:
        axis.plot(
            steps,
            values,
            marker="o",
            linewidth=1.5,
            color="tab:green",
            label="step 0, then every eval_every steps",
        )
    elif legend:  # one of several buckets: the moving average only, labelled by bucket
        axis.plot(steps, _smooth(values, 10), linewidth=1.5, label=legend)
    else:
        axis.plot(steps, values, alpha=0.35, linewidth=1, label="per step")
        axis.plot(steps, _smooth(values, 10), linewidth=2, label="moving average (10)")


def _plot(rows: list[dict[str, Any]], png: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = _curves(rows)
    figure, axes = plt.subplots(len(panels), 1, figsize=(8, 2.6 * len(panels)), sharex=True, squeeze=False)
    for axis, (label, curves) in zip(axes[:, 0], panels, strict=True):
        for key, legend in curves:
            _draw(axis, rows, key, legend)
        if len(curves) > 1 or curves[0][0] in SPARSE:
            axis.legend(loc="best", fontsize=8)
        axis.set_ylabel(label)
        if curves[0][0] in SPARSE:  # a success rate: the same scale in every report
            axis.set_ylim(-0.02, 1.02)
        axis.grid(alpha=0.3)
    axes[0, 0].legend(loc="best", fontsize=8)
    axes[-1, 0].set_xlabel("policy step")
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(png, dpi=110)
    plt.close(figure)


def write_report(run_dir: Path, title: str | None = None) -> tuple[Path, Path]:
    """Write ``report.png`` and ``report.md`` into ``run_dir``; returns their paths."""
    run_dir = Path(run_dir)
    rows = load_metrics(run_dir)
    summary = summarize(rows)
    png = run_dir / "report.png"
    _plot(rows, png, title or run_dir.name)

    eval_steps, eval_success = _series(rows, "eval_success")
    # One evaluation is one row: the first and the last are the same one.
    evaluations = sorted({0, eval_success.size - 1}) if eval_success.size else []
    eval_rows = "".join(
        f"| held-out greedy success, step {int(eval_steps[i])} | {_fmt(float(eval_success[i]))} |\n"
        for i in evaluations
    )
    md = run_dir / "report.md"
    md.write_text(
        f"# {title or run_dir.name}\n\n"
        f"![curves](report.png)\n\n"
        f"| metric | value |\n|---|---|\n"
        f"| policy steps | {summary.steps} |\n"
        f"| reward, first {summary.window} steps | {_fmt(summary.reward_start)} |\n"
        f"| reward, last {summary.window} steps | {_fmt(summary.reward_end)} |\n"
        f"| reward gain | {_fmt(summary.reward_gain)} |\n"
        f"| critic explained variance, last {summary.window} steps | {_fmt(summary.explained_variance_end)} |\n"
        f"| TETHER rho, final | {_fmt(summary.rho_end)} |\n"
        + eval_rows
        + f"| rollouts dropped as stale | {summary.dropped_stale} |\n"
        f"| wall time of the experiment (s) | {_fmt(summary.seconds)} |\n"
        + bucket_table(rows, summary.window)
    )
    return png, md
