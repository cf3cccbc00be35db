"""critic-eval outputs: ``critic_eval.json`` (everything), ``critic_eval.md`` (the table), ``critic_eval.png``."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

from lecritique.critic_eval.evaluation import CriticEvalResult

COLUMNS = ("value_mse", "explained_variance")


def _cell(value: float | None) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.4f}"


def table_rows(result: CriticEvalResult) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the comparison table (one row per critic)."""
    ranking = sorted({key for row in result.metrics.values() for key in row if key.startswith("top1_k")}, key=lambda k: int(k[6:]))
    header = ["critic", "scored on", "value MSE", "explained variance", *[f"top-1 @ k={key[6:]}" for key in ranking]]
    rows = [
        [name, result.scored_on.get(name, "prefix"), *[_cell(metrics.get(key)) for key in (*COLUMNS, *ranking)]]
        for name, metrics in result.metrics.items()
    ]
    return header, rows


def markdown_table(result: CriticEvalResult) -> str:
    header, rows = table_rows(result)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def ceiling_table(result: CriticEvalResult) -> str:
    """Markdown: per position bucket, the ceiling (± bootstrap s.e.), the MC noise, each critic's EV and EV / ceiling."""
    if not result.ceiling:
        return ""
    names = list(result.metrics)
    header = ["positions", "states", "ceiling Var(E[R|s])/Var(R)", "MC noise (within/K)"]
    header += [f"{name} EV" for name in names] + [f"{name} EV / ceiling" for name in names]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in result.ceiling:
        critics = row["critics"]
        cells = [row["label"], str(row["states"]), f"{_cell(row['ceiling'])} ± {_cell(row['ceiling_se'])}", _cell(row["mc_noise"])]
        cells += [_cell(critics.get(n, {}).get("ev")) for n in names] + [_cell(critics.get(n, {}).get("fraction")) for n in names]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n\nOracle ceiling per response position (critic_eval.ceiling: unbiased between/within variance terms):\n\n" + "\n".join(lines)


def write_report(result: CriticEvalResult, out_dir: Path, spec: Any = None) -> dict[str, Path]:
    """Write the three files; returns their paths by kind."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / "critic_eval.json", "markdown": out_dir / "critic_eval.md", "plot": out_dir / "critic_eval.png"}
    payload = {
        "spec": None if spec is None else spec.model_dump(mode="json"),
        "metrics": result.metrics,
        "mc_noise_mse": result.mc_noise_mse,
        "base_success_rate": result.base_success_rate,
        "scored_on": result.scored_on,
        "icc_reward_average": result.icc_reward_average,
        "states": [asdict(state) for state in result.states],
        "ranking_probes": [asdict(probe) for probe in result.probes],
        "ceiling": result.ceiling,
    }
    paths["json"].write_text(json.dumps(payload, indent=1, default=float))
    paths["markdown"].write_text(
        "# critic-eval\n\n"
        f"{len(result.states)} states, {len(result.probes)} ranking probes; policy mean reward "
        f"{result.base_success_rate:.3f}; Monte-Carlo noise floor of the value MSE {_cell(result.mc_noise_mse)}.\n"
        "Scored on: prefix = V(h_t) from the episode cut at t; hindsight = from the whole episode "
        "(LVRL's values, which read later actions).\n\n"
        + markdown_table(result)
        + ceiling_table(result)
        + "\n"
    )
    names = list(result.metrics)
    ranking = sorted({key for row in result.metrics.values() for key in row if key.startswith("top1_k")}, key=lambda k: int(k[6:]))
    figure, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    axes[0].bar(names, [result.metrics[n]["value_mse"] for n in names], color="tab:red")
    axes[0].axhline(result.mc_noise_mse, color="black", linestyle="--", linewidth=1, label="Monte-Carlo noise floor")
    axes[0].set_title("value MSE (lower is better)")
    axes[0].legend(fontsize=8)
    axes[1].bar(names, [result.metrics[n]["explained_variance"] for n in names], color="tab:blue")
    axes[1].axhline(0.0, color="black", linewidth=0.8)
    axes[1].set_title("explained variance")
    for name in names:
        axes[2].plot([int(k[6:]) for k in ranking], [result.metrics[name][k] for k in ranking], marker="o", label=name)
    if ranking:
        ks = [int(k[6:]) for k in ranking]
        axes[2].plot(ks, [1.0 / k for k in ks], color="gray", linestyle=":", label="1/k")
        axes[2].set_xticks(ks)
    axes[2].set_xlabel("candidates k")
    axes[2].set_title("top-1 ranking accuracy")
    axes[2].legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(paths["plot"], dpi=110)
    plt.close(figure)
    return paths
