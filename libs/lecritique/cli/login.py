"""``lecritique login``: check a bearer token against the API and store it for the client commands."""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from lecritique.cli.client_options import ApiOption, api_client


def login(
    api: ApiOption = None,
    token_stdin: Annotated[bool, typer.Option("--token-stdin", help="Read the token from stdin instead of a prompt.")] = False,
) -> None:
    """Ask for your token, check it with the API, and save both in the client config file (mode 0600)."""
    from lecritique.client.settings import TOKEN_ENV, resolve_settings, write_config

    token = sys.stdin.readline().strip() if token_stdin else typer.prompt("token", hide_input=True).strip()
    if not token:
        raise typer.BadParameter("empty token")
    url = resolve_settings(api).api_url
    with api_client(url, token) as client:
        client.list(limit=1)  # a wrong token stops here (401): nothing is saved
    path = write_config(url, token)
    typer.echo(f"logged in to {url}; token saved in {path}")
    if os.environ.get(TOKEN_ENV):
        typer.echo(f"note: {TOKEN_ENV} is set and takes precedence over the saved token", err=True)
