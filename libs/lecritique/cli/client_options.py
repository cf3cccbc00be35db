"""What the client commands share: the --api option, opening a client, and error messages with exit codes."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

if TYPE_CHECKING:
    from lecritique.client import Experiment, LecritiqueClient

ApiOption = Annotated[
    str | None,
    typer.Option(
        "--api",
        help="REST API base URL (default: LECRITIQUE_API_URL, the login file, http://127.0.0.1:8000).",
    ),
]
PollOption = Annotated[float, typer.Option(help="Seconds between status polls while waiting.")]

EXIT_CODES = {401: 3, 403: 3, 404: 4, 422: 2, 503: 5}
"""Exit code per API answer (anything else: 1)."""


def show_retry(problem: str, failed: int, tries: int, wait: float) -> None:
    """Each failed try as it happens, so a stopped API is not seconds of silence."""
    typer.echo(f"{problem}; try {failed}/{tries} failed, retrying in {wait:.1f} s", err=True)


@contextmanager
def api_client(api: str | None, token: str | None = None) -> Iterator[LecritiqueClient]:
    """A client for the command; API errors end the command with their message and exit code."""
    from lecritique.client import ApiError, LecritiqueClient

    try:
        with LecritiqueClient(api, token, on_retry=show_retry) as client:
            yield client
    except (ApiError, TimeoutError, ValueError, OSError) as error:
        exit_for(error)


def exit_for(error: Exception) -> NoReturn:
    """End the command with the error's message and its exit code (:data:`EXIT_CODES`)."""
    from lecritique.client import ApiError, Unavailable

    typer.secho(f"error: {error}", fg="red", err=True)
    if isinstance(error, Unavailable) and "cannot reach the API" in str(error):
        typer.echo(
            "is the API running? `lecritique api serve --dev` starts one on this machine "
            "(docs/deployment.md, Local mode); --api or LECRITIQUE_API_URL names another",
            err=True,
        )
    raise typer.Exit(EXIT_CODES.get(error.status or 0, 1) if isinstance(error, ApiError) else 1) from None


def _number(row: dict[str, Any] | None, key: str) -> str:
    value = (row or {}).get(key)
    return "-" if not isinstance(value, int | float) or math.isnan(value) else f"{value:.3f}"


def progress_printer() -> Callable[[Experiment], None]:
    """Print a line to stderr whenever the status or the step changes."""
    seen: list[tuple[str, int | None]] = []

    def show(experiment: Experiment) -> None:
        key = (experiment.status, experiment.step)
        if seen and seen[-1] == key:
            return
        seen.append(key)
        total = ((experiment.spec or {}).get("orchestrator") or {}).get("steps")
        where = f"step {experiment.step or 0}" + (f"/{total}" if total else "")
        row = experiment.latest_metrics
        print(
            f"{experiment.id} {experiment.status:<10} {where}  reward {_number(row, 'reward_mean')}"
            f"  EV {_number(row, 'value_explained_variance')}  rho {_number(row, 'tether_rho')}",
            file=sys.stderr,
            flush=True,
        )

    return show


def finish_waiting(experiment: Experiment) -> None:
    """Exit 0 when it succeeded; otherwise say how it ended and exit 1."""
    if experiment.status == "succeeded":
        typer.echo(f"{experiment.id} succeeded at step {experiment.step}", err=True)
        return
    typer.secho(
        f"{experiment.id} {experiment.status}" + (f": {experiment.error}" if experiment.error else ""),
        fg="red",
        err=True,
    )
    raise typer.Exit(1)
