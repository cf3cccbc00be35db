"""``lecritique experiments list | get | metrics | logs | cancel | wait | report``: read and steer submitted runs."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Annotated

import typer

from lecritique.cli.client_options import ApiOption, PollOption, api_client, finish_waiting, progress_printer

experiments_app = typer.Typer(
    name="experiments", help="Experiments submitted to the REST API.", no_args_is_help=True
)
IdArgument = Annotated[str, typer.Argument(help="Experiment id (exp-...).")]


@experiments_app.command("list")
def list_experiments(
    api: ApiOption = None,
    limit: Annotated[int, typer.Option(help="Most experiments to show.")] = 50,
    offset: Annotated[int, typer.Option(help="Skip this many (newest first).")] = 0,
) -> None:
    """Your experiments, newest first: id, status, step, submission time, name (a header line first)."""
    with api_client(api) as client:
        experiments = client.list(limit=limit, offset=offset)
    if not experiments:
        typer.echo(
            "no experiments"
            + (f" after the first {offset}" if offset else "")
            + ": `lecritique submit SPEC` starts one",
            err=True,
        )
        return
    typer.echo(f"{'ID':<14}  {'STATUS':<10}  {'STEP':>6}  {'SUBMITTED':<16}  NAME")
    for experiment in experiments:
        created = datetime.datetime.fromtimestamp(experiment.created_at).strftime("%Y-%m-%d %H:%M")
        step = "-" if experiment.step is None else str(experiment.step)
        typer.echo(
            f"{experiment.id:<14}  {experiment.status:<10}  {step:>6}  {created:<16}  {experiment.name}"
        )


@experiments_app.command("get")
def get(experiment_id: IdArgument, api: ApiOption = None) -> None:
    """Everything the API knows about one experiment, as JSON (status, step, versions, latest metrics, spec)."""
    with api_client(api) as client:
        typer.echo(client.get(experiment_id).model_dump_json(indent=2))


@experiments_app.command("metrics")
def metrics(
    experiment_id: IdArgument,
    api: ApiOption = None,
    offset: Annotated[int, typer.Option(help="Start at this row (0: the first step recorded).")] = 0,
) -> None:
    """Its metrics, one JSON line per policy step (as metrics.jsonl)."""
    with api_client(api) as client:
        for row in client.iter_metrics(experiment_id, offset=offset):
            typer.echo(json.dumps(row))


@experiments_app.command("logs")
def logs(
    experiment_id: IdArgument,
    api: ApiOption = None,
    component: Annotated[
        str,
        typer.Option(help="run (the console of lecritique run) or a service: orchestrator, rollout-0, ..."),
    ] = "run",
    tail: Annotated[int, typer.Option(help="Last lines.")] = 200,
) -> None:
    """The last lines of a local run's log."""
    with api_client(api) as client:
        typer.echo(client.logs(experiment_id, component=component, tail=tail), nl=False)


@experiments_app.command("cancel")
def cancel(experiment_id: IdArgument, api: ApiOption = None) -> None:
    """Stop it (its record stays): prints the new status."""
    with api_client(api) as client:
        experiment = client.cancel(experiment_id)
        typer.echo(f"{experiment.id} {experiment.status}")


@experiments_app.command("wait")
def wait(experiment_id: IdArgument, api: ApiOption = None, poll: PollOption = 5.0) -> None:
    """Follow its progress until it ends; exit 0 if it succeeded, 1 otherwise."""
    with api_client(api) as client:
        finish_waiting(client.wait(experiment_id, poll_seconds=poll, on_update=progress_printer()))


@experiments_app.command("report")
def report(
    experiment_id: IdArgument,
    out: Annotated[Path, typer.Option(help="Folder for report.png and report.md.")] = Path("."),
    api: ApiOption = None,
) -> None:
    """Download its report (curves and summary, drawn from the metrics so far)."""
    with api_client(api) as client:
        png, markdown = client.download_report(experiment_id, out)
        typer.echo(f"{markdown}\n{png}")
