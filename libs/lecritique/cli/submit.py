"""``lecritique submit SPEC``: send a spec to the REST API; print the experiment id (``--wait``: follow it)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lecritique.cli.client_options import ApiOption, PollOption, api_client, finish_waiting, progress_printer
from lecritique.cli.spec_options import SetOption


def submit(
    spec: Annotated[
        Path,
        typer.Argument(help="Experiment spec (YAML or JSON), sent as written.", exists=True, dir_okay=False),
    ],
    wait: Annotated[
        bool, typer.Option("--wait", help="Follow its progress until it ends; exit 1 unless it succeeded.")
    ] = False,
    api: ApiOption = None,
    poll: PollOption = 5.0,
    overrides: SetOption = None,
) -> None:
    """Submit an experiment; prints its id on stdout (progress and errors go to stderr).

    The API validates the spec: a bad field is reported with its path and the reason (exit 2).
    Paths in the spec (a dataset file, a model) are read where the experiment runs.
    """
    from lecritique.client import spec_document

    document = spec_document(spec)
    if overrides:
        from lecritique.config import ExperimentSpec
        from lecritique.config.overrides import OverrideError, apply_overrides

        try:
            document = apply_overrides(document, overrides, ExperimentSpec)
        except OverrideError as error:
            typer.secho(str(error), fg="red", err=True)
            raise typer.Exit(2) from None
    environment = document.get("environment") or {}
    if (
        isinstance(environment, dict)
        and isinstance(environment.get("path"), str)
        and not Path(environment["path"]).is_absolute()
    ):
        typer.secho(
            f"warning: environment.path {environment['path']!r} is relative; the API reads it where the experiment runs, "
            "not next to this file: give an absolute path there",
            fg="yellow",
            err=True,
        )
    with api_client(api) as client:
        experiment = client.submit(document)
        typer.echo(experiment.id)
        for warning in experiment.warnings:
            typer.secho(f"warning: {warning}", fg="yellow", err=True)
        if wait:
            finish_waiting(client.wait(experiment.id, poll_seconds=poll, on_update=progress_printer()))
