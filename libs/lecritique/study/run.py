"""``lecritique study``: plan, run (resumably), summarise, probe the ceiling, report."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console

from lecritique.config.experiment import SpecError
from lecritique.reporting.report import load_metrics
from lecritique.run_folder import RunFolder
from lecritique.study.accounting import record_section, run_account, run_timings, study_sections
from lecritique.study.ceiling_table import with_ceiling_figures
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


def with_built_policies(
    runs: list[PlannedRun], out: Path | None = None, console: Console | None = None
) -> list[PlannedRun]:
    """Every run with its starting policy built, before any run starts: the tiny build of its
    ``policy_seed`` (built once per seed and cached, its hash keyed by the seed). Variants of one
    seed start from the same policy; seeds spread over the study's ``policy_builds`` starting
    policies. A build has no wall-clock limit (a cut build is refused, never used: ``TinyBuildCut``);
    each one's line is printed and, with ``out``, its time and held-out success recorded
    (``starting_policies.json``, ``accounting.json``)."""
    from lecritique.tinybuild import build_tiny_model, describe_build

    built: dict[tuple[str, int], str] = {}
    resolved = []
    for run in runs:
        tiny = run.spec.policy.tiny
        if tiny is None or run.policy_seed is None:
            resolved.append(run)
            continue
        key = (tiny, run.policy_seed)
        if key not in built:
            started = time.monotonic()
            build = build_tiny_model(tiny, seed=run.policy_seed, show_progress=console is not None)
            built[key] = str(build.path)
            if console is not None:
                console.print(describe_build(build))
            if out is not None:
                _record_build(out, tiny, run.policy_seed, build, time.monotonic() - started)
        policy = run.spec.policy.model_copy(update={"path": built[key], "tiny": None})
        spec = run.spec.model_copy(update={"policy": policy})
        resolved.append(replace(run, spec=spec))
    return resolved


STARTING_POLICIES = "starting_policies.json"
"""In the study folder: each starting policy's build report (steps, why it stopped, held-out success)."""


def _record_build(out: Path, task: str, seed: int, build: Any, seconds: float) -> None:
    report = build.report
    evaluation = report.get("eval", {})
    entry = {
        "task": task,
        "seed": seed,
        "path": str(build.path),
        "steps": report.get("steps"),
        "stopped_because": report.get("stopped_because"),
        "train_seconds": report.get("train_seconds"),
        "greedy_success": evaluation.get("greedy_success"),
        "sampled_success": evaluation.get("sampled_success"),
        "eval_tasks": evaluation.get("tasks"),
    }
    path = out / STARTING_POLICIES
    known = json.loads(path.read_text()) if path.is_file() else {}
    known[f"{task}/seed{seed}"] = entry
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(known, indent=1))
    what = f"starting policy {task} seed {seed}"
    record_section(out, "build", what, 0.0 if build.cached else seconds, cached=build.cached)


def recorded_experiment(folder: Path) -> str | None:
    """The experiment name the run folder's ``spec.json`` records (None: none recorded)."""
    return RunFolder(folder).recorded_name()


def collect(study: StudySpec, runs: list[PlannedRun], out: Path) -> dict[str, dict[int, dict[str, Any]]]:
    """Summaries of the runs that have metrics, by variant then seed.

    A folder that records another experiment (a run copied from another study or variant) is
    refused: one run must not be counted as two observations."""
    summaries: dict[str, dict[int, dict[str, Any]]] = {}
    for run in runs:
        folder = run_dir(out, run)
        recorded = recorded_experiment(folder)
        if recorded is not None and recorded != run.spec.name:
            raise SpecError(
                f"{folder.relative_to(out)} holds experiment {recorded!r}, not {run.spec.name!r}: a run copied "
                "from another study (or variant) is one observation there, not a second one here; run it in "
                "this study (remove the folder) or leave the variant out"
            )
        try:
            rows = load_metrics(folder)
        except FileNotFoundError:
            continue
        if rows:
            produced = run.spec.batch_size
            ended = RunFolder(folder).ended_by(run.spec.orchestrator.steps)
            # A run its wall-time budget ended averages the last fraction of the steps it made.
            made = int(rows[-1]["step"]) if ended == "wall budget" else run.spec.orchestrator.steps
            summary = run_summary(rows, study.final_steps(made), float(produced))
            summary["finished"] = is_finished(folder, run.spec)
            summary["ended_by"] = ended
            summary["pools"] = run.pools
            summary["timing"] = run_account(run_timings(folder), rows, run.spec.orchestrator.max_seconds)
            summaries.setdefault(run.variant, {})[run.seed] = summary
    return summaries


def settings_of(runs: list[PlannedRun]) -> dict[str, Any]:
    """Every run's resolved spec (study.json states every setting)."""
    return {run.key: run.spec.model_dump(mode="json", exclude_none=True) for run in runs}


