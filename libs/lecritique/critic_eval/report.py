"""critic-eval outputs: ``critic_eval.json`` (everything), ``critic_eval.md`` (the table), ``critic_eval.png``."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

from lecritique.critic_eval.ceiling import MIN_CEILING, best_critic
from lecritique.critic_eval.evaluation import CriticEvalResult

COLUMNS = ("value_mse", "ev_var", "bias", "correlation", "spread")
HEADERS = {
    "value_mse": "value MSE",
    "ev_var": "ev_var (vs MC values)",
    "bias": "bias mean(V − m)",
    "correlation": "corr(V, m)",
    "spread": "sd(V) / sd(m)",
}


def _cell(value: float | None, note: str | None = None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return f"n/a ({note})" if note else "n/a"
    return f"{value:.4f}"


def _ranking_keys(result: CriticEvalResult) -> list[str]:
    keys = {key for row in result.metrics.values() for key in row if key.startswith("top1_k")}
    return sorted(keys, key=lambda k: int(k[6:]))


def _top1(metrics: dict[str, float], key: str, note: str | None) -> str:
    k = key[6:]
    ties = f" (ties: {int(metrics.get(f'mc_ties_k{k}', 0))} MC / {int(metrics.get(f'critic_ties_k{k}', 0))} critic)"
    return _cell(metrics.get(key), note) + ("" if note else ties)


def table_rows(result: CriticEvalResult) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the comparison table (one row per critic); every n/a says why."""
    ranking = _ranking_keys(result)
    header = [
        "critic",
        "scored on",
        *[HEADERS[c] for c in COLUMNS],
        *[f"top-1 @ k={key[6:]}" for key in ranking],
    ]
    rows = []
    for name, metrics in result.metrics.items():
        notes = result.notes.get(name, {})
        cells = [_cell(metrics.get(key), notes.get(key)) for key in COLUMNS]
        cells += [_top1(metrics, key, notes.get(key)) for key in ranking]
        rows.append([name, result.scored_on.get(name, "prefix"), *cells])
    return header, rows


def verdict(result: CriticEvalResult) -> str:
    """One line: which critic explains most of the Monte-Carlo values' variance (``ev_var``)."""
    scored = sorted(
        (
            (m["ev_var"], name)
            for name, m in result.metrics.items()
            if math.isfinite(m.get("ev_var", float("nan")))
        ),
        reverse=True,
    )
    if not scored:
        reasons = {notes["ev_var"] for notes in result.notes.values() if "ev_var" in notes}
        return f"Verdict (ev_var): none, {'; '.join(sorted(reasons)) or 'no critic has a finite ev_var'}."
    best_value, best = scored[0]
    others = "; ".join(f"{name} {value:.3f}" for value, name in scored[1:])
    head = "tie" if any(abs(value - best_value) < 1e-12 for value, _ in scored[1:]) else f"best: {best}"
    return f"Verdict (ev_var): {head}, {best_value:.3f}" + (f"; {others}" if others else "") + "."


def markdown_table(result: CriticEvalResult) -> str:
    header, rows = table_rows(result)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n\n" + verdict(result)


