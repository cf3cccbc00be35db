"""What ``critic pretrain`` writes beside the critic: ``ev.png``, ``summary.json``, ``summary.md``."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


def _finite(value: Any) -> Any:
    """JSON has no NaN: undefined numbers (EV of constant returns) are written as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4f}" if math.isfinite(value) else "-"
    return "-" if value is None else str(value)


def plot_ev(history: list[dict[str, Any]], path: Path) -> None:
    """Train and held-out explained variance per epoch (epoch 0: the critic before training)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 4))
    epochs = [row["epoch"] for row in history]
    for key, label in (("train_ev", "train"), ("held_out_ev", "held out")):
        axis.plot(epochs, [row[key] for row in history], marker="o", label=label)
    axis.set_xlabel("epoch (0: before training)")
    axis.set_ylabel("explained variance of the returns")
    axis.set_title("critic pretraining")
    axis.grid(alpha=0.3)
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def write_summary(out: Path, summary: dict[str, Any]) -> tuple[Path, Path]:
    """``summary.json`` (everything) and ``summary.md`` (the table and how to use the critic)."""
    json_path, md_path = out / "summary.json", out / "summary.md"
    json_path.write_text(json.dumps(_finite(summary), indent=1))
    rows = ["| epoch | updates | loss | train EV | held-out EV |", "|---|---|---|---|---|"]
    for row in summary["history"]:
        cells = [row["epoch"], row["updates"], row["loss"], row["train_ev"], row["held_out_ev"]]
        rows.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    policies = "\n".join(
        f"- `{p['path']}`: {p['trajectories']} trajectories, mean reward {p['mean_reward']:.3f}"
        for p in summary["policies"]
    )
    md_path.write_text(
        f"# Critic pretraining: {summary['spec']}\n\n"
        f"Critic context `{summary['context']}`; {summary['train_trajectories']} training and "
        f"{summary['held_out_trajectories']} held-out trajectories ({summary['held_out_tasks']} held-out tasks).\n\n"
        f"Policies:\n{policies}\n\n" + "\n".join(rows) + "\n\n"
        f"Stopped: {summary['stopped'] or 'not yet (rerun to continue)'}. Best held-out EV "
        f"{summary['best_held_out_ev']:.4f} at epoch {summary['best_epoch']} (before: {summary['initial_held_out_ev']:.4f}).\n\n"
        f"Use it in a later run of this spec:\n\n```yaml\ncritic:\n  model_path: {summary['critic_dir']}\n```\n"
    )
    return json_path, md_path
