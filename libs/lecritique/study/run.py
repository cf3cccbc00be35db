"""``lecritique study``: plan, run (resumably), summarise, probe the ceiling, report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console

from lecritique.reporting.report import load_metrics
from lecritique.study.config import (
    PlannedRun,
    PretrainStage,
    StudySpec,
    apply_quick,
    load_study_spec,
    plan_pretrain,
    plan_runs,
    pretrain_dir,
)
from lecritique.study.report import write_study_report
from lecritique.study.runner import is_finished, run_all, run_dir
from lecritique.study.summary import aggregate, run_summary


def with_shared_policy(runs: list[PlannedRun], seed: int) -> list[PlannedRun]:
    """Every run starts from the same tiny policy (built once with the base spec's seed).

    A tiny policy's build depends on the seed it is given; building one per experiment seed would
    cost minutes each and mix two sources of variance. Seeds vary the RL run, not its start.
    """
    from lecritique.tinybuild import build_tiny

    built: dict[str, str] = {}
    shared = []
    for run in runs:
        tiny = run.spec.policy.tiny
        if tiny is None:
            shared.append(run)
            continue
        if tiny not in built:
            built[tiny] = str(build_tiny(tiny, seed=seed))
        policy = run.spec.policy.model_copy(update={"path": built[tiny], "tiny": None})
        shared.append(PlannedRun(run.variant, run.seed, run.spec.model_copy(update={"policy": policy})))
    return shared


def collect(study: StudySpec, runs: list[PlannedRun], out: Path) -> dict[str, dict[int, dict[str, Any]]]:
    """Summaries of the runs that have metrics, by variant then seed."""
    summaries: dict[str, dict[int, dict[str, Any]]] = {}
    for run in runs:
        folder = run_dir(out, run)
        try:
            rows = load_metrics(folder)
        except FileNotFoundError:
            continue
        if rows:
            produced = run.spec.rollout.tasks_per_step * run.spec.rollout.group_size
            summary = run_summary(rows, study.final_window, float(produced))
            summary["finished"] = is_finished(folder, run.spec)
            summaries.setdefault(run.variant, {})[run.seed] = summary
    return summaries


def settings_of(runs: list[PlannedRun]) -> dict[str, Any]:
    """Every run's resolved spec (study.json states every setting)."""
    return {run.key: run.spec.model_dump(mode="json", exclude_none=True) for run in runs}


def budget_warnings(runs: list[PlannedRun]) -> dict[str, list[str]]:
    """Per variant, what makes its critic budget marginal (said before its runs, not only in their logs)."""
    from lecritique.config.critic_budget import update_budget_warnings

    found: dict[str, list[str]] = {}
    for run in runs:
        if run.variant not in found:
            found[run.variant] = update_budget_warnings(run.spec)
    return {variant: warnings for variant, warnings in found.items() if warnings}


def run_study(
    study_path: Path,
    out: Path,
    *,
    quick: bool = False,
    api: str | None = None,
    token: str | None = None,
    console: Console | None = None,
    ceiling: bool = True,
    report_only: bool = False,
) -> dict[str, Path]:
    """Run (or resume) the study in ``study_path`` into ``out``; returns the report's paths.

    ``report_only``: run nothing; report the runs that have metrics (a partial study is marked so).
    """
    console = console or Console()
    study = load_study_spec(study_path)
    if quick:
        study = apply_quick(study)
    runs = plan_runs(study, study_path.resolve().parent, quick=quick, out=out)
    if report_only and not (out / "runs").is_dir() and (out / "study.json").is_file():
        return rewrite_from_json(out, console=console)
    out.mkdir(parents=True, exist_ok=True)
    (out / "study.yaml.json").write_text(json.dumps(study.model_dump(mode="json"), indent=1))
    if not report_only:
        for variant, warnings in budget_warnings(runs).items():
            for warning in warnings:
                console.print(f"[yellow]warning: {variant}: {warning}")
    if report_only:
        pass
    elif api is None:
        runs = with_shared_policy(runs, seed=_base_seed(runs))
        run_pretrain(study, study_path.resolve().parent, runs, out, console, quick=quick)
        run_all(runs, out, console)
    else:
        from lecritique.client import LecritiqueClient

        with LecritiqueClient(api, token) as client:
            run_all(runs, out, console, client=client)
    return report_study(study, runs, out, console=console, ceiling=ceiling and api is None, quick=quick)


def run_pretrain(
    study: StudySpec, study_dir: Path, runs: list[PlannedRun], out: Path, console: Console, *, quick: bool
) -> None:
    """Every pretrain stage some planned run uses, once, on the study's starting policy; a stage
    whose summary is written is skipped, an interrupted one resumes (``critic pretrain`` is)."""
    used = {str(path) for r in runs if (path := getattr(r.spec.critic, "model_path", None))}
    shared = runs[0].spec.policy
    for stage in study.pretrain:
        folder = pretrain_dir(out, stage.name)
        if str(folder.resolve() / "critic") not in used:
            continue
        if (folder / "summary.json").is_file():
            console.print(f"pretrain {stage.name}: finished before, skipped")
            continue
        console.print(f"pretrain {stage.name}: `lecritique critic pretrain` on the study's starting policy")
        _pretrain_stage(study, study_dir, stage, shared, folder, quick=quick)


def _pretrain_stage(
    study: StudySpec, study_dir: Path, stage: PretrainStage, policy: Any, folder: Path, *, quick: bool
) -> None:
    from lecritique.pretrain import pretrain

    spec = plan_pretrain(study, study_dir, stage)
    spec = spec.model_copy(update={"policy": policy, "seed": min(study.seeds)})
    budget = stage.budget
    if quick:  # the machinery, not a critic worth using
        budget = budget.model_copy(
            update={"tasks_per_policy": min(budget.tasks_per_policy, 8), "max_epochs": 1}
        )
    pretrain(spec, budget, folder, show_progress=False)


def rewrite_from_json(out: Path, *, console: Console) -> dict[str, Path]:
    """study.md and study.png again from ``out/study.json`` alone (no run folders needed)."""
    from lecritique.study.report import rewrite_report

    paths = rewrite_report(out)
    console.print(f"study report (from {paths['json']}): {paths['md']}, {paths['png']}")
    return paths


def _base_seed(runs: list[PlannedRun]) -> int:
    return min(run.seed for run in runs)


def _pretrain_summaries(study: StudySpec, out: Path) -> dict[str, Any]:
    """Each pretrain stage's budget and result (``summary.json`` of ``critic pretrain``), for study.md."""
    found: dict[str, Any] = {}
    for stage in study.pretrain:
        path = pretrain_dir(out, stage.name) / "summary.json"
        result = json.loads(path.read_text()) if path.is_file() else None
        if result is not None:
            result.pop("history", None)
        found[stage.name] = {"budget": stage.budget.model_dump(mode="json"), "result": result}
    return found


def report_study(
    study: StudySpec,
    runs: list[PlannedRun],
    out: Path,
    *,
    console: Console,
    ceiling: bool = True,
    quick: bool = False,
) -> dict[str, Path]:
    """Summaries, paired differences, the ceiling probe (local runs), and the three report files."""
    collected = collect(study, runs, out)
    # Only finished runs are compared: a half-run seed would bias its variant's final figures.
    summaries = {v: {s: x for s, x in by_seed.items() if x["finished"]} for v, by_seed in collected.items()}
    summaries = {v: by_seed for v, by_seed in summaries.items() if by_seed}
    summary = aggregate(summaries, study.compared(), bootstrap_samples=study.bootstrap_samples)
    probed: dict[str, Any] = {}
    if ceiling and study.ceiling.enabled:
        from lecritique.study.ceiling_probe import probe_ceilings

        probed = probe_ceilings(study, runs, out, console)
    unfinished = [r.key for r in runs if not summaries.get(r.variant, {}).get(r.seed, {}).get("finished")]
    paths = write_study_report(
        study,
        out,
        summaries,
        summary,
        settings=settings_of(runs),
        ceiling=probed,
        unfinished=unfinished,
        quick=quick,
        pretrain=_pretrain_summaries(study, out),
    )
    console.print(f"study report: {paths['md']}, {paths['png']}, {paths['json']}")
    return paths
