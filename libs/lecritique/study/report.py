"""study.json, study.md and study.png; md and png are a pure function of study.json's document
(``rewrite_report``; ``docs/study.md``'s tables are generated from ``docs/study.json`` this way).

Every n/a says why; an EV is named for what it is (``ev_var``: in-run, variance-based, training
batches; ``ev_mse``: the ceiling probe's, MSE-based, held-out states); no ratio over a ceiling whose
95% interval reaches ``MIN_CEILING``; one verdict line per table; a quick study says it is one.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from lecritique.study.ceiling_table import ceiling_table, probe_fractions, with_ceiling_figures
from lecritique.study.config import StudySpec
from lecritique.study.figures import write_png
from lecritique.study.summary import aggregate
from lecritique.study.time_table import load_banner, pace_table, starting_policies_table, time_table

QUICK_BANNER = "> **quick: checks the machinery, not results.** One seed, a few steps, a tiny ceiling probe; nothing here ranks critics.\n\n"
FIGURE_NAMES = {
    "final_reward": "final reward",
    "final_eval_success": "final held-out success",
    "ev_var_second_half": "ev_var, second half",
    "ev_mse_over_ceiling": "ev_mse / ceiling",
}


def _fmt(value: float, digits: int = 3) -> str:
    return f"{value:.{digits}f}" if math.isfinite(value) else "n/a"


def counted(cell: Mapping[str, Any]) -> str:
    """ "n", or "n of N, k n/a" when k seeds had no value (they are left out, never dropped silently)."""
    missing = int(cell.get("n_na", 0))
    return str(cell["n"]) if not missing else f"{cell['n']} of {cell['n'] + missing}, {missing} n/a"


def _pm(cell: Mapping[str, Any], digits: int = 3, why: str = "no data") -> str:
    if cell["n"] == 0 or not math.isfinite(cell["mean"]):
        return f"n/a ({why})"
    seeds = f" ({counted(cell)})" if cell.get("n_na") and cell["n"] > 1 else ""
    if cell["n"] == 1:
        return (
            f"{_fmt(cell['mean'], digits)} ± n/a (1 seed{', ' + counted(cell) if cell.get('n_na') else ''})"
        )
    return f"{_fmt(cell['mean'], digits)} ± {_fmt(cell['std'], digits)}{seeds}"


def _why(value: float, reason: str) -> str:
    return _fmt(value) if math.isfinite(value) else f"n/a ({reason})"


def _signed(value: float) -> str:
    return f"{value:+.3f}" if math.isfinite(value) else "n/a"


def _ci(cell: Mapping[str, float], low: str, high: str, why: str) -> str:
    return f"n/a ({why})" if not math.isfinite(cell[low]) else f"[{cell[low]:+.3f}, {cell[high]:+.3f}]"


def _kinds(settings: Mapping[str, Any], variant: str) -> tuple[str | None, str]:
    """(critic context or None without a critic, estimator name) of a variant's first run."""
    spec: Mapping[str, Any] = next((s for key, s in settings.items() if key.split("/")[0] == variant), {})
    critic = spec.get("critic")
    context = None if critic is None else str(critic.get("context", critic.get("kind", "critic")))
    return context, str(spec.get("estimator", {}).get("name", ""))


def _variant_row(study: StudySpec, document: Mapping[str, Any], name: str, figures: Mapping[str, Any]) -> str:
    context, estimator = _kinds(document["settings"], name)
    no_critic = "no critic" if context is None else "not recorded"
    rho = (
        "n/a (not TETHER)"
        if estimator != "tether"
        else f"{_fmt(figures['rho_first']['mean'])} → {_fmt(figures['rho_final']['mean'])}"
    )
    fraction = probe_fractions(document.get("ceiling", {}), name)
    fraction_cell = (
        "n/a (no critic)"
        if context is None
        else "n/a (not probed)"
        if fraction["probed"] == 0
        else _pm(fraction, 2, "ceiling too small or no probe")
        + f" ({fraction['n']} of {fraction['probed']} seeds)"
    )
    per_update = (
        "n/a (no critic)" if context is None else _pm(figures["trajectories_per_update"], 1, "not recorded")
    )
    return (
        f"| {name}{' (reference)' if name == study.reference else ''} | {_pm(figures['final_reward'])} "
        f"| {_pm(figures['final_eval_success'])} | {_pm(figures['ev_var_second_half'], 3, no_critic if context is None else 'undefined: constant returns')} "
        f"| {fraction_cell} | {_pm(figures['updates_per_step'], 2, no_critic)} | {per_update} | {rho} "
        f"| {_pm(figures['critic_updates'], 0, no_critic)} | {_pm(figures['steps_per_minute'], 1)} | {figures['final_reward']['n']} |\n"
    )


