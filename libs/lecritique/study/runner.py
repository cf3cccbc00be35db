"""Run a study's experiments one after another, locally (``lecritique run``'s launcher) or over REST.

Resumable: a run whose ``metrics.jsonl`` reaches its last step is skipped; an interrupted one is
started again in the same folder, where the orchestrator resumes from its checkpoint. Over REST,
the experiment ids are kept in ``api_runs.json`` so a second invocation waits on, rather than
resubmits, what is already running.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from lecritique.config.experiment import ExperimentSpec
from lecritique.launch.local.launcher import check_recorded_spec
from lecritique.launch.local.signals import signals_ignored
from lecritique.run_folder import RunFolder
from lecritique.study.accounting import timed_run
from lecritique.study.config import PlannedRun
from lecritique.tinybuild.identity import same_build
from lecritique.weights.store import version_dirname

OnRow = Callable[[dict[str, Any]], None]


KEPT = "last_step_critic"
"""Inside a run folder: the critic version the latest policy step used (hard links)."""


def keep_scoring_critic(folder: Path, version: int) -> None:
    """Hard-link ``weights/critic/<version>`` into ``KEPT/<version>`` and drop older copies; a
    version already pruned is skipped (the probe then says so)."""
    source = folder / "weights" / "critic" / version_dirname(version)
    kept = folder / KEPT
    target = kept / version_dirname(version)
    if version < 0 or target.is_dir() or not source.is_dir():
        return
    partial = kept / f".{target.name}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    try:
        shutil.copytree(source, partial, copy_function=os.link)
    except (FileNotFoundError, shutil.Error):
        shutil.rmtree(partial, ignore_errors=True)  # pruned while linking
        return
    partial.rename(target)
    for old in kept.iterdir():
        if old != target:
            shutil.rmtree(old, ignore_errors=True)


def run_dir(out: Path, run: PlannedRun) -> Path:
    """Where one (variant, seed) run lives inside the study folder."""
    return out / "runs" / run.variant / f"seed{run.seed}"


def is_finished(folder: Path, spec: ExperimentSpec) -> bool:
    """All its steps are in the metrics, or its wall-time budget (``orchestrator.max_seconds``) ended it."""
    return RunFolder(folder).is_finished(spec.orchestrator.steps)


def _summary(row: dict[str, Any]) -> str:
    def fmt(key: str) -> str:
        value = row.get(key)
        return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"

    return f"reward {fmt('reward_mean')}  ev_var {fmt('value_explained_variance')}  rho {fmt('tether_rho')}"


class StudyProgress:
    """One rich display over the whole study: an overall bar in runs and the current run's bar, in
    policy steps, or in seconds of its wall-time budget (``orchestrator.max_seconds``) when it has one."""

    def __init__(self, runs: Sequence[PlannedRun], console: Console) -> None:
        columns = (
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[summary]}"),
        )
        self.progress = Progress(*columns, console=console)
        self.overall = self.progress.add_task("study (runs)", total=len(runs), summary="")
        self.current: TaskID | None = None

    def __enter__(self) -> StudyProgress:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(None, None, None)

    def start(self, run: PlannedRun, done: int) -> OnRow:
        if self.current is not None:
            self.progress.remove_task(self.current)
        budget = run.spec.orchestrator.max_seconds
        label = f"{run.key} (seconds of {budget:g})" if budget is not None else f"{run.key} (steps)"
        total = budget if budget is not None else run.spec.orchestrator.steps
        self.current = self.progress.add_task(
            label, total=total, completed=0 if budget else done, summary="starting"
        )
        current = self.current

        def on_row(row: dict[str, Any]) -> None:
            position = row.get("seconds", 0.0) if budget is not None else row["step"]
            self.progress.update(
                current,
                completed=min(total, float(position or 0.0)),
                summary=f"step {row['step']}  {_summary(row)}",
            )

        return on_row

    def finish(self, run: PlannedRun) -> None:
        self.progress.advance(self.overall)


def run_local(spec: ExperimentSpec, folder: Path, on_row: OnRow, *, pools: bool = False) -> None:
    """One experiment through :class:`LocalLauncher` (what ``lecritique run`` does), to the end;
    ``pools``: the policy path and the value plane on two halves of the cores (``--pools``)."""
    from lecritique.launch.local.launcher import LocalLauncher
    from lecritique.launch.local.pools import CorePools

    launcher = LocalLauncher(spec, folder, core_pools=CorePools.halves() if pools else None)

    def on_step(row: dict[str, Any]) -> None:
        keep_scoring_critic(folder, int(row.get("value_version", -1)))
        on_row(row)

    with timed_run(folder) as timing:
        try:
            started = time.monotonic()
            launcher.start_services()
            timing.services_seconds = time.monotonic() - started
            launcher.start_orchestrator()
            code = launcher.wait(on_step)
        finally:
            stopping = time.monotonic()
            with signals_ignored():
                launcher.stop()
            timing.teardown_seconds = time.monotonic() - stopping
    if code != 0:
        raise RuntimeError(
            f"run {folder} failed: orchestrator exited with code {code}; see {folder / 'logs'}"
        )


def run_over_api(
    spec: ExperimentSpec, folder: Path, on_row: OnRow, client: Any, poll_seconds: float = 2.0
) -> None:
    """Submit one experiment (or wait on the one submitted before) and copy its metrics into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    record = folder / "api_experiment.json"
    if record.exists():
        experiment_id = json.loads(record.read_text())["id"]
    else:
        experiment_id = client.submit(spec.model_dump(mode="json", exclude_none=True)).id
        record.write_text(json.dumps({"id": experiment_id, "api": client.api_url}))
    seen = 0
    while True:
        experiment = client.get(experiment_id)
        rows = client.metrics(experiment_id)
        for row in rows[seen:]:
            on_row(row)
        seen = len(rows)
        if experiment.final:
            break
        time.sleep(poll_seconds)
    RunFolder(folder).metrics_path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    if experiment.status != "succeeded":
        raise RuntimeError(f"experiment {experiment_id} ended {experiment.status}: {experiment.error or ''}")


def run_all(
    runs: Sequence[PlannedRun],
    out: Path,
    console: Console,
    *,
    client: Any = None,
) -> None:
    """Run every unfinished run of ``runs`` under one progress display (locally each with its
    ``pools``: two emulated node pools or every core)."""
    with StudyProgress(runs, console) as progress:
        for run in runs:
            folder = run_dir(out, run)
            if client is None:
                # A folder run under another spec (the study file edited since) is neither reused nor continued.
                check_recorded_spec(folder, run.spec, same_model=same_build)
            if is_finished(folder, run.spec):
                console.print(f"{run.key}: finished before, skipped")
            else:
                on_row = progress.start(run, RunFolder(folder).last_step())
                if client is None:
                    run_local(run.spec, folder, on_row, pools=run.pools)
                else:
                    run_over_api(run.spec, folder, on_row, client)
            progress.finish(run)
