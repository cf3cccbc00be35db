"""``lecritique run SPEC --out DIR``: a whole experiment as local processes, with progress."""

from __future__ import annotations

import logging
import math
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from lecritique.config import ExperimentSpec


def run(
    spec: Annotated[Path, typer.Argument(help="Experiment spec (YAML or JSON).", exists=True, dir_okay=False)],
    out: Annotated[Path, typer.Option(help="Run directory (created; an existing one is resumed).")],
    redis_url: Annotated[str | None, typer.Option(envvar="REDIS_URL", help="Use this Redis instead of an embedded one.")] = None,
    cache_dir: Annotated[Path | None, typer.Option(help="Cache of built tiny models.")] = None,
    experiment_id: Annotated[
        str | None, typer.Option("--experiment", help="Experiment id (Redis keys, metric labels); default: the spec's name.")
    ] = None,
    log_level: Annotated[str, typer.Option(help="Logging level of this launcher.")] = "WARNING",
) -> None:
    """Start every service on loopback, run the experiment, stop everything, write the report.

    SIGTERM and Ctrl-C stop the experiment cleanly; further signals are ignored until every
    service has stopped, so no process is left behind.
    """
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s run %(levelname)s %(name)s: %(message)s")
    from rich.console import Console

    from lecritique.launch.local import LocalLauncher, resolve_policy
    from lecritique.reporting import write_report

    console = Console()
    experiment = _checked_spec(spec, console)
    if experiment.policy.tiny is not None:
        # build_tiny shows its own progress bar (a first build takes a few minutes; later runs hit the cache).
        console.print(f"tiny policy model {experiment.policy.tiny!r}: built once, then taken from the cache")
    experiment = resolve_policy(experiment, cache_dir)
    launcher = LocalLauncher(experiment, out, redis_url=redis_url, experiment_id=experiment_id)
    code = 1

    def terminate(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, terminate)
    try:
        with console.status("starting services"):
            launcher.start_services()
        launcher.start_orchestrator()
        code = _follow(launcher, experiment.orchestrator.steps, console)
    except KeyboardInterrupt:
        console.print("interrupted: stopping every service")
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        launcher.stop()
    if (out / "metrics.jsonl").exists():
        png, md = write_report(out, title=experiment.name)
        console.print(f"report: {md} and {png}")
    if code != 0:
        console.print(f"[red]orchestrator exited with code {code}; see {out / 'logs'}")
        raise typer.Exit(code or 1)


def _checked_spec(spec: Path, console: Any) -> ExperimentSpec:
    """The spec, loaded and checked as far as this machine can (exit 2 with the reason if not)."""
    from lecritique.config import SpecError, load_spec
    from lecritique.tracking import check_tracker_packages

    try:
        experiment = load_spec(spec)
        check_tracker_packages(experiment.tracking)
        if experiment.environment.kind == "dataset":
            # Read and check every row now: a bad row is reported here, not in a service's log.
            from lecritique.envs import build_environment

            build_environment(experiment.environment)
    except (SpecError, ImportError, ValueError) as error:
        console.print(f"[red]{error}")
        raise typer.Exit(2) from None
    return experiment


def _follow(launcher: Any, steps: int, console: Any) -> int:
    """Show the policy steps as they finish; returns the orchestrator's exit code."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        TextColumn("{task.fields[summary]}"),
    )
    with Progress(*columns, console=console) as progress:
        task = progress.add_task("policy steps", total=steps, summary="warming up the critic")

        def on_metrics(row: dict[str, Any]) -> None:
            def fmt(key: str) -> str:
                value = row.get(key)
                return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"

            progress.update(
                task, completed=row["step"],
                summary=f"reward {fmt('reward_mean')}  EV {fmt('value_explained_variance')}  rho {fmt('tether_rho')}",
            )

        code: int = launcher.wait(on_metrics)
    return code