def _variant_table(study: StudySpec, document: Mapping[str, Any], summary: Mapping[str, Any]) -> str:
    lines = [
        f"| variant | final reward ({study.final_label()}) | final held-out success | ev_var, second half (in-run) "
        "| ev_mse / ceiling (held-out, all positions) | critic updates / step | fresh trajectories / update "
        "| rho first → final | critic updates | policy steps / min | seeds |\n|---|---|---|---|---|---|---|---|---|---|---|\n"
    ]
    lines += [_variant_row(study, document, name, figures) for name, figures in summary["variants"].items()]
    return "".join(lines) + "\n" + _variant_verdict(document, summary) + "\n"


def _variant_verdict(document: Mapping[str, Any], summary: Mapping[str, Any]) -> str:
    rewards = sorted(
        ((f["final_reward"]["mean"], n) for n, f in summary["variants"].items() if f["final_reward"]["n"]),
        reverse=True,
    )
    fractions = sorted(
        (
            (cell["mean"], n)
            for n in summary["variants"]
            if math.isfinite((cell := probe_fractions(document.get("ceiling", {}), n))["mean"])
        ),
        reverse=True,
    )
    reward = "; ".join(f"{n} {v:.3f}" for v, n in rewards) or "none"
    critic = ", ".join(f"{n} {v:.2f}" for v, n in fractions) or "n/a (no probe with a clear ceiling)"
    return (
        f"Verdict: final reward, highest first: {reward} (differences: see the comparisons below). "
        f"Critics, ev_mse / ceiling on held-out states, highest first: {critic}.\n"
    )


def _comparison_table(study: StudySpec, summary: Mapping[str, Any]) -> str:
    differences = summary["differences"]
    if not differences:
        return ""
    figures = summary.get("figures", study.metrics)
    lines = [
        f"\nDeclared comparisons ({len(differences)}; a − b per seed): mean difference, 95% Student-t interval on the "
        f"per-seed differences (exact t quantiles), its p-value and the Holm-adjusted p-value ({_holm_family(summary, figures)}; "
        "significant: adjusted p < 0.05); beside it, not as the result, a percentile bootstrap over seeds from 5 seeds on "
        "(5 seeds have 126 distinct resamples); seeds with no value in either variant are counted, not used:\n\n"
        "| comparison | figure | mean difference | t 95% CI | p | p (Holm) | beside: bootstrap 95% CI | seeds |\n"
        "|---|---|---|---|---|---|---|---|\n"
    ]
    significant = []
    for pair, by_figure in differences.items():
        for fig in figures:
            cell = by_figure[fig]
            one = (
                "1 seed"
                if cell["n"] == 1
                else "not in both variants"
                if cell["n"] == 0
                else "fewer than 5 seeds"
            )
            if cell.get("p_holm", float("nan")) < 0.05:
                significant.append(f"{pair} on {FIGURE_NAMES[fig]} ({cell['mean']:+.3f})")
            lines.append(
                f"| {pair} | {FIGURE_NAMES[fig]} | {_signed(cell['mean'])} | {_ci(cell, 't_low', 't_high', one)} "
                f"| {_why(cell.get('p', float('nan')), one)} | {_why(cell.get('p_holm', float('nan')), one)} "
                f"| {_ci(cell, 'boot_low', 'boot_high', one)} | {counted(cell)} |\n"
            )
    verdict = (
        "; ".join(significant) if significant else "no declared comparison differs after the Holm correction"
    )
    return "".join(lines) + f"\nVerdict: {verdict}.\n"


def _holm_family(summary: Mapping[str, Any], figures: Any) -> str:
    """The Holm family in words: the tests declared, and how many had a p-value to adjust."""
    declared = len(summary["differences"]) * len(figures)
    tested = int(summary["holm_tests"])
    if tested == declared:
        return (
            f"Holm over all {declared} tests this study declares: every comparison on every compared figure"
        )
    if tested == 0:
        return (
            f"this study declares {declared} tests, every comparison on every compared figure, and none has a "
            "p-value yet: a paired test needs at least 2 seeds in both variants"
        )
    return (
        f"Holm over the {tested} of the {declared} declared tests that have a p-value; the others lack 2 "
        "seeds with a value in both variants"
    )


def _pretrain_section(pretrain: Mapping[str, Any]) -> str:
    if not pretrain:
        return ""
    lines = [
        "\nPretrain stages (`lecritique critic pretrain` on the study's starting policy, once, before the variants):\n\n"
    ]
    for name, stage in pretrain.items():
        budget, result = stage["budget"], stage.get("result")
        spent = (
            f"{result['train_trajectories']} train / {result['held_out_trajectories']} held-out trajectories, "
            f"held-out EV {result['initial_held_out_ev']:.3f} → {result['best_held_out_ev']:.3f} (epoch {result['best_epoch']} of {result['epochs']}, stopped: {result['stopped']})"
            if result
            else stage.get("unused") or "not run"
        )
        lines.append(
            f"- `{name}`: budget {budget['tasks_per_policy']} tasks, at most {budget['max_epochs']} epochs, patience "
            f"{budget['patience']}; {spent}\n"
        )
    return "".join(lines)