def ceiling_table(result: CriticEvalResult) -> str:
    """Markdown: per position bucket, the ceiling (± bootstrap s.e. over episodes), the MC noise,
    each critic's ``ev_mse`` and ``ev_mse`` / ceiling (n/a with its reason), and a verdict line."""
    if not result.ceiling:
        return ""
    names = list(result.metrics)
    header = ["positions", "states (episodes)", "ceiling Var(E[R|s])/Var(R) ± s.e.", "MC noise (within/K)"]
    header += [f"{name} ev_mse" for name in names] + [f"{name} ev_mse / ceiling" for name in names]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in result.ceiling:
        critics = row["critics"]
        ceiling = (
            f"{_cell(row['ceiling'], row.get('ceiling_note'))} ± {_cell(row['ceiling_se'])}"
            if math.isfinite(row["ceiling"])
            else _cell(row["ceiling"], row.get("ceiling_note"))
        )
        cells = [
            row["label"],
            f"{row['states']} ({row.get('episodes', '?')})",
            ceiling,
            _cell(row["mc_noise"]),
        ]
        cells += [_cell(critics.get(n, {}).get("ev_mse"), critics.get(n, {}).get("ev_note")) for n in names]
        cells += [
            _cell(critics.get(n, {}).get("fraction"), critics.get(n, {}).get("fraction_note")) for n in names
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return (
        "\n\nOracle ceiling per response position (critic_eval.ceiling; t = response tokens since the episode's "
        "first policy token; ev_mse = 1 − MSE(R, V)/Var(R) against every continuation's return, not the ev_var above; "
        f"no ratio where the ceiling's 95% interval reaches {MIN_CEILING}):\n\n"
        + "\n".join(lines)
        + f"\n\n{ceiling_verdict(result)}"
    )


def ceiling_verdict(result: CriticEvalResult) -> str:
    """The ceiling table's verdict line (all positions)."""
    overall = next((row for row in result.ceiling if row["label"] == "all"), result.ceiling[0])
    return f"Verdict (all positions, ev_mse / ceiling): {best_critic(overall)}."


def write_report(result: CriticEvalResult, out_dir: Path, spec: Any = None) -> dict[str, Path]:
    """Write the three files; returns their paths by kind."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {
        "json": out_dir / "critic_eval.json",
        "markdown": out_dir / "critic_eval.md",
        "plot": out_dir / "critic_eval.png",
    }
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
        "notes": result.notes,
    }
    paths["json"].write_text(json.dumps(payload, indent=1, default=float))
    paths["markdown"].write_text(
        "# critic-eval\n\n"
        f"{len(result.states)} states, {len(result.probes)} ranking probes; policy mean reward "
        f"{result.base_success_rate:.3f}; Monte-Carlo noise floor of the value MSE {_cell(result.mc_noise_mse)}.\n"
        "Scored on: prefix = V(h_t) from the episode cut at t; hindsight = from the whole episode "
        "(LVRL's values, which read later actions). ev_var = 1 − Var(m − V)/Var(m) against the Monte-Carlo "
        "values m. Top-1 counts the probes whose Monte-Carlo values have a single best candidate (probes tied at "
        "the top are left out, counted as MC ties); a critic that ties at the top has not chosen: a miss, counted "
        "as a critic tie.\n\n" + markdown_table(result) + ceiling_table(result) + "\n"
    )
    _write_plot(result, paths["plot"])
    return paths


def _write_plot(result: CriticEvalResult, path: Path) -> None:
    """The figure: value MSE, ev_var and top-1 ranking accuracy per critic."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(result.metrics)
    ranking = _ranking_keys(result)
    figure, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    axes[0].bar(names, [result.metrics[n]["value_mse"] for n in names], color="tab:red")
    axes[0].axhline(
        result.mc_noise_mse, color="black", linestyle="--", linewidth=1, label="Monte-Carlo noise floor"
    )
    axes[0].set_title("value MSE (lower is better)")
    axes[0].legend(fontsize=8)
    axes[1].bar(names, [result.metrics[n]["ev_var"] for n in names], color="tab:blue")
    axes[1].axhline(0.0, color="black", linewidth=0.8)
    axes[1].set_title("ev_var against the Monte-Carlo values")
    for name in names:
        axes[2].plot(
            [int(k[6:]) for k in ranking], [result.metrics[name][k] for k in ranking], marker="o", label=name
        )
    if ranking:
        ks = [int(k[6:]) for k in ranking]
        axes[2].plot(ks, [1.0 / k for k in ks], color="gray", linestyle=":", label="1/k")
        axes[2].set_xticks(ks)
    axes[2].set_xlabel("candidates k")
    axes[2].set_title("top-1 ranking accuracy (MC ties excluded)")
    axes[2].legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
