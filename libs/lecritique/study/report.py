"""study.json, study.md and study.png from the run summaries (and the ceiling probe, when measured)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from lecritique.study.config import StudySpec
from lecritique.study.summary import COMPARED, SERIES, curve

TITLES = {
    "reward_mean": "training reward",
    "eval_success": "held-out greedy success",
    "value_explained_variance": "critic EV",
    "tether_rho": "TETHER rho",
}


def _fmt(value: float, digits: int = 3) -> str:
    return "n/a" if not math.isfinite(value) else f"{value:.{digits}f}"


def _pm(cell: dict[str, float], digits: int = 3) -> str:
    if cell["n"] == 0:
        return "n/a"
    return f"{_fmt(cell['mean'], digits)} ± {_fmt(cell['std'], digits)}"


def _ci(cell: dict[str, float], low: str, high: str) -> str:
    return "n/a" if not math.isfinite(cell[low]) else f"[{cell[low]:+.3f}, {cell[high]:+.3f}]"


def write_png(study: StudySpec, runs: dict[str, dict[int, dict[str, Any]]], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(2, 2, figsize=(12, 7.5), squeeze=False)
    colors = {variant.name: f"C{i}" for i, variant in enumerate(study.variants)}  # one colour per variant everywhere
    for axis, key in zip(axes.flat, SERIES, strict=True):
        for name, by_seed in runs.items():
            steps, mean, std = curve(by_seed, key)
            if steps.size == 0:
                continue
            style = {"marker": "o", "markersize": 3} if key == "eval_success" else {}
            axis.plot(steps, mean, label=name, linewidth=1.6, color=colors.get(name), **style)
            axis.fill_between(steps, mean - std, mean + std, color=colors.get(name), alpha=0.18)
        axis.set_title(f"{TITLES[key]} (mean ± std over seeds)", fontsize=10)
        axis.set_xlabel("policy step")
        axis.grid(alpha=0.3)
        if axis.lines:
            axis.legend(fontsize=8)
    figure.suptitle(f"study {study.name}: seeds {study.seeds}")
    figure.tight_layout()
    figure.savefig(png, dpi=100)
    plt.close(figure)


def _variant_table(study: StudySpec, summary: dict[str, Any]) -> str:
    lines = [
        f"| variant | final reward (last {study.final_window} steps) | final held-out success | EV, second half "
        "| rho first → final | critic updates | policy steps / min | seeds |\n|---|---|---|---|---|---|---|---|\n"
    ]
    for name, figures in summary["variants"].items():
        rho = f"{_fmt(figures['rho_first']['mean'])} → {_fmt(figures['rho_final']['mean'])}"
        lines.append(
            f"| {name}{' (reference)' if name == study.reference else ''} | {_pm(figures['final_reward'])} "
            f"| {_pm(figures['final_eval_success'])} | {_pm(figures['ev_second_half'])} | {rho} "
            f"| {_pm(figures['critic_updates'], 0)} | {_pm(figures['steps_per_minute'], 1)} | {figures['final_reward']['n']} |\n"
        )
    return "".join(lines)


def _difference_table(study: StudySpec, summary: dict[str, Any]) -> str:
    if not summary["differences"]:
        return ""
    lines = [
        f"\nPaired differences against `{study.reference}` (per seed, variant − reference; 95% CI: Student t on "
        "the per-seed differences, and a percentile bootstrap over seeds from 5 seeds on; n/a with one seed):\n\n"
        "| variant | figure | mean difference | t CI | bootstrap CI | seeds |\n|---|---|---|---|---|---|\n"
    ]
    for name, figures in summary["differences"].items():
        for fig in COMPARED:
            cell = figures[fig]
            lines.append(
                f"| {name} | {fig} | {_fmt(cell['mean'])} | {_ci(cell, 't_low', 't_high')} "
                f"| {_ci(cell, 'boot_low', 'boot_high')} | {cell['n']} |\n"
            )
    return "".join(lines)


def _ceiling_table(ceiling: dict[str, Any]) -> str:
    if not ceiling:
        return ""
    lines = [
        "\nOracle ceiling (final policy and critic, held-out states at token positions; estimator: "
        "lecritique.critic_eval.ceiling; ± is a bootstrap s.e. over states):\n\n"
        "| variant, seed | positions | states | ceiling Var(E[R|s])/Var(R) "
        "| MC noise (within/K) | critic EV | critic EV / ceiling |\n|---|---|---|---|---|---|---|\n"
    ]
    for key, result in ceiling.items():
        for bucket in result["buckets"]:
            lines.append(
                f"| {key} | {bucket['label']} | {bucket['states']} | {_fmt(bucket['ceiling'])} ± "
                f"{_fmt(bucket['ceiling_se'])} | {_fmt(bucket['mc_noise'], 4)} | {_fmt(bucket['critic_ev'])} "
                f"| {_fmt(bucket['fraction'], 2)} |\n"
            )
    return "".join(lines)


def write_study_report(
    study: StudySpec, out: Path, runs: dict[str, dict[int, dict[str, Any]]], summary: dict[str, Any],
    *, settings: dict[str, Any], ceiling: dict[str, Any] | None = None, unfinished: list[str] | None = None,
) -> dict[str, Path]:
    """Write study.json, study.md and study.png into ``out``; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "study.json", "md": out / "study.md", "png": out / "study.png"}
    document = {
        "study": study.model_dump(mode="json"), "settings": settings, "summary": summary,
        "runs": {name: {str(seed): s for seed, s in by_seed.items()} for name, by_seed in runs.items()},
        "ceiling": ceiling or {}, "unfinished": unfinished or [],
    }
    paths["json"].write_text(json.dumps(document, indent=1, allow_nan=True))
    write_png(study, runs, paths["png"])
    descriptions = "".join(f"- `{v.name}`: {v.description or v.overrides}\n" for v in study.variants if v.name in runs)
    partial = (
        f"**Partial study**: {len(unfinished)} of {len(settings)} runs missing or unfinished "
        f"({', '.join(unfinished)}); run the same `lecritique study` command again to resume.\n\n"
        if unfinished else ""
    )
    paths["md"].write_text(
        f"# Study `{study.name}`\n\n{partial}Seeds {study.seeds}; reference `{study.reference}`.\n\n{descriptions}\n"
        "![curves](study.png)\n\n" + _variant_table(study, summary) + _difference_table(study, summary)
        + _ceiling_table(ceiling or {})
    )
    return paths
