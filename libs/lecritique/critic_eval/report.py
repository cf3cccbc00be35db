"""critic-eval outputs: ``critic_eval.json`` (everything), ``critic_eval.md`` (the table), ``critic_eval.png``."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

from lecritique.critic_eval.baselines import BASELINES
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
    """``pairs_k{k}`` of every k measured, in k order (the tables' ranking measure)."""
    keys = {key for row in result.metrics.values() for key in row if key.startswith("pairs_k")}
    return sorted(keys, key=lambda k: int(k[7:]))


def _pairs(metrics: dict[str, float], key: str, note: str | None) -> str:
    untied = int(metrics.get(f"untied_pairs_k{key[7:]}", 0))
    return _cell(metrics.get(key), note) + ("" if note else f" ({untied} pairs)")


def _measured(result: CriticEvalResult) -> list[tuple[str, str, dict[str, float], dict[str, str]]]:
    """(name, scored on, metrics, notes) of every critic, then of every baseline."""
    rows = [
        (name, result.scored_on.get(name, "prefix"), metrics, result.notes.get(name, {}))
        for name, metrics in result.metrics.items()
    ]
    rows += [
        (f"baseline: {name}", "no critic", result.baselines[name], result.baseline_notes.get(name, {}))
        for name in BASELINES
        if name in result.baselines
    ]
    return rows


def table_rows(result: CriticEvalResult) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the comparison table (one row per critic, then the baselines); every
    n/a says why."""
    ranking = _ranking_keys(result)
    header = [
        "critic",
        "scored on",
        *[HEADERS[c] for c in COLUMNS],
        *[f"pairs right @ k={key[7:]}" for key in ranking],
    ]
    rows = []
    for name, scored_on, metrics, notes in _measured(result):
        cells = [_cell(metrics.get(key), notes.get(key)) for key in COLUMNS]
        cells += [_pairs(metrics, key, notes.get(key)) for key in ranking]
        rows.append([name, scored_on, *cells])
    return header, rows


CONSOLE_PARTS = (
    ("fit to the Monte-Carlo values", ("value_mse", "ev_var")),
    ("why the MSE is what it is", ("bias", "correlation", "spread")),
)
CONSOLE_HEADERS = {
    "value_mse": "value MSE",
    "ev_var": "ev_var",
    "bias": "bias V-m",
    "correlation": "corr(V,m)",
    "spread": "sd V/sd m",
}
CONSOLE_WIDTH = 80


def console_tables(result: CriticEvalResult, title: str) -> list[Any]:
    """The tables for a terminal: three narrow ones (fit; its decomposition; ranking), one line per
    critic, every n/a a numbered footnote printed under its table, so that each fits 80 columns
    without wrapping a cell."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    measured = _measured(result)
    ranking = _ranking_keys(result)
    parts: list[tuple[str, list[tuple[str, Any]]]] = [
        (f"{title}: {part}", [(CONSOLE_HEADERS[key], key) for key in keys]) for part, keys in CONSOLE_PARTS
    ]
    if ranking:
        parts.append((f"{title}: ranking, pairs ordered right", [(f"k={key[7:]}", key) for key in ranking]))
    rendered: list[Any] = []
    for part_title, columns in parts:
        rendered.append(Text(("\n" if rendered else "") + part_title, style="bold"))
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        table.add_column("critic", no_wrap=True)
        table.add_column("scored on", no_wrap=True)
        for header, _ in columns:
            table.add_column(header, justify="right", no_wrap=True)
        footnotes: dict[str, int] = {}
        for name, scored_on, metrics, notes in measured:
            cells = []
            for _, key in columns:
                value, note = metrics.get(key), notes.get(key)
                if value is None or (isinstance(value, float) and math.isnan(value)):
                    number = footnotes.setdefault(note or "not measured", len(footnotes) + 1)
                    cells.append(f"n/a [{number}]")
                elif key.startswith("pairs_k"):
                    cells.append(f"{value:.3f} ({int(metrics.get('untied_pairs_k' + key[7:], 0))})")
                else:
                    cells.append(f"{value:.4f}")
            table.add_row(_short(name), scored_on, *cells)
        rendered.append(table)
        lines = [f"[{number}] {note}" for note, number in footnotes.items()]
        if part_title.endswith("pairs ordered right"):
            lines.append("(n): untied candidate pairs; 0.5 is chance, and what a baseline scores")
        if lines:
            rendered.append(Text("\n".join(lines)))
    return rendered


def _short(name: str) -> str:
    """A row name the console tables can keep on one line (the Markdown table has it whole)."""
    short = name.replace("baseline: ", "base: ").replace(" (leave-one-out)", " (LOO)")
    return short if len(short) <= 32 else short[:31] + "…"


def tie_note(result: CriticEvalResult) -> str:
    """What the ranking column measures, and how many candidate pairs and probes are tied."""
    parts = []
    for key in _ranking_keys(result):
        k = int(key[7:])
        total = len(result.probes)
        if not total:
            continue
        pairs = total * k * (k - 1) // 2
        first = next(iter(result.metrics.values()), {})
        untied = int(first.get(f"untied_pairs_k{k}", 0))
        all_equal = sum(len({c.mc_value for c in probe.candidates[:k]}) == 1 for probe in result.probes)
        parts.append(
            f"k={k}: {untied} of {pairs} candidate pairs ({untied / pairs:.0%}) have different Monte-Carlo "
            f"values; {all_equal} of {total} probes ({all_equal / total:.0%}) have all k equal"
        )
    groups = (
        f" Groups of base episodes whose returns are all tied: {result.tied_groups:.0%}."
        if math.isfinite(result.tied_groups)
        else ""
    )
    head = "Ranking: " + ("; ".join(parts) + "." if parts else "no ranking probes.")
    return (
        head + " 'pairs right' is the share of candidate pairs with different Monte-Carlo values that the "
        "critic orders as they do, a pair it values alike counting one half (Kendall's concordance, ties "
        "as in the AUC): 0.5 is chance, and the baselines, which value every candidate of a probe alike, "
        "score exactly 0.5. Top-1 accuracy, which such ties leave at 0 or n/a, stays in critic_eval.json."
        + groups
    )


def _beats(value: float, baselines: list[tuple[str, float]]) -> str:
    """'beats both baselines' / 'beats the constant only' / ...: ``value`` against each baseline's."""
    above = [name for name, other in baselines if value > other + 1e-12]
    if len(above) == len(baselines):
        return "beats " + ("both baselines" if len(baselines) == 2 else "the baseline")
    if not above:
        return "beats no baseline"
    return "beats " + ", ".join(above) + " only"


def verdict(result: CriticEvalResult) -> str:
    """One line: the critics' ``ev_var`` (the best first) against the critic-free baselines'."""
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
    baselines = [
        (name, result.baselines[name]["ev_var"])
        for name in BASELINES
        if name in result.baselines and math.isfinite(result.baselines[name].get("ev_var", float("nan")))
    ]
    against = ", ".join(f"{name} {value:.3f}" for name, value in baselines)
    best_value, best = scored[0]
    if len(scored) == 1:
        head = f"{best} {best_value:.3f}"
    else:
        tie = any(abs(value - best_value) < 1e-12 for value, _ in scored[1:])
        others = "; ".join(f"{name} {value:.3f}" for value, name in scored[1:])
        head = f"{'tie' if tie else 'best critic: ' + best} {best_value:.3f} ({others})"
    if not baselines:
        return f"Verdict (ev_var): {head}; no baseline measured."
    return f"Verdict (ev_var): {head} vs baselines {against}: {best} {_beats(best_value, baselines)}."


def markdown_table(result: CriticEvalResult) -> str:
    header, rows = table_rows(result)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n\n" + tie_note(result) + "\n\n" + verdict(result)


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
        "baselines": result.baselines,
        "baseline_notes": result.baseline_notes,
        "tied_groups": result.tied_groups,
    }
    paths["json"].write_text(json.dumps(payload, indent=1, default=float))
    paths["markdown"].write_text(
        "# critic-eval\n\n"
        f"{len(result.states)} states, {len(result.probes)} ranking probes; policy mean reward "
        f"{result.base_success_rate:.3f}; Monte-Carlo noise floor of the value MSE {_cell(result.mc_noise_mse)}.\n"
        "Scored on: prefix = V(h_t) from the episode cut at t; hindsight = from the whole episode "
        "(LVRL's values, which read later actions). ev_var = 1 − Var(m − V)/Var(m) against the Monte-Carlo "
        "values m. Ranking: pairwise accuracy over the candidate pairs whose Monte-Carlo values differ (a pair "
        "the critic values alike counts one half; 0.5 is chance). Baselines (no critic): constant = the mean return of all base episodes; group mean = the "
        "mean return of the other episodes of the state's group (leave-one-out: never its own outcome).\n\n"
        + markdown_table(result)
        + ceiling_table(result)
        + "\n"
    )
    _write_plot(result, paths["plot"])
    return paths


def _write_plot(result: CriticEvalResult, path: Path) -> None:
    """The figure: value MSE, ev_var and pairwise ranking accuracy per critic."""
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
            [int(k[7:]) for k in ranking], [result.metrics[name][k] for k in ranking], marker="o", label=name
        )
    if ranking:
        ks = [int(k[7:]) for k in ranking]
        axes[2].axhline(0.5, color="gray", linestyle=":", label="chance (and the baselines)")
        axes[2].set_xticks(ks)
    axes[2].set_xlabel("candidates k")
    axes[2].set_title("candidate pairs ordered right (MC ties left out)")
    axes[2].set_ylim(0.0, 1.0)
    axes[2].legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