def render_tables(document: Mapping[str, Any]) -> str:
    """The generated part of study.md (banner, tables, verdicts) from a study.json document."""
    study = StudySpec.model_validate(document["study"])
    runs = {name: {int(seed): s for seed, s in by_seed.items()} for name, by_seed in document["runs"].items()}
    summary = aggregate(
        with_ceiling_figures(runs, document.get("ceiling", {})),
        [p for p in study.compared() if p[0] in runs and p[1] in runs],
        bootstrap_samples=study.bootstrap_samples,
        figures=study.metrics,
    )
    banner = (QUICK_BANNER if document.get("quick") else "") + load_banner(document)
    return (
        banner
        + _variant_table(study, document, summary)
        + pace_table(document)
        + _comparison_table(study, summary)
        + ceiling_table(document.get("ceiling", {}))
        + _pretrain_section(document.get("pretrain", {}))
        + starting_policies_table(document)
        + time_table(document)
    )


def render_markdown(document: Mapping[str, Any], png_name: str = "study.png") -> str:
    """The whole study.md of a study.json document."""
    study = StudySpec.model_validate(document["study"])
    unfinished = document.get("unfinished", [])
    descriptions = "".join(
        f"- `{v.name}`: {v.description or v.overrides}\n"
        for v in study.variants
        if v.name in document["runs"]
    )
    partial = (
        f"**Partial study**: {len(unfinished)} of {len(document['settings'])} runs missing or unfinished "
        f"({', '.join(unfinished)}); run the same `lecritique study` command again to resume.\n\n"
        if unfinished
        else ""
    )
    changed = (
        f"Base spec changed for this study by `--set {' '.join(study.base_set)}` (every variant).\n\n"
        if study.base_set
        else ""
    )
    return (
        f"# Study `{study.name}`\n\n{partial}{changed}Seeds {study.seeds}; reference `{study.reference}`.\n\n{descriptions}\n"
        f"![curves]({png_name})\n\n" + render_tables(document)
    )


def draw(document: Mapping[str, Any], png: Path) -> None:
    """study.png of a study.json document (:mod:`.figures`)."""
    study = StudySpec.model_validate(document["study"])
    ceiling = document.get("ceiling", {})
    names = [v.name for v in study.variants if v.name in document["runs"]]
    fractions = {
        n: probe_fractions(ceiling, n) for n in names if _kinds(document["settings"], n)[0] is not None
    }
    updates = {
        n: float(
            np.nanmean(
                [s["figures"].get("updates_per_step", float("nan")) for s in document["runs"][n].values()]
                or [float("nan")]
            )
        )
        if any(
            math.isfinite(s["figures"].get("updates_per_step", float("nan")))
            for s in document["runs"][n].values()
        )
        else float("nan")
        for n in names
    }
    contexts = {
        n: {"none": "vf", "reference": "pvf"}.get(str(_kinds(document["settings"], n)[0]), "") for n in names
    }
    quick = " (quick: checks the machinery, not results)" if document.get("quick") else ""
    beside = f" with {', '.join(study.drawn_beside)}'s variants" if study.drawn_beside else ""
    write_png(
        f"study {study.name}{beside}: seeds {study.seeds}{quick}",
        names,
        {n: document["runs"][n] for n in names},
        fractions,
        updates,
        contexts,
        png,
    )


def write_study_report(
    study: StudySpec,
    out: Path,
    runs: dict[str, dict[int, dict[str, Any]]],
    summary: dict[str, Any],
    *,
    settings: dict[str, Any],
    ceiling: dict[str, Any] | None = None,
    unfinished: list[str] | None = None,
    quick: bool = False,
    pretrain: dict[str, Any] | None = None,
    accounting: dict[str, Any] | None = None,
) -> dict[str, Path]:
    """Write study.json, then study.md and study.png from it; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    document = {
        "study": study.model_dump(mode="json"),
        "settings": settings,
        "summary": summary,
        "quick": quick,
        "runs": {name: {str(seed): s for seed, s in by_seed.items()} for name, by_seed in runs.items()},
        "ceiling": ceiling or {},
        "unfinished": unfinished or [],
        "pretrain": pretrain or {},
        "accounting": accounting or {},
    }
    (out / "study.json").write_text(json.dumps(document, indent=1, allow_nan=True))
    return rewrite_report(out)


def rewrite_report(out: Path) -> dict[str, Path]:
    """study.md and study.png from ``out/study.json`` alone."""
    paths = {"json": out / "study.json", "md": out / "study.md", "png": out / "study.png"}
    document = json.loads(paths["json"].read_text())
    paths["md"].write_text(render_markdown(document))
    draw(document, paths["png"])
    return paths