def budget_warnings(runs: list[PlannedRun]) -> dict[str, list[str]]:
    """Per variant, the spec's warnings (config/findings.py; said before its runs, not only in their logs)."""
    from lecritique.config.findings import warning_texts

    found: dict[str, list[str]] = {}
    for run in runs:
        if run.variant not in found:
            found[run.variant] = warning_texts(run.spec)
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
    overrides: Sequence[str] = (),
) -> dict[str, Path]:
    """Run (or resume) the study in ``study_path`` into ``out``; returns the report's paths.

    ``report_only``: run nothing; report the runs that have metrics (a partial study is marked so).
    ``overrides``: ``--set PATH=VALUE`` of the base spec (``StudySpec.base_set``).
    """
    console = console or Console()
    study = load_study_spec(study_path)
    if overrides:
        study = study.model_copy(update={"base_set": [*study.base_set, *overrides]})
    if quick:
        study = apply_quick(study, study_path.resolve().parent)
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
        runs = with_built_policies(runs, out, console)
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
    """Every pretrain stage some planned run uses, once per starting policy it is used with; a stage
    whose summary is written is skipped, an interrupted one resumes (``critic pretrain`` is)."""
    for stage in study.pretrain:
        root = pretrain_dir(out, stage.name).resolve()
        done: set[Path] = set()
        for run in runs:
            path = getattr(run.spec.critic, "model_path", None)
            folder = Path(path).parent if path else None
            if folder is None or folder in done or root not in (folder, folder.parent):
                continue
            done.add(folder)
            if (folder / "summary.json").is_file():
                console.print(f"pretrain {folder.relative_to(out.resolve())}: finished before, skipped")
                continue
            console.print(
                f"pretrain {stage.name}: `lecritique critic pretrain` on {run.key}'s starting policy"
            )
            started = time.monotonic()
            _pretrain_stage(study, study_dir, stage, run, folder, quick=quick)
            record_section(
                out, "pretrain", f"{stage.name} on {run.key}'s starting policy", time.monotonic() - started
            )


def _pretrain_stage(
    study: StudySpec, study_dir: Path, stage: PretrainStage, run: PlannedRun, folder: Path, *, quick: bool
) -> None:
    from lecritique.pretrain import pretrain

    spec = plan_pretrain(study, study_dir, stage)
    seed = run.policy_seed if run.policy_seed is not None else min(study.seeds)
    spec = spec.model_copy(update={"policy": run.spec.policy, "seed": seed})
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


def _pretrain_summaries(study: StudySpec, out: Path, runs: list[PlannedRun]) -> dict[str, Any]:
    """Each pretrain stage's budget and result (``summary.json`` of ``critic pretrain``), for study.md;
    one entry per starting policy when the study pretrains on several. A stage no planned run uses
    (the quick profile keeps some variants only) says so."""
    found: dict[str, Any] = {}
    used = {str(getattr(run.spec.critic, "model_path", None) or "") for run in runs}
    for stage in study.pretrain:
        if not any(str(pretrain_dir(out, stage.name).resolve()) in path for path in used):
            found[stage.name] = {
                "budget": stage.budget.model_dump(mode="json"),
                "result": None,
                "unused": "not run: none of the variants run here uses it",
            }
            continue
        root = pretrain_dir(out, stage.name)
        per_build = sorted(root.glob("policy-seed*/summary.json"))
        folders = [(f"{stage.name} ({path.parent.name})", path) for path in per_build]
        for label, path in folders or [(stage.name, root / "summary.json")]:
            result = json.loads(path.read_text()) if path.is_file() else None
            if result is not None:
                result.pop("history", None)
            found[label] = {"budget": stage.budget.model_dump(mode="json"), "result": result}
    return found


def _starting_policies(out: Path) -> dict[str, Any]:
    path = out / STARTING_POLICIES
    return dict(json.loads(path.read_text())) if path.is_file() else {}


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
    probed: dict[str, Any] = {}
    if ceiling and study.ceiling.enabled:
        from lecritique.study.ceiling_probe import probe_ceilings

        started = time.monotonic()
        probed = probe_ceilings(study, runs, out, console)
        record_section(out, "ceiling", "the ceiling probe", time.monotonic() - started)
    summary = aggregate(
        with_ceiling_figures(summaries, probed),
        study.compared(),
        bootstrap_samples=study.bootstrap_samples,
        figures=study.metrics,
    )
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
        pretrain=_pretrain_summaries(study, out, runs),
        accounting={"sections": study_sections(out), "starting_policies": _starting_policies(out)},
    )
    console.print(f"study report: {paths['md']}, {paths['png']}, {paths['json']}")
    return paths
