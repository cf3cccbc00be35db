"""``lecritique login``: check a bearer token against the API and store it for the client commands."""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from lecritique.cli.client_options import ApiOption, exit_for, show_retry


def login(
    api: ApiOption = None,
    token_stdin: Annotated[
        bool, typer.Option("--token-stdin", help="Read the token from stdin instead of a prompt.")
    ] = False,
) -> None:
    """Ask for your token, check it with the API, and save both in the client config file (mode 0600)."""
    from lecritique.client import ApiError, LecritiqueClient, Unauthorized
    from lecritique.client.settings import TOKEN_ENV, resolve_settings, write_config

    # A prompt needs a terminal: piped input is read as --token-stdin would (getpass would warn
    # that it cannot hide the echo, then read it anyway).
    piped = token_stdin or not sys.stdin.isatty()
    token = sys.stdin.readline().strip() if piped else typer.prompt("token", hide_input=True).strip()
    if not token:
        raise typer.BadParameter("empty token" + (" on stdin" if piped else ""))
    url = resolve_settings(api).api_url
    try:
        with LecritiqueClient(url, token, on_retry=show_retry) as client:
            client.list(limit=1)  # a wrong token stops here (401): nothing is saved
    except Unauthorized:
        typer.secho(
            f"error: the API at {url} refused this token; nothing was saved. Check it with whoever runs the API "
            "(`lecritique api hash-token TENANT` makes a token and the hash the API must be given)",
            fg="red",
            err=True,
        )
        raise typer.Exit(3) from None
    except (ApiError, TimeoutError, ValueError, OSError) as error:
        exit_for(error)
    path = write_config(url, token)
    typer.echo(f"logged in to {url}; token saved in {path}")
    if os.environ.get(TOKEN_ENV):
        typer.echo(f"note: {TOKEN_ENV} is set and takes precedence over the saved token", err=True)
